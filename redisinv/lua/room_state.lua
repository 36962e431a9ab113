-- room_state.lua: WaitingRooms.Room: the room's counts, read only.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua).
-- Returns: <counts> (room_common.lua room_counts; zero counts when nobody joined);
--          {'not_loaded'} / {'loading'} / {'segmented'}.
-- @room
local function main()
  room_begin()
  if ARGV[2] ~= nil then
    fail('want 1 argument, got ' .. #ARGV)
  end
  local missing = room_ready()
  if missing then
    return missing
  end
  return room_counts()
end

return with_room_version(main())
