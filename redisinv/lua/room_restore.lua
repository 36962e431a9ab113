-- room_restore.lua: RoomRestorer.RestoreRoom, and the last step of a rebuild of a sale with a
-- room (docs/DECISIONS.md "Rooms recover from the database"): replaces the sale's room with the
-- one its journal makes, in steps of bounded work: 'begin', then 'add' per chunk of entrants,
-- then 'end'. From 'begin' to 'end' the room's hash holds the field p (the restore's mark) and
-- every other room script answers {'restoring'}: nobody joins or is admitted in a half-made room.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] step: 'begin', 'add' or 'end'; [3] the rebuild's token
--       (load.lua), or '' outside a rebuild: with a token the sale must be loading under it,
--       without one it must be loaded and not loading. Then for 'begin' nothing; for 'add' [4]
--       when the admitted ones were admitted (ms: the journal's time of its count; taken no
--       later than now and no earlier than the start), then up to 500 entrants of 6 arguments
--       each: entrant (32 hex), joined (ms), drawn (0/1), arrival (1 to 10^9), score (its place
--       in rwait: its draw key below 2^48, or 2^48 + arrival) and index (its 1-based place in
--       the order when admitted, else 0); for 'end' [4] entrants, [5] those drawn (the
--       pre-queue), [6] admitted, [7] the last arrival's number.
-- Returns: {'ok'}; {'not_loaded'}; {'loading'} (no token, and the sale is being rebuilt);
--          {'fenced'} (a token, and the sale is not loading under it); {'no_room'};
--          {'segmented'}; {'not_begun'} for an 'add' or 'end' without the mark of this restore.
-- An admitted entrant's place counts against max_active until its admission's time plus
-- token_seconds (the journal keeps no releases); the admission bucket starts empty at 'end'.
-- @room
local function main()
  room_begin()
  local step = ARGV[2]
  if step ~= 'begin' and step ~= 'add' and step ~= 'end' then
    fail("step must be 'begin', 'add' or 'end'")
  end
  local token = ARGV[3]
  if token ~= '' then
    token_arg(token)
  end
  local mark = token
  if mark == '' then
    mark = '-'
  end
  local adds = {}
  local fin, at
  if step == 'add' then
    at = int_arg(ARGV[4], 'admitted at', 0, MAX_EXACT)
    local n = #ARGV - 4
    if n % 6 ~= 0 or n / 6 > 500 then
      fail('an add takes up to 500 entrants of 6 arguments, got ' .. n .. ' arguments')
    end
    for i = 5, #ARGV, 6 do
      adds[#adds + 1] = {
        e = hex_arg(ARGV[i], 'entrant', 32),
        joined = int_arg(ARGV[i + 1], 'joined', 0, MAX_EXACT),
        drawn = int_arg(ARGV[i + 2], 'drawn', 0, 1),
        arrival = int_arg(ARGV[i + 3], 'arrival', 1, MAX_QUANTITY),
        score = int_arg(ARGV[i + 4], 'score', 0, TWO48 + MAX_QUANTITY),
        index = int_arg(ARGV[i + 5], 'index', 0, MAX_QUANTITY),
      }
    end
  elseif step == 'end' then
    fin = {
      entrants = int_arg(ARGV[4], 'entrants', 0, MAX_QUANTITY),
      pre = int_arg(ARGV[5], 'pre-queue', 0, MAX_QUANTITY),
      admitted = int_arg(ARGV[6], 'admitted', 0, MAX_QUANTITY),
      seq = int_arg(ARGV[7], 'last arrival', 0, MAX_QUANTITY),
    }
    if #ARGV ~= 7 then
      fail('end takes 7 arguments, got ' .. #ARGV)
    end
  elseif #ARGV ~= 3 then
    fail('begin takes 3 arguments, got ' .. #ARGV)
  end
  local missing = room_ready(true)
  if missing then
    return missing
  end
  if token == '' and S.loading == 1 then
    return {'loading'}
  end
  if token ~= '' and (S.loading ~= 1 or redis.call('HGET', KEYS[1], 'loader') ~= token) then
    return {'fenced'}
  end
  if not P then
    return {'no_room'}
  end
  room_check_types()
  if step == 'begin' then
    redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
    redis.call('HSET', KEYS[2], 'p', mark)
    return {'ok'}
  end
  if redis.call('HGET', KEYS[2], 'p') ~= mark then
    return {'not_begun'}
  end
  if step == 'add' then
    at = math.max(math.min(at, now), S.starts)
    local till = at + P.token * 1000
    for _, a in ipairs(adds) do
      local t = {joined = a.joined, drawn = a.drawn, admitted = 0, index = a.index, active = 0, arrival = a.arrival}
      if a.drawn == 1 then
        redis.call('ZADD', KEYS[4], '0', a.e)
      end
      if a.index == 0 then
        redis.call('ZADD', KEYS[3], num(a.score), a.e)
      else
        t.admitted, t.active = at, till
        if till > now then
          redis.call('ZADD', KEYS[6], num(till), a.e)
        end
      end
      put_ticket(a.e, t)
    end
    return {'ok'}
  end
  R = {entrants = fin.entrants, pre = fin.pre, admitted = fin.admitted, seq = fin.seq, closed = 0, credit = -1,
    refill = 0, told = fin.admitted, closedat = 0} -- the journal's count is of admissions told
  if P.rate > 0 and now >= S.starts then
    R.credit, R.refill = 0, now -- an empty bucket: no burst on top of what was admitted before
  end
  rchanged = true
  redis.call('HDEL', KEYS[2], 'p')
  return {'ok'}
end

local out = main()
save_room()
return with_room_version(out)
