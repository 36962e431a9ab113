-- sale.lua: Sale: the definition and live counts, after reclaiming expired holds.
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua).
-- Returns: <sale> (see sale_reply), or {'not_loaded'} / {'loading'}; {'moving'} / {'moved'}
--          from a segment that is being or has been moved to segment 0 (common.lua).
-- @common
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local missing = ready() or seg_gate('')
  if missing then
    return missing
  end
  reclaim(RECLAIM)
  return sale_reply()
end

local out = main()
save_state()
return with_version(out)
