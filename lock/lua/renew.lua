-- renew.lua: the watchdog's heartbeat; also the holder's check that it still holds the lock.
--
-- KEYS[1] lock key (string)
-- ARGV[1] owner id of the handle (non-empty, no "|")
-- ARGV[2] fencing token of the hold (integer >= 0; "0" accepts any token of this owner)
-- ARGV[3] lease in ms (integer >= 0): new TTL of the lock key; "0" only checks
--
-- Returns 1 when the owner holds the lock with that token (and the TTL was reset), 0 otherwise
-- (the key vanished or belongs to another hold: the caller has lost the lock).

-- @common

local lk = KEYS[1]
if #KEYS ~= 1 then
  fail('renew wants 1 key')
end
local owner = owner_arg(ARGV[1])
local token = ARGV[2]
int_arg(token, 'token', 0)
local lease = int_arg(ARGV[3], 'lease', 0)

local o, _, t = owned_hold(lk, owner)
if not o or (token ~= '0' and t ~= token) then
  return 0
end
if lease > 0 then
  redis.call('PEXPIRE', lk, lease)
end
return 1
