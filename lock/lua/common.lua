-- common.lua: helpers shared by the scripts in this directory. It is never run on its own: the
-- Go side splices it into each script at the script's "-- @common" line, so that a script's
-- fast path (above that line) runs before these functions are even created, and its slow path
-- (below it) can use them.
--
-- KEYS: none of its own.  ARGV: none of its own.  Returns: nothing (defines local functions).
--
-- Layout of one lock (all keys carry the hash tag {name}, so every script is atomic on one
-- Cluster node):
--   lock key     STRING  "<a>|<token>|<count>|<q>|<r>|<w>", TTL = lease, where
--                        <a> = "<owner>|<nonce>|<lease ms>" is the id of the last acquire
--                        attempt the hold counted (the one that took it, was handed it, or
--                        re-entered it; nonce and lease are empty after a cancel took that
--                        level back), so the value starts with the owner id; token is the
--                        hold's fencing token (decimal, below 2^53: Lua numbers are doubles),
--                        count its reentrancy depth; q = "1" if a waiter may have queued
--                        during the hold ("0": the queue is surely empty, and the final
--                        release need not look at it); r = nonce of the last release that left
--                        a level; w = nonce of the queue entry the hold was handed to, kept
--                        while the same handle re-enters, so that entry can still claim or
--                        give back its level ("" for none). The ids make a re-sent call
--                        harmless.
--   fence key    STRING  last fencing token issued for this name (INCR; never expires)
--   queue key    LIST    waiting entries (attempt ids) in arrival order
--   deadline key ZSET    entry -> deadline in ms of Redis time; an entry past it is dropped
--   channel      lock key .. ":ch": hand-offs are published there
-- A string rather than a hash: SET ... PX writes the value and its TTL in one command, GET
-- reads the whole hold in one, and a hold taken on the fast path is "<attempt id>|<token>|1|0||",
-- which its holder can predict: the uncontended lock+unlock pair is five commands (EXISTS,
-- INCR, SET; GET, DEL) and needs no parsing of values in Lua.
--
-- Every script validates all of its arguments before its first write (Redis does not roll back
-- a script that fails half way) and compares replies explicitly (in Lua, 0 is true). The one
-- exception is release.lua's fast path: its only write (DEL) happens when an argument equals
-- the stored hold byte for byte, which validates it. Tokens are formatted with
-- string.format('%d'): Lua's own number formatting would write 1e+14 for 10^14.
-- Needs Redis 6.0 or later (SET ... KEEPTTL).

local function fail(msg)
  error({err = 'ERR lock: ' .. msg})
end

-- int_arg accepts plain decimal digits only (tonumber would also take "inf", "1e300" and
-- "0x10"), up to 2^53 so that the value stays exact in a Lua double.
local function int_arg(v, name, min)
  local n = type(v) == 'string' and #v <= 16 and string.find(v, '^%d+$') and tonumber(v)
  if not n or n < min or n > 9007199254740992 then
    fail(name .. ' must be an integer from ' .. min .. ' to 2^53, got ' .. tostring(v))
  end
  return n
end

local function owner_arg(v)
  if type(v) ~= 'string' or v == '' or string.find(v, '|', 1, true) then
    fail('owner must be a non-empty string without "|"')
  end
  return v
end

-- parse_hold splits a lock value into owner, the nonce of <a>, token (string), count
-- (number), q, r, a itself and w; it fails on anything this package never writes (the key
-- must not be shared with other software).
local function parse_hold(v)
  local a, o, n, t, c, q, r, w = string.match(v, '^(([^|]+)|([^|]*)|%d*)|(%d+)|(%d+)|([01])|([^|]*)|([^|]*)$')
  if not o then
    fail('the lock key holds a value this package did not write')
  end
  return o, n, t, tonumber(c), q, r, a, w
end

-- hold_value is the lock value for attempt id a (or "<owner>||" for none), token t (string),
-- count c, queue flag q, release nonce r and handed-to nonce w.
local function hold_value(a, t, c, q, r, w)
  return a .. '|' .. t .. '|' .. c .. '|' .. q .. '|' .. r .. '|' .. w
end

-- owned_hold reads the lock and returns parse_hold's fields if owner holds it, nil if the
-- lock is free or someone else's.
local function owned_hold(lk, owner)
  local v = redis.call('GET', lk)
  if not v then
    return nil
  end
  local o, n, t, c, q, r, a, w = parse_hold(v)
  if o ~= owner then
    return nil
  end
  return o, n, t, c, q, r, a, w
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- first_live returns the first queued entry whose deadline has not passed, dropping dead entries
-- in front of it, or false when no live entry is queued. now is the Redis time in ms, or nil
-- to read it only if the queue is not empty (TIME is one more command; most calls need none).
local function first_live(qk, dk, now)
  while true do
    local head = redis.call('LINDEX', qk, 0)
    if not head then
      return false
    end
    now = now or now_ms()
    local dl = redis.call('ZSCORE', dk, head)
    if dl and tonumber(dl) >= now then
      return head, now
    end
    redis.call('LPOP', qk)
    redis.call('ZREM', dk, head)
  end
end

-- hand_off gives the free lock to the first live waiter: it removes the entry from the queue,
-- issues the next fencing token, makes the waiter the owner for the lease it asked for (with
-- q = "1": more waiters may be queued behind it), and
-- publishes "<entry>|<token>" on the lock's channel so that exactly that waiter wakes, already
-- holding the lock. Returns the entry and its token when it handed the lock over, false when
-- nobody waits.
local function hand_off(lk, fk, qk, dk, now)
  while true do
    local head
    head, now = first_live(qk, dk, now)
    if not head then
      return false
    end
    redis.call('LPOP', qk)
    redis.call('ZREM', dk, head)
    local nonce, lease = string.match(head, '^[^|]+|([^|]+)|([1-9]%d*)$')
    if nonce and #lease <= 15 then
      local token = redis.call('INCR', fk)
      local ts = string.format('%d', token)
      redis.call('SET', lk, hold_value(head, ts, 1, '1', '', nonce), 'PX', lease)
      redis.call('PUBLISH', lk .. ':ch', head .. '|' .. ts)
      return head, token
    end
    -- a malformed entry (never written by this package) is dropped; try the next one
  end
end
