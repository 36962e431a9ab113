-- reservation.lua: Reservation: one reservation as it is now (an expired hold reads expired,
-- because the read reclaims first).
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] reservation suffix (32 lowercase hex); [3] segment flag
--       (optional, common.lua flag_arg).
-- Returns: {'ok', 0, <reservation>}, or {'not_loaded'} / {'loading'} / {'not_found'}; for a
--          segmented sale also {'segments', n} / {'moving'} / {'moved'} (common.lua).
-- @common
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local id = hex_arg(ARGV[2], 'reservation', 32)
  local flag = flag_arg(ARGV[3])
  local missing = ready() or seg_gate(flag)
  if missing then
    return missing
  end
  reclaim(RECLAIM)
  local r = settle(get_res(id))
  if not r then
    return not_found_reply(flag)
  end
  return res_reply(0, r)
end

local out = main()
save_state()
return with_version(out)
