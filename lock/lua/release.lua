-- release.lua: leave one level of a hold; on the last one free the lock and hand it to the
-- first live waiter (one round trip: the waiter is woken by the PUBLISH, already the owner).
--
-- KEYS[1] lock key (string)  KEYS[2] fence key (string)
-- KEYS[3] queue key (list)   KEYS[4] deadline key (zset)
-- ARGV[1] id of this release, "<owner>|<nonce>": owner id of the handle and a nonce unique for
--         that owner (both non-empty, no "|"); a repeated call with the same id (a client
--         library re-sending it after a timeout) does not leave a second level
-- ARGV[2] fencing token of the hold (digits; "0" accepts any token of this owner)
-- ARGV[3] optional: the value acquire.lua's fast path wrote for this hold,
--         "<attempt id>|<token>|1|0||". If the lock key holds exactly that (one level, nobody
--         queued since), the key is deleted at once: the uncontended fast path. The match is
--         its own validation (only the holder knows a value that contains its random owner
--         id), so this is the one write that comes before checking ARGV[1] and ARGV[2]
-- Hand-offs are published on KEYS[1] .. ":ch".
--
-- Returns -1 when the caller does not hold the lock (nothing was changed: a stale or retried
-- unlock never touches another holder; after a final release, a repeat of it gets -1 too);
-- n >= 1, the remaining reentrancy count; 0 when the lock is free; or {0, entry, token} when
-- the lock went straight to the waiter with that queue entry (the caller may wake that waiter
-- at once if it is in the same process).

local lk, fk, qk, dk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local v = redis.call('GET', lk)
if v and v == ARGV[3] and #KEYS == 4 then
  redis.call('DEL', lk)
  return 0
end

-- @common

local owner, rn = string.match(type(ARGV[1]) == 'string' and ARGV[1] or '', '^([^|]+)|([^|]+)$')
local token = ARGV[2]
if #KEYS ~= 4 or not owner or type(token) ~= 'string' or not string.find(token, '^%d+$') or #ARGV > 3 then
  fail('release wants 4 keys, a release id "<owner>|<nonce>", a token (digits) and optionally the hold\'s value')
end
if not v then
  return -1
end
local a, o, n, t, c, q, r, w = string.match(v, '^(([^|]+)|([^|]*)|%d*)|(%d+)|(%d+)|([01])|([^|]*)|([^|]*)$')
if o ~= owner or (token ~= '0' and t ~= token) then
  return -1 -- (also for a value this package did not write: it is nobody's hold)
end
c = tonumber(c)
if r == rn then
  return c -- this release already left its level
end
if c > 1 then
  redis.call('SET', lk, hold_value(a, t, c - 1, q, rn, w), 'KEEPTTL')
  return c - 1
end
redis.call('DEL', lk)
if q == '0' then
  return 0 -- nobody queued during the hold
end
local entry, next_token = hand_off(lk, fk, qk, dk, nil)
if entry then
  return {0, entry, next_token}
end
return 0
