-- pay.lua: ConfirmPayment (docs/MODEL.md "ConfirmPayment"): a succeeded payment is applied
-- (held -> paid), late_applied (expired or cancelled, a unit is free and the user under the
-- limit), a duplicate, or refund_required.
-- KEYS: the sale's seven keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] reservation suffix (32 lowercase hex); [3] payment id
--       (1-255 bytes); [4] amount in cents (digits, optionally negative).
-- Returns: {'ok', result, <reservation fields as res_reply from its third element>} or
--          {'ok', 'refund_required'} for an unknown reservation; or {'not_loaded'} / {'loading'}.
-- @common
local function main()
  begin()
  local id = hex_arg(ARGV[2], 'reservation', 32)
  local pid = str_arg(ARGV[3], 'payment id', 255)
  if pid == '' then
    fail('payment id must not be empty')
  end
  local amount = signed_arg(ARGV[4], 'amount')
  local missing = ready()
  if missing then
    return missing
  end
  reclaim(RECLAIM)
  local r = settle(get_res(id))
  if not r then
    return {'ok', 'refund_required'}
  end
  local result = 'refund_required'
  if r.status == 'paid' and r.pid == pid then
    result = 'duplicate'
  elseif r.status == 'paid' or amount ~= r.amount then
    result = 'refund_required'
  elseif r.status == 'held' then
    redis.call('ZREM', KEYS[3], r.id)
    S.held, S.sold = S.held - r.q, S.sold + r.q
    r.status, r.exp, r.pid = 'paid', 0, pid
    put_res(r)
    emit(r)
    serve() -- the last held unit sold: the queue learns it is sold out
    result = 'applied'
  elseif r.status == 'expired' or r.status == 'cancelled' then
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
