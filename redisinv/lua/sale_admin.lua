-- sale_admin.lua: SetListed, CloseUnreserved and DropSale (seckill.SaleAdmin).
-- KEYS: the sale's seven keys (common.lua), optionally followed by its waiting room's five
-- (room_common.lua), which 'drop' removes too.
-- ARGV: [1] clock (common.lua); [2] op:
--       'list' / 'unlist': sets the sale's listed field;
--       'close_unreserved': closes the sale as close.lua does, if no reservation was ever made in
--         it (seq 0, no reservation kept) and nothing is sold;
--       'drop': deletes every key of a closed sale that has no reservation and nothing sold (its
--         stream, which then holds no entry, included).
-- Returns: <sale> (see sale_reply) for 'list', 'unlist' and 'close_unreserved'; {'ok'} for
--          'drop'; {'conflict'} when the sale has reservations (or, for 'drop', is open); or
--          {'not_loaded'} / {'loading'}.
-- @common
local function main()
  begin()
  local op = ARGV[2]
  if op ~= 'list' and op ~= 'unlist' and op ~= 'close_unreserved' and op ~= 'drop' then
    fail("op must be 'list', 'unlist', 'close_unreserved' or 'drop'")
  end
  local missing = ready()
  if missing then
    return missing
  end
  if op == 'list' or op == 'unlist' then
    reclaim(RECLAIM)
    local listed = '1'
    if op == 'unlist' then
      listed = '0'
    end
    redis.call('HSET', KEYS[1], 'listed', listed)
    return sale_reply()
  end
  if S.seq ~= 0 or S.sold ~= 0 or redis.call('HLEN', KEYS[2]) ~= 0 then
    return {'conflict'}
  end
  if op == 'drop' then
    if S.closed ~= 1 then
      return {'conflict'}
    end
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
    if #KEYS > 7 then -- the sale's waiting room
      redis.call('DEL', unpack(KEYS, 8))
    end
    return {'ok'}
  end
  S.closed = 1
  if now < S.ends then
    S.ends = now
  end
  changed = true
  return sale_reply()
end

local out = main()
if ARGV[2] ~= 'drop' then
  save_state()
end
return with_version(out)
