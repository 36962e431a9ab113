-- trim.lua: drops the stream entries that every reader of the stream has finished with, so the
-- stream's memory stays bounded. The readers are the stream's consumer groups: the order
-- store's (ARGV[2]) and one per export sink (docs/EVENTS.md). Each group has finished with
-- everything before its oldest pending entry, or up to its last delivered entry when nothing
-- is pending; the stream is trimmed to the slowest group, so no reader loses an entry it has
-- not acknowledged. Entries newer than ARGV[3] milliseconds are kept even so (a sink added
-- later, and `seckill events replay`, find them). Entries never delivered to some group are
-- always kept, with one exception: past ARGV[4] entries, the oldest are dropped down to that
-- maximum even if an export group has not read them — but never one the order store's group
-- has not acknowledged. Those export losses are what the maximum trades for bounded memory;
-- the export's lag alarm fires well before it (docs/EVENTS.md).
-- KEYS: the sale's eight keys (common.lua); only KEYS[7], the stream, is used.
-- ARGV: [1] clock (common.lua); [2] the order store's consumer group (1 to 64 bytes);
-- [3] optional: keep entries newer than this many milliseconds (default 0);
-- [4] optional: most entries kept (default 0: no maximum).
-- Returns: {'ok', entries removed, entries left}; {'ok', 0, 0} when the stream or the order
-- store's group does not exist (nothing is trimmed before that group exists).
-- @common

-- id_parts splits a stream id "<ms>-<seq>" into two numbers.
local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end

-- id_less reports whether stream id a sorts before b.
local function id_less(a, b)
  local am, as = id_parts(a)
  local bm, bs = id_parts(b)
  return am < bm or (am == bm and as < bs)
end

local function main()
  begin()
  local group = str_arg(ARGV[2], 'group', 64)
  if group == '' then
    fail('group must not be empty')
  end
  local keep, most = 0, 0
  if ARGV[3] ~= nil then
    keep = int_arg(ARGV[3], 'keep', 0, MAX_EXACT)
  end
  if ARGV[4] ~= nil then
    most = int_arg(ARGV[4], 'most', 0, MAX_EXACT)
  end
  local kind = redis.call('TYPE', KEYS[7])['ok']
  if kind == 'none' then
    return {'ok', 0, 0}
  elseif kind ~= 'stream' then
    fail('KEYS[7] is a ' .. kind .. ', want a stream')
  end
  -- Each group's position: everything before it is finished with.
  local slowest, orders = nil, nil
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[7])) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    local pos = f['last-delivered-id']
    if f['pending'] > 0 then
      pos = redis.call('XPENDING', KEYS[7], f['name'])[2]
    end
    if f['name'] == group then
      orders = pos
    end
    if slowest == nil or id_less(pos, slowest) then
      slowest = pos
    end
  end
  if orders == nil then
    return {'ok', 0, 0}
  end
  local removed = 0
  local minid = slowest
  if keep > 0 then
    local recent = string.format('%d-0', math.max(now - keep, 0))
    if id_less(recent, minid) then
      minid = recent
    end
  end
  if minid ~= '0-0' then
    removed = redis.call('XTRIM', KEYS[7], 'MINID', minid)
  end
  local left = redis.call('XLEN', KEYS[7])
  if most > 0 and left > most then
    -- The entry that would be the oldest of `most`, unless the order store still needs older.
    local cut = redis.call('XREVRANGE', KEYS[7], '+', '-', 'COUNT', most)
    local first = cut[#cut][1]
    if orders ~= '0-0' and id_less(orders, first) then
      first = orders
    end
    if orders ~= '0-0' then
      local n = redis.call('XTRIM', KEYS[7], 'MINID', first)
      removed = removed + n
      left = left - n
    end
  end
  return {'ok', removed, left}
end

return with_version(main())
