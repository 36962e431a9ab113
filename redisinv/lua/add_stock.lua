-- add_stock.lua: AddStock: stock and available grow by add; queued buyers are served first.
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] units to add, digits ('0' stands for anything below 1).
-- Returns: <sale> (see sale_reply), or {'not_loaded'} / {'loading'} /
--          {'invalid_argument', largest stock}; {'moving'} / {'moved'} (common.lua) for a
--          segmented sale, whose units are added at segment 0 (and lent from there).
--          While segment 0 is COLLAPSING it answers 'moving' too (the engine finishes first).
-- @common
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local add = int_arg(ARGV[2], 'add', 0, MAX_QUANTITY)
  local missing = ready() or seg_gate('')
  if not missing and S.mode == COLLAPSING then
    missing = {'moving'}
  end
  if missing then
    return missing
  end
  if add < 1 or S.stock + add > MAX_QUANTITY then
    return {'invalid_argument', MAX_QUANTITY}
  end
  reclaim(RECLAIM)
  S.stock, S.avail = S.stock + add, S.avail + add
  changed = true
  serve()
  return sale_reply()
end

local out = main()
save_state()
return with_version(out)
