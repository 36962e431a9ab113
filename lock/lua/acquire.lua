-- acquire.lua: take the lock, re-enter it, claim a hand-off, or join the queue of waiters.
--
-- KEYS[1] lock key (string)  KEYS[2] fence key (string)
-- KEYS[3] queue key (list)   KEYS[4] deadline key (zset)
-- ARGV[1] id of this attempt, "<owner>|<nonce>|<lease ms>": owner id of the handle (non-empty,
--         no "|"), a nonce unique for that owner (non-empty, no "|"), and the lease (integer
--         >= 1), the TTL of the lock key when this call takes the lock. It is the attempt's
--         queue entry, and what makes the call idempotent (a client library that re-sends the
--         call after a timeout must not count a re-entry twice)
-- ARGV[2] optional: waiter timeout in ms (integer >= 1). Given: join (or stay in) the queue
--         while the lock is busy, and an entry not refreshed for that long is dropped. Absent:
--         try once and never queue
-- Hand-offs are published on KEYS[1] .. ":ch".
--
-- Returns the fencing token (an integer >= 1) when the call took the free lock with count 1
-- (when nobody was queued, the lock value is then "<ARGV[1]>|<token>|1|0||", the value
-- release.lua's fast path expects);
-- {1, token, count} when the caller holds the lock after the call in another way (a
-- re-entry: count = reentrancy depth, same token and TTL; a claimed hand-off; or a repeated
-- call with the same attempt id, which changes nothing); {0, pttl} when it does not hold it
-- (pttl = remaining TTL of the lock key in ms). Fair: while a live waiter is queued, a
-- newcomer never takes a free lock; the lock goes to the head of the queue instead.

local lk, fk, qk, dk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local entry, wttl = ARGV[1], ARGV[2]
-- (the lease stays a string: Redis would format a Lua number back into one for SET)
local lease = #KEYS == 4 and #ARGV <= 2 and type(entry) == 'string' and string.match(entry, '^[^|]+|[^|]+|([1-9]%d*)$')
if not lease or #lease > 15 then
  error({err = 'ERR lock: acquire wants 4 keys and an attempt id "<owner>|<nonce>|<lease ms >= 1>", got ' .. tostring(entry)})
end
if wttl ~= nil then
  if type(wttl) ~= 'string' or #wttl > 15 or not string.find(wttl, '^[1-9]%d*$') then
    error({err = 'ERR lock: waiter timeout must be an integer >= 1 (at most 15 digits), got ' .. tostring(wttl)})
  end
  wttl = tonumber(wttl)
end
-- all arguments are valid: writes may start below

-- the uncontended fast path: no hold and nobody queued (EXISTS counts both keys at once)
if redis.call('EXISTS', lk, qk) == 0 then
  local token = redis.call('INCR', fk)
  redis.call('SET', lk, entry .. '|' .. string.format('%d', token) .. '|1|0||', 'PX', lease)
  return token
end

-- @common

-- take makes the caller the holder; q: may waiters be queued (see common.lua)?
local function take(q)
  local token = redis.call('INCR', fk)
  redis.call('SET', lk, hold_value(entry, string.format('%d', token), 1, q, '', ''), 'PX', lease)
  return token
end

local owner, nonce = string.match(entry, '^([^|]+)|([^|]+)|')
local cur = redis.call('GET', lk)
local o, n, t, c, q, r, a, w
if cur then
  o, n, t, c, q, r, a, w = parse_hold(cur)
  if o == owner then
    if n == nonce or w == nonce then
      -- this very attempt took, re-entered or was handed the lock already (a re-sent call,
      -- or a waiter that missed its hand-off message): it holds the lock as is
      return {1, tonumber(t), c}
    end
    redis.call('SET', lk, hold_value(entry, t, c + 1, q, r, w), 'KEEPTTL')
    return {1, tonumber(t), c + 1}
  end
end

local now = nil
if not cur then
  local head
  head, now = first_live(qk, dk, nil)
  if head == false then
    return take('0') -- first_live emptied the queue of dead entries
  end
  if wttl and head == entry then
    redis.call('LPOP', qk)
    redis.call('ZREM', dk, head)
    return take('1')
  end
  -- a live waiter is ahead of us: the free lock is its, not ours
  hand_off(lk, fk, qk, dk, now)
end

if wttl then
  now = now or now_ms()
  -- ZADD answers 1 for a new member (join the line), 0 for a refreshed one (keep the place)
  if redis.call('ZADD', dk, now + wttl, entry) == 1 then
    redis.call('RPUSH', qk, entry)
    if cur and q == '0' then
      -- tell the holder's final release to look at the queue
      redis.call('SET', lk, hold_value(a, t, c, '1', r, w), 'KEEPTTL')
    end
  end
  -- every live entry's deadline is at most now + wttl, so an abandoned queue vanishes by itself
  redis.call('PEXPIRE', qk, wttl)
  redis.call('PEXPIRE', dk, wttl)
end
return {0, redis.call('PTTL', lk)}
