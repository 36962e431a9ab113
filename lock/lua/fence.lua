-- fence.lua: quorum mode, second phase. After a client won a majority it sets the hold's token
-- to T = the highest token any node of that majority issued, and raises each node's counter to
-- at least T. Any two majorities share a node, so the next winner reads a counter >= T and its
-- token is > T: tokens increase strictly across the quorum as long as nodes keep their data.
--
-- KEYS[1] lock key (string)  KEYS[2] fence key (string)
-- ARGV[1] owner id of the handle (non-empty, no "|")
-- ARGV[2] token T (integer >= 1)
--
-- Returns 1 when the owner holds the lock on this node and its token is now T, 0 otherwise.

-- @common

local lk, fk = KEYS[1], KEYS[2]
if #KEYS ~= 2 then
  fail('fence wants 2 keys')
end
local owner = owner_arg(ARGV[1])
local token = int_arg(ARGV[2], 'token', 1)

local o, _, _, c, q, r, a, w = owned_hold(lk, owner)
if not o then
  return 0
end
local last = tonumber(redis.call('GET', fk) or '0')
if last < token then
  redis.call('SET', fk, token)
end
redis.call('SET', lk, hold_value(a, string.format('%d', token), c, q, r, w), 'KEEPTTL')
return 1
