-- acquire.lua: take the lock, re-enter it, claim a hand-off, or join the queue of waiters.
--
-- KEYS[1] lock key (hash)   KEYS[2] fence key (string)
-- KEYS[3] queue key (list)  KEYS[4] deadline key (zset)
-- ARGV[1] owner id of the handle (non-empty, no "|")
-- ARGV[2] lease in ms (integer >= 1): TTL of the lock key when this call takes the lock
-- ARGV[3] mode: "0" try once and never queue, "1" join (or stay in) the queue while busy
-- ARGV[4] id of this attempt, "<owner>|<nonce>|<lease ms>": its queue entry in mode "1", and
--         in both modes what makes the call idempotent (a client library that re-sends the
--         call after a timeout must not count a re-entry twice)
-- ARGV[5] waiter timeout in ms (integer >= 1): an entry not refreshed for that long is dropped
-- ARGV[6] channel on which hand-offs are published (non-empty)
--
-- Returns {1, token, count} when the caller holds the lock after the call (count = reentrancy
-- depth; a re-entry keeps the hold's token and TTL; a repeated call with the same attempt id
-- changes nothing and returns the same), or {0, pttl} when it does not (pttl =
-- remaining TTL of the lock key in ms). Fair: while a live waiter is queued, a newcomer never
-- takes a free lock; the lock goes to the head of the queue instead.

local lk, fk, qk, dk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if #KEYS ~= 4 then
  fail('acquire wants 4 keys')
end
local owner = owner_arg(ARGV[1])
local lease = int_arg(ARGV[2], 'lease', 1)
local mode = ARGV[3]
if mode ~= '0' and mode ~= '1' then
  fail('mode must be "0" or "1"')
end
local entry = ARGV[4]
if type(entry) ~= 'string' or string.sub(entry, 1, #owner + 1) ~= owner .. '|' then
  fail('attempt id must start with "<owner>|"')
end
local wttl = int_arg(ARGV[5], 'waiter timeout', 1)
local ch = ARGV[6]
if type(ch) ~= 'string' or ch == '' then
  fail('channel must not be empty')
end
-- all arguments are valid: writes may start below

-- the uncontended fast path: no hold and nobody queued (EXISTS counts both keys at once)
local function take()
  local token = redis.call('INCR', fk)
  redis.call('HSET', lk, 'o', owner, 'c', 1, 't', token, 'a', entry)
  redis.call('PEXPIRE', lk, lease)
  return {1, token, 1}
end
if redis.call('EXISTS', lk, qk) == 0 then
  return take()
end

local cur = redis.call('HGET', lk, 'o')
if cur == owner then
  local h = redis.call('HMGET', lk, 'w', 'a', 't', 'c')
  if h[1] == entry or h[2] == entry then
    -- this very attempt was handed the lock (and missed the message), or already took or
    -- re-entered it: it holds the lock as is
    return {1, tonumber(h[3]), tonumber(h[4])}
  end
  local c = redis.call('HINCRBY', lk, 'c', 1)
  redis.call('HSET', lk, 'a', entry)
  return {1, tonumber(h[3]), c}
end

local now = nil
if not cur then
  local head
  head, now = first_live(qk, dk, nil)
  if head == false then
    return take()
  end
  if mode == '1' and head == entry then
    redis.call('LPOP', qk)
    redis.call('ZREM', dk, head)
    return take()
  end
  -- a live waiter is ahead of us: the free lock is its, not ours
  hand_off(lk, fk, qk, dk, ch, now)
end

if mode == '1' then
  now = now or now_ms()
  -- ZADD answers 1 for a new member (join the line), 0 for a refreshed one (keep the place)
  if redis.call('ZADD', dk, now + wttl, entry) == 1 then
    redis.call('RPUSH', qk, entry)
  end
  -- every live entry's deadline is at most now + wttl, so an abandoned queue vanishes by itself
  redis.call('PEXPIRE', qk, wttl)
  redis.call('PEXPIRE', dk, wttl)
end
return {0, redis.call('PTTL', lk)}
