-- trim.lua: drops the stream entries that every consumer of the order-store group has
-- acknowledged, so the stream's memory stays bounded: everything before the group's oldest
-- pending entry, or up to its last delivered entry when nothing is pending. Entries that were
-- never delivered are always kept.
-- KEYS: the sale's seven keys (common.lua); only KEYS[7], the stream, is used.
-- ARGV: [1] clock (common.lua, unused); [2] consumer group name (1 to 64 bytes).
-- Returns: {'ok', entries removed}; {'ok', 0} when the stream or the group does not exist.
-- @common
local function main()
  begin()
  local group = str_arg(ARGV[2], 'group', 64)
  if group == '' then
    fail('group must not be empty')
  end
  local kind = redis.call('TYPE', KEYS[7])['ok']
  if kind == 'none' then
    return {'ok', 0}
  elseif kind ~= 'stream' then
    fail('KEYS[7] is a ' .. kind .. ', want a stream')
  end
  local info = redis.call('XINFO', 'GROUPS', KEYS[7])
  for _, g in ipairs(info) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    if f['name'] == group then
      local minid = f['last-delivered-id']
      if f['pending'] > 0 then
        local p = redis.call('XPENDING', KEYS[7], group)
        minid = p[2]
      end
      if minid == '0-0' then
        return {'ok', 0}
      end
      return {'ok', redis.call('XTRIM', KEYS[7], 'MINID', minid)}
    end
  end
  return {'ok', 0}
end

return main()
