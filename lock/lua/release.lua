-- release.lua: leave one level of a hold; on the last one free the lock and hand it to the
-- first live waiter (one round trip: the waiter is woken by the PUBLISH, already the owner).
--
-- KEYS[1] lock key (hash)   KEYS[2] fence key (string)
-- KEYS[3] queue key (list)  KEYS[4] deadline key (zset)
-- ARGV[1] owner id of the handle (non-empty, no "|")
-- ARGV[2] fencing token of the hold (integer >= 0; "0" accepts any token of this owner)
-- ARGV[3] channel on which hand-offs are published (non-empty)
-- ARGV[4] mode: "0" fair mode: leave one level of reentrancy, hand off on the last one;
--         "1" quorum mode (reentrancy is counted by the client, waiters do not queue): delete
--         the hold whatever its count and publish "free" so that waiters try again
-- ARGV[5] id of this release, "<owner>|<nonce>": a repeated call with the same id (a client
--         library re-sending it after a timeout) does not leave a second level
--
-- Returns {-1} when the caller does not hold the lock (nothing was changed: a stale or retried
-- unlock never touches another holder; after a final release, a repeat of it gets {-1} too), {n} with n the remaining reentrancy count (0: the lock
-- is free), or {0, entry, token} when the lock went straight to the waiter with that queue
-- entry (the caller may wake that waiter at once if it is in the same process).

local lk, fk, qk, dk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if #KEYS ~= 4 then
  fail('release wants 4 keys')
end
local owner = owner_arg(ARGV[1])
local token = ARGV[2]
int_arg(token, 'token', 0)
local ch = ARGV[3]
if type(ch) ~= 'string' or ch == '' then
  fail('channel must not be empty')
end
local mode = ARGV[4]
if mode ~= '0' and mode ~= '1' then
  fail('mode must be "0" or "1"')
end
local rid = ARGV[5]
if type(rid) ~= 'string' or string.sub(rid, 1, #owner + 1) ~= owner .. '|' then
  fail('release id must start with "<owner>|"')
end

local h = redis.call('HMGET', lk, 'o', 't', 'c', 'r')
if h[1] ~= owner then
  return {-1}
end
if token ~= '0' and h[2] ~= token then
  return {-1}
end
if mode == '1' then
  redis.call('DEL', lk)
  redis.call('PUBLISH', ch, 'free')
  return {0}
end
if h[4] == rid then
  return {tonumber(h[3])} -- this release already left its level
end
if (tonumber(h[3]) or 1) > 1 then
  local c = redis.call('HINCRBY', lk, 'c', -1)
  redis.call('HSET', lk, 'r', rid)
  return {c}
end
redis.call('DEL', lk)
local entry, next_token = hand_off(lk, fk, qk, dk, ch, nil)
if entry then
  return {0, entry, next_token}
end
return {0}
