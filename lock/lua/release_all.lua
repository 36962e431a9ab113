-- release_all.lua: quorum mode's release on one node. Reentrancy is counted by the client
-- and waiters do not queue, so this deletes the caller's hold whatever its count and
-- publishes "free" so that waiters on every node try again.
--
-- KEYS[1] lock key (string)
-- ARGV[1] owner id of the handle (non-empty, no "|")
--
-- Returns 0 when the caller's hold was deleted, -1 when the caller held nothing here.

-- @common

local lk = KEYS[1]
if #KEYS ~= 1 then
  fail('release_all wants 1 key')
end
local owner = owner_arg(ARGV[1])

if not owned_hold(lk, owner) then
  return -1
end
redis.call('DEL', lk)
redis.call('PUBLISH', lk .. ':ch', 'free')
return 0
