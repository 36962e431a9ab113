-- ready.lua: the last step of a rebuild: the sale serves again, and the restored queue is
-- served at once (restores do not serve it), so a unit left free goes to the head right away.
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] the rebuild's token (as given to load.lua).
-- Returns: {'ok'}, or {'not_loaded'} / {'fenced'} (not being rebuilt, or by another token).
-- @common
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local token = token_arg(ARGV[2])
  if not load_state() then
    return {'not_loaded'}
  end
  if S.loading ~= 1 or (redis.call('HGET', KEYS[1], 'loader') or '') ~= token then
    return {'fenced'}
  end
  S.loading = 0
  changed = true
  reclaim(RECLAIM)
  serve()
  return {'ok'}
end

local out = main()
save_state()
return with_version(out)
