-- restore.lua: RestoreReservation: puts back one reservation the order store knew (a restart
-- or a rebuild). Paid units are already in sold; a held one takes its units from available
-- (restored as expired if they are not there or it has no expiry); a queued one joins the
-- queue by seq. It neither reclaims nor serves the queue (the next call does). It emits nothing
-- (the order store already has the reservation) except when it ends a hold: the store has that
-- one held, and the 'expired' event is what tells it (a sale restored from a database that holds
-- more than the stock left: Redis went back in time and resold units already held).
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] rebuild token ('' outside a rebuild; during one it must be
--       the loader's token); [3] suffix (32 lowercase hex); [4] user id; [5] quantity (1 to
--       10^9); [6] status; [7] expires_at (ms, 0 for none); [8] amount (0 to 2^53);
--       [9] created_at (ms); [10] seq (1 to 2^53); [11] payment id ('' or up to 255 bytes);
--       [12] idempotency key ('' or up to 128 bytes).
-- Returns: {'ok'}, or {'not_loaded'} / {'loading'} (a rebuild is under way and this is not
--          it) / {'fenced'} (a newer rebuild took over) / {'conflict'} (the id is known).
-- @common
local function main()
  begin()
  local token = ARGV[2]
  if token ~= '' then
    token_arg(token)
  end
  local r = {
    id = hex_arg(ARGV[3], 'reservation', 32), user = id_arg(ARGV[4], 'user'),
    q = int_arg(ARGV[5], 'quantity', 1, MAX_QUANTITY), status = status_arg(ARGV[6]),
    exp = int_arg(ARGV[7], 'expires_at', 0, MAX_EXACT), amount = int_arg(ARGV[8], 'amount', 0, MAX_EXACT),
    created = int_arg(ARGV[9], 'created_at', 0, MAX_EXACT), seq = int_arg(ARGV[10], 'seq', 1, MAX_EXACT),
    pid = str_arg(ARGV[11], 'payment id', 255), key = str_arg(ARGV[12], 'idempotency key', 128),
  }
  if not load_state() then
    return {'not_loaded'}
  end
  if S.loading == 1 and token == '' then
    return {'loading'}
  end
  local loader = redis.call('HGET', KEYS[1], 'loader') or ''
  if (S.loading == 1 and token ~= loader) or (S.loading ~= 1 and token ~= '') then
    return {'fenced'}
  end
  if redis.call('HEXISTS', KEYS[2], r.id) == 1 then
    return {'conflict'}
  end
  if r.status ~= 'held' then
    r.exp = 0
  end
  if r.status == 'held' then
    if r.exp == 0 or S.avail < r.q then
      r.status, r.exp = 'expired', 0
      emit(r)
    else
      S.avail, S.held = S.avail - r.q, S.held + r.q
      add_hold(r)
      user_add(r.user, r.q)
    end
  elseif r.status == 'queued' then
    redis.call('ZADD', KEYS[4], num(r.seq), r.id)
    S.qlen, S.qunits = S.qlen + 1, S.qunits + r.q
    user_add(r.user, r.q)
  elseif r.status == 'paid' then
    user_add(r.user, r.q)
  end
  if r.seq > S.seq then
    S.seq = r.seq
  end
  if r.key ~= '' then
    redis.call('HSET', KEYS[6], r.user .. ':' .. r.key, r.id)
  end
  put_res(r)
  return {'ok'}
end

local out = main()
save_state()
return with_version(out)
