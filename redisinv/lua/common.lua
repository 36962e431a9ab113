-- common.lua: the state, the helpers and the rules (docs/MODEL.md) that the scripts of this
-- directory share. It never runs on its own: the Go side splices it into each script at the
-- script's "-- @common" line.
--
-- KEYS (the same seven for every script; all belong to one sale and carry its hash tag
-- {sale:<id>}, so that every script is atomic on one Redis Cluster node):
--   KEYS[1] sale    HASH    the definition and the counters (fields below)
--   KEYS[2] res     HASH    reservation suffix -> cmsgpack(status, user, quantity, expires_ms,
--                           seq, amount, created_ms, payment_id, idempotency_key)
--   KEYS[3] holds   ZSET    suffix of every live hold, scored by expires_ms (reclaim order)
--   KEYS[4] queue   ZSET    suffix of every queued reservation, scored by seq (FIFO order)
--   KEYS[5] users   HASH    user -> units held + queued + paid (per-user limit)
--   KEYS[6] idem    HASH    user .. ':' .. idempotency key -> suffix (user ids have no ':')
--   KEYS[7] events  STREAM  one entry per reservation change, for the order store
-- ARGV[1] of every script is the clock: '' means Redis TIME, so that every instance shares one
-- clock (production); digits are milliseconds since the Unix epoch, sent only by an engine
-- built with a test clock (redisinv.WithTestClock). Whatever its source, a sale's clock never
-- goes back: a script uses the latest time any script of the sale has used (field "now").
-- Returns: what each script's header says. Domain outcomes are replies whose first element is
-- 'ok' or an error code ('not_loaded' when the sale's hash is missing, 'loading' while a rebuild
-- restores it); malformed arguments and keys are Redis errors ("ERR seckill: ...").
--
-- Sale hash fields: name, price, stock, holdback, starts, ends (ms), limit (per user), hold (s),
-- qlimit (buyers), created (ms), closed (0/1); avail, held, sold, qunits (units wanted by
-- queued buyers), seq (last reservation sequence), now (ms), loading (1 during a rebuild) and
-- loader (the rebuild's fencing token).
--
-- Every script validates all of its keys and arguments before its first write (Redis does not
-- roll back a script that fails half way) and compares replies explicitly: in Lua, 0 is true,
-- and a missing value is false, not nil.

local function fail(msg)
  error({err = 'ERR seckill: ' .. msg})
end

-- check_keys requires the seven keys of one sale, in order, under one prefix and hash tag.
local function check_keys()
  if #KEYS ~= 7 then
    fail('want the 7 keys of one sale, got ' .. #KEYS)
  end
  local base = string.match(KEYS[1], '^([^{}]*{sale:[A-Za-z0-9_.-]+}):sale$')
  if not base then
    fail('KEYS[1] must be <prefix without braces>{sale:<id>}:sale, got ' .. KEYS[1])
  end
  local parts = {'res', 'holds', 'queue', 'users', 'idem', 'events'}
  for i, part in ipairs(parts) do
    if KEYS[i + 1] ~= base .. ':' .. part then
      fail('KEYS[' .. (i + 1) .. '] must be ' .. base .. ':' .. part)
    end
  end
end

local MAX_EXACT = 9007199254740992 -- 2^53: integers above it are not exact in a Lua double
local MAX_QUANTITY = 1000000000    -- seckill.MaxQuantity
local RECLAIM = 256                -- most holds one state-changing call expires (bounded work)

-- int_arg accepts plain decimal digits only (tonumber would also take "inf", "1e300", "0x10"
-- and " 1"), between min and max. Digits are compared as text against 2^53 first: tonumber
-- would round 9007199254740993 down to 2^53 and let it through.
local function int_arg(v, name, min, max)
  local n = type(v) == 'string' and string.find(v, '^%d+$') and
    (#v < 16 or (#v == 16 and v <= '9007199254740992')) and tonumber(v)
  if not n or n < min or n > max then
    fail(string.format('%s must be an integer from %d to %d, got %s', name, min, max, tostring(v)))
  end
  return n
end

-- signed_arg is int_arg that also takes a leading '-'.
local function signed_arg(v, name)
  if type(v) == 'string' and string.sub(v, 1, 1) == '-' then
    return -int_arg(string.sub(v, 2), name, 0, MAX_EXACT)
  end
  return int_arg(v, name, 0, MAX_EXACT)
end

local function str_arg(v, name, maxlen)
  if type(v) ~= 'string' or #v > maxlen then
    fail(name .. ' must be a string of at most ' .. maxlen .. ' bytes')
  end
  return v
end

-- id_arg is a user id: 1-64 of [A-Za-z0-9_.-] (seckill.ValidID).
local function id_arg(v, name)
  if type(v) ~= 'string' or #v > 64 or not string.find(v, '^[A-Za-z0-9_.-]+$') then
    fail(name .. ' must be 1-64 of [A-Za-z0-9_.-]')
  end
  return v
end

-- hex_arg is exactly n lowercase hex digits (reservation suffixes and their random halves).
local function hex_arg(v, name, n)
  if type(v) ~= 'string' or #v ~= n or not string.find(v, '^[0-9a-f]+$') then
    fail(name .. ' must be ' .. n .. ' lowercase hex digits')
  end
  return v
end

-- token_arg is a rebuild's token: "<lock fencing token>-<hex>", at most 64 bytes.
local function token_arg(v)
  if type(v) ~= 'string' or #v > 64 or not string.find(v, '^%d+%-[0-9a-f]+$') then
    fail('token must be <digits>-<lowercase hex>, at most 64 bytes')
  end
  return v
end

local function status_arg(v)
  local ok = {queued = 1, held = 1, paid = 1, cancelled = 1, expired = 1, rejected = 1, refund_required = 1}
  if type(v) ~= 'string' or not ok[v] then
    fail('status must be a reservation status, got ' .. tostring(v))
  end
  return v
end

-- clock_arg reads ARGV[1]: Redis TIME when empty, else the test clock's milliseconds.
local function clock_arg(v)
  if v == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return int_arg(v, 'clock', 0, MAX_EXACT)
end

-- check_types requires each of the sale's other keys to be of its type or absent, so that a
-- corrupted key fails the script before its first write rather than half way through it.
local KEY_TYPES = {'hash', 'zset', 'zset', 'hash', 'hash', 'stream'}
local function check_types()
  for i, want in ipairs(KEY_TYPES) do
    local got = redis.call('TYPE', KEYS[i + 1])['ok']
    if got ~= want and got ~= 'none' then
      fail('KEYS[' .. (i + 1) .. '] is a ' .. got .. ', want a ' .. want)
    end
  end
end

local now     -- the script's time in ms, set by the script before load_state
local S       -- the sale's definition and counters, once load_state found them
local changed -- whether save_state has counters to write

-- load_state reads the sale's hash into S. It returns false when the sale is not loaded.
local function load_state()
  local v = redis.call('HMGET', KEYS[1], 'price', 'stock', 'holdback', 'starts', 'ends', 'limit',
    'hold', 'qlimit', 'closed', 'avail', 'held', 'sold', 'qunits', 'seq', 'now', 'loading', 'loader')
  if not v[1] then
    return false
  end
  S = {
    price = tonumber(v[1]), stock = tonumber(v[2]), holdback = tonumber(v[3]),
    starts = tonumber(v[4]), ends = tonumber(v[5]), limit = tonumber(v[6]), hold = tonumber(v[7]),
    qlimit = tonumber(v[8]), closed = tonumber(v[9]), avail = tonumber(v[10]),
    held = tonumber(v[11]), sold = tonumber(v[12]), qunits = tonumber(v[13]), seq = tonumber(v[14]),
    now = tonumber(v[15]), loading = tonumber(v[16]), loader = v[17] or '',
    qlen = redis.call('ZCARD', KEYS[4]),
  }
  if S.now > now then
    now = S.now
  end
  check_types()
  return true
end

-- save_state writes the counters back once, at the end of a script that changed them.
local function save_state()
  if not changed then
    return
  end
  redis.call('HSET', KEYS[1], 'avail', S.avail, 'held', S.held, 'sold', S.sold, 'qunits', S.qunits,
    'seq', S.seq, 'now', now, 'stock', S.stock, 'ends', S.ends, 'closed', S.closed)
end

local function get_res(id)
  local v = redis.call('HGET', KEYS[2], id)
  if not v then
    return nil
  end
  local st, user, q, exp, seq, amount, created, pid, key = cmsgpack.unpack(v)
  return {id = id, status = st, user = user, q = q, exp = exp, seq = seq, amount = amount,
    created = created, pid = pid, key = key}
end

local function put_res(r)
  redis.call('HSET', KEYS[2], r.id,
    cmsgpack.pack(r.status, r.user, r.q, r.exp, r.seq, r.amount, r.created, r.pid, r.key))
  changed = true
end

-- emit appends r, as it is after its change, to the sale's stream: in the same script as the
-- change, so that the order store can never miss one (no dual write).
local function emit(r)
  local a = {'XADD', KEYS[7], '*', 'id', r.id, 's', r.status, 'u', r.user, 'q', r.q, 'n', r.seq,
    'a', r.amount, 'c', r.created, 't', now}
  if r.status == 'held' then
    a[#a + 1], a[#a + 2] = 'e', r.exp
  end
  if r.pid ~= '' then
    a[#a + 1], a[#a + 2] = 'p', r.pid
  end
  if r.key ~= '' then
    a[#a + 1], a[#a + 2] = 'k', r.key
  end
  redis.call(unpack(a))
end

local function user_units(user)
  return tonumber(redis.call('HGET', KEYS[5], user) or '0')
end

local function user_add(user, d)
  if redis.call('HINCRBY', KEYS[5], user, d) <= 0 then
    redis.call('HDEL', KEYS[5], user)
  end
end

-- open: buying is open, starts <= now < ends and not closed.
local function open()
  return S.closed == 0 and S.starts <= now and now < S.ends
end

-- window_code is nil while buying is open, else not_started or ended (in that order, as
-- seckill.Sale.WindowError: a sale closed before its start still reads not_started).
local function window_code()
  if now < S.starts then
    return 'not_started'
  end
  if now >= S.ends or S.closed == 1 then
    return 'ended'
  end
  return nil
end

-- hold gives r a fresh hold of its units, from now.
local function hold(r)
  r.status, r.exp = 'held', now + S.hold * 1000
  S.avail, S.held = S.avail - r.q, S.held + r.q
  redis.call('ZADD', KEYS[3], r.exp, r.id)
  changed = true
end

-- dequeue takes queued r out of the queue (its units stay counted for the user).
local function dequeue(r)
  redis.call('ZREM', KEYS[4], r.id)
  S.qlen, S.qunits = S.qlen - 1, S.qunits - r.q
  changed = true
end

local function reject(r)
  dequeue(r)
  user_add(r.user, -r.q)
  r.status = 'rejected'
  put_res(r)
  emit(r)
end

local function reject_queue()
  while S.qlen > 0 do
    local ids = redis.call('ZRANGE', KEYS[4], 0, 255)
    if #ids == 0 then
      S.qlen = 0
      break
    end
    for _, id in ipairs(ids) do
      reject(get_res(id))
    end
  end
end

-- serve hands free units to the earliest queued buyers (docs/MODEL.md "Serving the queue").
local function serve()
  if not open() then
    reject_queue()
    return
  end
  while S.qlen > 0 do
    local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
    if not head then
      S.qlen = 0
      break
    end
    local r = get_res(head)
    if S.avail >= r.q then
      dequeue(r)
      hold(r)
      put_res(r)
      emit(r)
    elseif S.avail + S.held < r.q then
      reject(r)
    else
      break -- the head waits, and everyone behind it
    end
  end
  if S.avail == 0 and S.held == 0 then
    reject_queue()
  end
end

-- reclaim expires up to limit holds whose expiry has passed, earliest first, then serves the
-- queue. It returns how many it expired and whether it stopped at the limit.
local function reclaim(limit)
  local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
  local n = 0
  for _, id in ipairs(ids) do
    local r = get_res(id)
    if r and r.status == 'held' then
      S.held, S.avail = S.held - r.q, S.avail + r.q
      user_add(r.user, -r.q)
      r.status, r.exp = 'expired', 0
      put_res(r)
      emit(r)
      n = n + 1
    end
  end
  if #ids > 0 then
    redis.call('ZREM', KEYS[3], unpack(ids))
    changed = true
  end
  if n > 0 or (S.qlen > 0 and not open()) then
    serve()
  end
  return n, #ids == limit
end

-- res_reply is {'ok', flag, id suffix, status, user, quantity, expires_ms (0 unless held), seq,
-- amount, created_ms, payment id, idempotency key, position (0 unless queued)}.
local function res_reply(flag, r)
  local pos, exp = 0, 0
  if r.status == 'queued' then
    pos = redis.call('ZRANK', KEYS[4], r.id) + 1
  elseif r.status == 'held' then
    exp = r.exp
  end
  return {'ok', flag, r.id, r.status, r.user, r.q, exp, r.seq, r.amount, r.created, r.pid, r.key, pos}
end

-- sale_reply is {'ok', name, price, stock, holdback, starts, ends, limit, hold, qlimit,
-- created, avail, held, sold, qunits}.
local function sale_reply()
  local v = redis.call('HMGET', KEYS[1], 'name', 'created')
  return {'ok', v[1], S.price, S.stock, S.holdback, S.starts, S.ends, S.limit, S.hold, S.qlimit,
    tonumber(v[2]), S.avail, S.held, S.sold, S.qunits}
end

-- begin validates the keys and reads the clock; ready loads the sale and refuses a sale that is
-- missing or being rebuilt. Scripts call begin, validate their own arguments, then ready.
local function begin()
  check_keys()
  now = clock_arg(ARGV[1])
  changed = false
end

local function ready()
  if not load_state() then
    return {'not_loaded'}
  end
  if S.loading == 1 then
    return {'loading'}
  end
  return nil
end
