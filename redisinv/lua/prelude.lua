-- prelude.lua: the validators and encoders every script needs, spliced in by the Go side
-- before common.lua. See common.lua for the keys, the arguments and the layout.
--
-- KEYS, ARGV: as common.lua.  Returns: nothing (defines local functions).

local function fail(msg)
  error({err = 'ERR seckill: ' .. msg})
end

-- check_keys requires the eight keys of one sale, in order: '<prefix>{sale:<id>}:sale' and the
-- same base with ':res', ':holds', ':queue', ':users', ':idem', ':events', ':rate', where the prefix
-- has no braces (the braces are the keys' hash tag) and the id is 1 to 64 of [A-Za-z0-9_.-],
-- optionally followed by '#<segment>.<salt>' (segment 1 to 99 of a segmented sale, whose own
-- hash tag lets a Redis Cluster put it on another node, and a salt of 1 to 5 digits that
-- places that tag's slot: segment.go segTag; '#' is outside the id alphabet).
-- It runs on every call, so it matches in place and creates one string, the base.
-- cool.lua and sale_admin.lua, which remove a sale's keys, may be given the five keys of the
-- sale's waiting room after the eight (ROOM_PARTS; room_common.lua), to remove them too.
local ROOM_PARTS = {':room', ':rwait', ':rpre', ':rent', ':ract'}
local function check_keys()
  if #KEYS ~= 8 and #KEYS ~= 8 + #ROOM_PARTS then
    fail('want the 8 keys of one sale, or 13 with its room keys, got ' .. #KEYS)
  end
  local k = KEYS[1]
  local n = #k - 5 -- the length of the base, before ':sale'
  local open = string.find(k, '{', 1, true)
  if not open or string.find(k, '}', 1, true) ~= n or string.find(k, 'sale:', open + 1, true) ~= open + 1 or
      n - open - 6 > 73 or not (string.find(k, '^[A-Za-z0-9_.-]+}:sale$', open + 6) or
        string.find(k, '^[A-Za-z0-9_.-]+#[1-9]%d?%.%d%d?%d?%d?%d?}:sale$', open + 6)) or
      (n - open - 6 > 64 and not string.find(k, '#', open + 6, true)) then
    fail('KEYS[1] must be <prefix without braces>{sale:<id>}:sale or {sale:<id>#<segment>.<salt>}:sale, got ' .. k)
  end
  local base = string.sub(k, 1, n)
  local parts = {':res', ':holds', ':queue', ':users', ':idem', ':events', ':rate'}
  for i = 1, 7 do
    local ki, part = KEYS[i + 1], parts[i]
    if #ki ~= n + #part or string.find(ki, base, 1, true) ~= 1 or string.find(ki, part, n + 1, true) ~= n + 1 then
      fail('KEYS[' .. (i + 1) .. '] must be ' .. base .. part)
    end
  end
  for i = 9, #KEYS do
    if KEYS[i] ~= base .. ROOM_PARTS[i - 8] then
      fail('KEYS[' .. i .. '] must be ' .. base .. ROOM_PARTS[i - 8])
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

-- check_types requires the sale's keys at the given KEYS indexes to be of their type or absent,
-- so that a corrupted key fails the script before its first write rather than half way
-- through it. A script checks the keys it may write before it has read them (a read of a key
-- of the wrong type fails by itself, before any write). verified[i] is set once KEYS[i] is
-- known to be of its type or absent in this call, by check_types or by a read that would
-- have failed otherwise (common.lua, guard): nothing but the script itself writes a key while
-- it runs, and the script writes each key only with its own type.
local KEY_TYPES = {'hash', 'hash', 'zset', 'zset', 'hash', 'hash', 'stream', 'zset'}
local verified = {}
local function check_types(...)
  for _, i in ipairs({...}) do
    local got = redis.call('TYPE', KEYS[i])['ok']
    if got ~= KEY_TYPES[i] and got ~= 'none' then
      fail('KEYS[' .. i .. '] is a ' .. got .. ', want a ' .. KEY_TYPES[i])
    end
    verified[i] = true
  end
end

-- num renders an integer for a Redis command (see the header).
local function num(n)
  return string.format('%d', n)
end

-- pack_st is the sale hash's st field (common.lua's header lists the values, in this order).
local function pack_st(price, stock, holdback, starts, ends, limit, hold, qlimit, created, closed,
    avail, held, sold, qunits, seq, now, loading, qlen, nexp, ver, segs, seg, mode, lent, got, pend)
  if segs == 1 then -- a one-segment sale keeps the shorter layout it always had
    return cmsgpack.pack(price, stock, holdback, starts, ends, limit, hold, qlimit, created, closed,
      avail, held, sold, qunits, seq, now, loading, qlen, nexp, ver)
  end
  return cmsgpack.pack(price, stock, holdback, starts, ends, limit, hold, qlimit, created, closed,
    avail, held, sold, qunits, seq, now, loading, qlen, nexp, ver, segs, seg, mode, lent, got, pend)
end

-- event is a stream entry's e field (common.lua, emit): "<id>|<status>|<user>|<quantity>|<seq>|
-- <amount>|<created>|<at>|<expires>|<payment id length>|<payment id><idempotency key>".
-- The strings are joined with '..' around one format of the numbers: a third cheaper than
-- one format of everything.
local function event(id, status, user, q, seq, amount, created, at, exp, pid, key)
  return id .. '|' .. status .. '|' .. user ..
    string.format('|%d|%d|%d|%d|%d|%d|%d|', q, seq, amount, created, at, exp, #pid) .. pid .. key
end
