-- pay.lua: ConfirmPayment (docs/MODEL.md "ConfirmPayment"): a succeeded payment is applied
-- (held -> paid), late_applied (expired or cancelled, a unit is free and the user under the
-- limit), a duplicate, or refund_required.
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] reservation suffix (32 lowercase hex); [3] payment id
--       (1-255 bytes); [4] amount in cents (digits, optionally negative); [5] segment flag
--       (optional, common.lua flag_arg).
-- Returns: {'ok', result, <reservation fields as res_reply from its third element>} or
--          {'ok', 'refund_required'} for an unknown reservation; or {'not_loaded'} / {'loading'};
--          for a segmented sale also {'segments', n} / {'moving'} / {'moved'} (common.lua),
--          {'empty', available, quantity} (a late payment that a SPLIT segment lacks the units for:
--          nothing changed) and {'adopt', <the reservation as stored>} (a late payment for a
--          reservation of a MOVED segment: segment 0, which has the units and the user's
--          count, must take the reservation over first).
-- @common
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local id = hex_arg(ARGV[2], 'reservation', 32)
  local pid = str_arg(ARGV[3], 'payment id', 255)
  if pid == '' then
    fail('payment id must not be empty')
  end
  local amount = signed_arg(ARGV[4], 'amount')
  local flag = flag_arg(ARGV[5])
  local missing = ready() or seg_gate(flag)
  if missing then
    return missing
  end
  reclaim(RECLAIM)
  local r = settle(get_res(id))
  if not r then
    if S.segs > 1 and flag == '' then
      return {'segments', S.segs}
    end
    return {'ok', 'refund_required'}
  end
  local result = 'refund_required'
  if r.status == 'paid' and r.pid == pid then
    result = 'duplicate'
  elseif r.status == 'paid' or amount ~= r.amount then
    result = 'refund_required'
  elseif r.status == 'held' then
    guard(3)
    redis.call('ZREM', KEYS[3], r.id)
    S.held, S.sold = S.held - r.q, S.sold + r.q
    r.status, r.exp, r.pid = 'paid', 0, pid
    put_res(r)
    emit(r)
    serve() -- the last held unit sold: the queue learns it is sold out
    result = 'applied'
  elseif r.status == 'expired' or r.status == 'cancelled' then
    if S.mode == MOVED and open() then
      return {'adopt', redis.call('HGET', KEYS[2], r.id)}
    end
    if splitting() and open() and S.avail < r.q and user_units(r.user) + r.q <= S.limit then
      return {'empty', S.avail, r.q}
    end
    if open() and S.avail >= r.q and user_units(r.user) + r.q <= S.limit then
      S.avail, S.sold = S.avail - r.q, S.sold + r.q
      user_add(r.user, r.q)
      r.status, r.pid = 'paid', pid
      put_res(r)
      emit(r, 'late_paid')
      serve()
      result = 'late_applied'
    else
      r.status = 'refund_required'
      put_res(r)
      emit(r)
    end
  end
  local out = res_reply(0, r)
  out[2] = result
  return out
end

local out = main()
save_state()
return with_version(out)
