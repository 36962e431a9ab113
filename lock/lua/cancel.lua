-- cancel.lua: a waiter gives up (context done, wait time over, or a failed call whose outcome
-- is unknown). Removes its queue entry; if the lock had already been handed to that entry, or
-- (orphan mode) is held by this owner at all, gives the lock back to the next waiter.
--
-- KEYS[1] lock key (hash)   KEYS[2] fence key (string)
-- KEYS[3] queue key (list)  KEYS[4] deadline key (zset)
-- ARGV[1] owner id of the handle (non-empty, no "|")
-- ARGV[2] queue entry of the attempt, "<owner>|<nonce>|<lease ms>"
-- ARGV[3] channel on which hand-offs are published (non-empty)
-- ARGV[4] "1" orphan mode: the handle holds nothing as far as its process knows, so a hold of
--         this owner can only come from the failed call and is given back whole; "0" only a
--         hand-off to this very entry is given back
--
-- Returns 1 when a hold was given back, 0 otherwise.

local lk, fk, qk, dk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if #KEYS ~= 4 then
  fail('cancel wants 4 keys')
end
local owner = owner_arg(ARGV[1])
local entry = ARGV[2]
if type(entry) ~= 'string' or string.sub(entry, 1, #owner + 1) ~= owner .. '|' then
  fail('entry must start with "<owner>|"')
end
local ch = ARGV[3]
if type(ch) ~= 'string' or ch == '' then
  fail('channel must not be empty')
end
local orphan = ARGV[4]
if orphan ~= '0' and orphan ~= '1' then
  fail('orphan flag must be "0" or "1"')
end

redis.call('LREM', qk, 0, entry)
redis.call('ZREM', dk, entry)
if redis.call('HGET', lk, 'o') ~= owner then
  return 0
end
if orphan == '1' then
  redis.call('DEL', lk)
  hand_off(lk, fk, qk, dk, ch, nil)
  return 1
end
if redis.call('HGET', lk, 'w') == entry then
  redis.call('HDEL', lk, 'w')
  local c = redis.call('HINCRBY', lk, 'c', -1)
  if c <= 0 then
    redis.call('DEL', lk)
    hand_off(lk, fk, qk, dk, ch, nil)
  end
  return 1
end
return 0
