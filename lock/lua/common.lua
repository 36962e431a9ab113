-- common.lua: helpers shared by every script in this directory. It is never run on its own: the
-- Go side prepends it to each script before loading, so these locals are in scope there.
--
-- KEYS: none of its own.  ARGV: none of its own.  Returns: nothing (defines local functions).
--
-- Layout of one lock (all keys carry the hash tag {name}, so every script is atomic on one
-- Cluster node):
--   lock key     HASH    o = owner id, c = reentrancy count, t = fencing token of the hold,
--                        w = queue entry the lock was handed to (present only after a hand-off),
--                        a = id of the last acquire that counted, r = id of the last release
--                        that left a level (both make a re-sent call harmless)
--   fence key    STRING  last fencing token issued for this name (INCR; never expires)
--   queue key    LIST    waiting entries in arrival order; entry = "<owner>|<nonce>|<lease ms>"
--   deadline key ZSET    entry -> deadline in ms of Redis time; an entry past it is dropped
--
-- Every script validates all of its arguments before its first write (Redis does not roll back
-- a script that fails half way) and compares replies explicitly (in Lua, 0 is true).

local function fail(msg)
  error({err = 'ERR lock: ' .. msg})
end

local function int_arg(v, name, min)
  local n = tonumber(v)
  if n == nil or n ~= math.floor(n) or n < min then
    fail(name .. ' must be an integer >= ' .. min .. ', got ' .. tostring(v))
  end
  return n
end

local function owner_arg(v)
  if type(v) ~= 'string' or v == '' or string.find(v, '|', 1, true) then
    fail('owner must be a non-empty string without "|"')
  end
  return v
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
-- issues the next fencing token, makes the waiter the owner for the lease it asked for, and
-- publishes "<entry>|<token>" on the lock's channel so that exactly that waiter wakes, already
-- holding the lock. Returns the entry and its token when it handed the lock over, false when
-- nobody waits.
local function hand_off(lk, fk, qk, dk, ch, now)
  while true do
    local head
    head, now = first_live(qk, dk, now)
    if not head then
      return false
    end
    redis.call('LPOP', qk)
    redis.call('ZREM', dk, head)
    local owner, lease = string.match(head, '^([^|]+)|[^|]+|(%d+)$')
    if owner and tonumber(lease) >= 1 then
      local token = redis.call('INCR', fk)
      redis.call('HSET', lk, 'o', owner, 'c', 1, 't', token, 'w', head)
      redis.call('PEXPIRE', lk, lease)
      redis.call('PUBLISH', ch, head .. '|' .. token)
      return head, token
    end
    -- a malformed entry (never written by this package) is dropped; try the next one
  end
end
