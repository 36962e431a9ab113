-- cancel.lua: Cancel (docs/MODEL.md "Cancel"): a held or queued reservation of the user is
-- cancelled; a cancelled, expired, rejected or refund_required one is returned unchanged.
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] reservation suffix (32 lowercase hex); [3] user id; [4]
--       segment flag (optional, common.lua flag_arg).
-- Returns: {'ok', 0, <reservation>}, or {'not_loaded'} / {'loading'} / {'not_found'} (also for
--          another user's reservation) / {'conflict'} (already paid); for a segmented sale also
--          {'segments', n} / {'moving'} / {'moved'} (common.lua).
-- @common
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local id = hex_arg(ARGV[2], 'reservation', 32)
  local user = id_arg(ARGV[3], 'user')
  local flag = flag_arg(ARGV[4])
  local missing = ready() or seg_gate(flag)
  if missing then
    return missing
  end
  reclaim(RECLAIM)
  local r = settle(get_res(id))
  if not r then
    return not_found_reply(flag)
  end
  if r.user ~= user then
    return {'not_found'}
  end
  if r.status == 'paid' then
    return {'conflict'}
  elseif r.status == 'held' then
    guard(3)
    redis.call('ZREM', KEYS[3], r.id)
    S.held, S.avail = S.held - r.q, S.avail + r.q
    user_add(r.user, -r.q)
    r.status, r.exp = 'cancelled', 0
    put_res(r)
    emit(r)
    serve()
  elseif r.status == 'queued' then
    dequeue(r)
    user_add(r.user, -r.q)
    r.status = 'cancelled'
    put_res(r)
    emit(r)
    serve() -- a blocked head may have left: the buyers behind it can go
  end
  return res_reply(0, r)
end

local out = main()
save_state()
return with_version(out)
