-- cancel.lua: a waiter gives up (context done, wait time over, or a failed call whose outcome
-- is unknown). Removes its queue entry; if the lock had already been handed to that entry (or
-- taken or re-entered by that very attempt), or (orphan mode) is held by this owner at all,
-- gives that back, handing the lock to the next waiter when it becomes free.
--
-- KEYS[1] lock key (string)  KEYS[2] fence key (string)
-- KEYS[3] queue key (list)   KEYS[4] deadline key (zset)
-- ARGV[1] queue entry (attempt id) of the attempt, "<owner>|<nonce>|<lease ms>"
-- ARGV[2] "1" orphan mode: the handle holds nothing as far as its process knows, so a hold of
--         this owner can only come from the failed call and is given back whole; "0" only
--         the level counted by this very attempt is given back
-- Hand-offs are published on KEYS[1] .. ":ch".
--
-- Returns 1 when a hold or a level of it was given back, 0 otherwise.

-- @common

local lk, fk, qk, dk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if #KEYS ~= 4 or #ARGV ~= 2 then
  fail('cancel wants 4 keys and 2 arguments')
end
local entry = ARGV[1]
local owner, nonce = string.match(type(entry) == 'string' and entry or '', '^([^|]+)|([^|]+)|%d+$')
if not owner then
  fail('entry must be "<owner>|<nonce>|<lease ms>", got ' .. tostring(entry))
end
local orphan = ARGV[2]
if orphan ~= '0' and orphan ~= '1' then
  fail('orphan flag must be "0" or "1"')
end

redis.call('LREM', qk, 0, entry)
redis.call('ZREM', dk, entry)
local o, n, t, c, q, r, a, w = owned_hold(lk, owner)
if not o then
  return 0
end
if orphan == '0' and n ~= nonce and w ~= nonce then
  return 0
end
if orphan == '1' or c <= 1 then
  redis.call('DEL', lk)
  hand_off(lk, fk, qk, dk, nil)
else
  -- one level goes; forget that this attempt counted it, so a re-sent cancel takes no other
  if n == nonce then
    a = o .. '||'
  end
  if w == nonce then
    w = ''
  end
  redis.call('SET', lk, hold_value(a, t, c - 1, q, r, w), 'KEEPTTL')
end
return 1
