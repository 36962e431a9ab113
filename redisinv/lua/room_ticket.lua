-- room_ticket.lua: WaitingRooms.Ticket: an entrant's ticket, read only.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] entrant (32 lower-case hex).
-- Returns: <ticket> (room_common.lua ticket_reply); {'not_found'} when it never joined;
--          {'not_loaded'} / {'loading'} / {'segmented'}.
-- @room
local function main()
  room_begin()
  local e = hex_arg(ARGV[2], 'entrant', 32)
  local missing = room_ready()
  if missing then
    return missing
  end
  local t = get_ticket(e)
  if not t then
    return {'not_found'}
  end
  return ticket_reply(e, t)
end

return with_room_version(main())
