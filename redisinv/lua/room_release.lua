-- room_release.lua: WaitingRooms.Release: sets when an admitted entrant's place stops counting
-- against max_active.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] entrant (32 lower-case hex); [3] until (ms, 0 to 2^53):
--       the place counts until then, or ends now when until is not after now.
-- Returns: {'ok', 1} when the place changed, {'ok', 0} when nothing did (an entrant unknown,
--          not admitted (or not told: room_tell.lua), or whose place had ended: it is never revived); {'not_loaded'} /
--          {'loading'} / {'segmented'}.
-- @room
local function main()
  room_begin()
  local e = hex_arg(ARGV[2], 'entrant', 32)
  local till = int_arg(ARGV[3], 'until', 0, MAX_EXACT)
  local missing = room_ready()
  if missing then
    return missing
  end
  room_check_types()
  local t = get_ticket(e)
  if not t or t.index == 0 or t.index > R.told or t.active <= now then
    return {'ok', 0}
  end
  if till < now then
    till = now
  end
  t.active = till
  put_ticket(e, t)
  redis.call('ZADD', KEYS[6], num(till), e)
  rchanged = true
  return {'ok', 1}
end

local out = main()
save_room()
return with_room_version(out)
