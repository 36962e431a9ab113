-- room_tell.lua: RoomTeller.TellAdmitted: tells the room's admissions up to an index (room.go;
-- docs/DECISIONS.md "An admission is told once it is journaled"): their tickets read admitted
-- from now on.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] n, the last admission to tell (0 to 10^9): the told count
--       is raised to the least of n and those admitted, never lowered, and never once the room
--       has closed (its untold were told the closing state: another instance's admitter may
--       close the room between this one's admission and its tell).
-- Returns: {'ok', told}; {'no_room'} for a sale without a room; {'not_loaded'} / {'loading'} /
--          {'segmented'} / {'restoring'}.
-- @room
local function main()
  room_begin()
  local n = int_arg(ARGV[2], 'told', 0, MAX_QUANTITY)
  if ARGV[3] ~= nil then
    fail('want 2 arguments, got ' .. #ARGV)
  end
  local missing = room_open()
  if missing then
    return missing
  end
  n = math.min(n, R.admitted)
  if n > R.told and R.closed == 0 then
    local k = n - R.told
    local u = redis.call('HGET', KEYS[2], 'u')
    local rest = {}
    if u then
      local all = {cmsgpack.unpack(u)}
      for i = k + 1, #all do
        rest[#rest + 1] = all[i]
      end
    end
    if #rest > 0 then
      redis.call('HSET', KEYS[2], 'u', cmsgpack.pack(unpack(rest)))
    else
      redis.call('HDEL', KEYS[2], 'u')
    end
    R.told = n
    rchanged = true
  end
  return {'ok', R.told}
end

local out = main()
save_room()
return with_room_version(out)
