-- close.lua: CloseSale: the sale ends now (ends = min(ends, now)) and stays closed; the queue
-- is rejected; holds may still be paid until they expire, and the units they free are not resold.
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua).
-- Returns: <sale> (see sale_reply), or {'not_loaded'} / {'loading'}; {'moving'} while the
--          segments of a segmented sale are being collapsed (the engine finishes that first).
--          A MOVED segment is closed too: a late payment there must see the sale ended.
-- @common
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local missing = ready() or seg_gate('m')
  if not missing and S.mode == COLLAPSING then
    missing = {'moving'}
  end
  if missing then
    return missing
  end
  reclaim(RECLAIM)
  S.closed = 1
  if now < S.ends then
    S.ends = now
  end
  changed = true
  serve() -- rejects the queue: the sale is over
  return sale_reply()
end

local out = main()
save_state()
return with_version(out)
