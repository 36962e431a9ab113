-- cool.lua: cools a settled sale (docs/MODEL.md "Hot and cold sales"): removes its seven keys,
-- so that the database is its only record, once nothing can change it by itself and every
-- reader of its stream has finished with it. The sweeper calls it for the sales that leave
-- their hot window (sweeper.go); a call that finds the sale not yet settled changes nothing.
-- KEYS: the sale's seven keys (common.lua), optionally followed by its waiting room's five
-- (room_common.lua), removed with them.
-- ARGV: [1] clock (common.lua); [2] margin: ms after ends + hold that the sale stays hot
-- (seckill.CoolMargin), 0 to 86400000.
-- Returns: {'ok', 'cooled'}; {'ok', 'wait', ms} when the sale's window has ms to go (ends + hold
-- + margin); {'ok', 'busy', why} when something can still change it or is still to be read: 'live' (a hold, a
-- queue, a rebuild), 'segmented' (a segmented sale is not cooled), 'stream' (a consumer group
-- has entries not yet delivered or not acknowledged, or the stream has entries and no group);
-- {'not_loaded'} when the keys are gone already.
-- @common

-- stream_read reports whether every consumer group of the stream has every entry delivered and
-- acknowledged; a stream with entries and no group has a reader still to come.
local function stream_read()
  if redis.call('EXISTS', KEYS[7]) == 0 then
    return true
  end
  local info = redis.call('XINFO', 'STREAM', KEYS[7])
  local last, len = nil, 0
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      last = info[i + 1]
    elseif info[i] == 'length' then
      len = info[i + 1]
    end
  end
  local groups = redis.call('XINFO', 'GROUPS', KEYS[7])
  if #groups == 0 then
    return len == 0
  end
  for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    if f['pending'] > 0 or f['last-delivered-id'] ~= last then
      return false
    end
  end
  return true
end

local function main()
  begin()
  local margin = int_arg(ARGV[2], 'margin', 0, 86400000)
  if not load_state() then
    return {'not_loaded'}
  end
  if S.segs > 1 then
    return {'ok', 'busy', 'segmented'}
  end
  local hot_until = S.ends + S.hold * 1000 + margin
  if now < hot_until then
    return {'ok', 'wait', hot_until - now}
  end
  if S.loading == 1 or S.held > 0 or S.qlen > 0 or S.nexp ~= 0 or S.pend > 0 then
    return {'ok', 'busy', 'live'}
  end
  if not stream_read() then
    return {'ok', 'busy', 'stream'}
  end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
  if #KEYS > 7 then -- the sale's waiting room: the sale is past its hot window, the room over
    redis.call('DEL', unpack(KEYS, 8))
  end
  return {'ok', 'cooled'}
end

return with_version(main())
