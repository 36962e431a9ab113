-- buy.lua: Buy (docs/MODEL.md "Buy"): a hold when units are free, a queue place when every
-- unit is held by others, else the refusal that applies first.
-- KEYS: the sale's seven keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] user id; [3] quantity, digits ('0' stands for anything
--       below 1; at most 2^53); [4] idempotency key ('' for none, at most 128 bytes); [5] 16 lowercase hex
--       digits from crypto/rand, the random half of a new reservation's id.
-- Returns: {'ok', replayed (0/1), <reservation> (see res_reply)}, or
--          {'not_loaded'} / {'loading'} / {'invalid_argument'} / {'not_started'} / {'ended'} /
--          {'limit_exceeded', 'quantity'|'user', per-user limit} /
--          {'sold_out', units left unsold (available + held)} / {'queue_full'}.
-- @common
local function main()
  begin()
  local user = id_arg(ARGV[2], 'user')
  local q = int_arg(ARGV[3], 'quantity', 0, MAX_EXACT)
  local key = str_arg(ARGV[4], 'idempotency key', 128)
  local rnd = hex_arg(ARGV[5], 'random', 16)
  local missing = ready()
  if missing then
    return missing
  end
  if q < 1 then
    return {'invalid_argument'}
  end
  -- The key's reservation is looked up before the reclaim (its first write) and read after it,
  -- so that a replay shows the reservation as it is now.
  local replay = key ~= '' and redis.call('HGET', KEYS[6], user .. ':' .. key)
  reclaim(RECLAIM)
  local code = window_code()
  if code then
    return {code}
  end
  if replay then
    return res_reply(1, get_res(replay))
  end
  if q > S.limit then
    return {'limit_exceeded', 'quantity', S.limit}
  end
  if user_units(user) + q > S.limit then
    return {'limit_exceeded', 'user', S.limit}
  end
  if q * S.price > MAX_EXACT then
    return {'invalid_argument'}
  end
  local status
  if S.qlen == 0 and S.avail >= q then
    status = 'held'
  elseif S.avail == 0 and S.held == 0 then
    return {'sold_out', 0}
  elseif S.avail + S.held < q then
    return {'sold_out', S.avail + S.held}
  elseif S.qlen >= S.qlimit then
    return {'queue_full'}
  else
    status = 'queued'
  end
  S.seq = S.seq + 1
  local r = {id = string.format('%016x', S.seq) .. rnd, status = status, user = user, q = q,
    exp = 0, seq = S.seq, amount = q * S.price, created = now, pid = '', key = key}
  user_add(user, q)
  if key ~= '' then
    redis.call('HSET', KEYS[6], user .. ':' .. key, r.id)
  end
  if status == 'held' then
    hold(r)
  else
    redis.call('ZADD', KEYS[4], r.seq, r.id)
    S.qlen, S.qunits = S.qlen + 1, S.qunits + q
  end
  put_res(r)
  emit(r)
  return res_reply(0, r)
end

local out = main()
save_state()
return out
