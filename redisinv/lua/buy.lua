-- buy.lua: Buy (docs/MODEL.md "Buy") for one or more buyers of one sale, one after the other in
-- the order given, exactly as that many calls one after the other would: a hold when units are
-- free, a queue place when every unit is held by others, else the refusal that applies first.
-- Several buyers per call let the engine group the buys that arrive together (one round trip,
-- one read and one write of the sale's state for all of them); one buyer per call is the plain
-- form, which any client can send.
-- KEYS: the sale's seven keys (common.lua).
-- ARGV: [1] clock (common.lua); then 4 per buyer, for 1 to 64 buyers: user id; quantity, digits
--       ('0' stands for anything below 1; at most 2^53); idempotency key ('' for none, at most
--       128 bytes); 16 lowercase hex digits from crypto/rand, the random half of the id of a
--       new reservation; then, optionally, one more: a floor for the new reservations' seq
--       (a segmented sale: the highest seq the engine has seen, so that a reservation made after
--       another one's answer has a higher seq whatever segments made them).
-- Returns: {'not_loaded'} or {'loading'} for the whole call, else {'ok', <answer per buyer>...},
--          each answer {'ok', replayed (0/1), <reservation> (see res_reply)} or
--          {'invalid_argument'} / {'not_started'} / {'ended'} /
--          {'limit_exceeded', 'quantity'|'user', per-user limit} /
--          {'sold_out', units left unsold (available + held)} / {'queue_full'}; for a segmented
--          sale (common.lua, Segments) also {'segments', n} (the buyer's state is in another
--          segment), {'empty', available} (a SPLIT segment without the units: nothing changed),
--          {'elsewhere', suffix} (a replayed key whose reservation stayed in a MOVED segment),
--          {'moving'} and {'moved'}.
-- @common

local seq_floor = 0 -- the optional last argument

-- buy_one applies the rules to one buyer, after the call's reclaim.
local function buy_one(user, q, key, rnd)
  if S.mode == SPLIT and user_seg(user, S.segs) ~= S.seg then
    return {'segments', S.segs}
  end
  if q < 1 then
    return {'invalid_argument'}
  end
  local code = window_code()
  if code then
    return {code}
  end
  local idem -- user .. ':' .. key, only when there is a key
  if key ~= '' then
    idem = user .. ':' .. key
    local replay = redis.call('HGET', KEYS[6], idem)
    if replay then
      local r = get_res(replay)
      if not r then
        return {'elsewhere', replay}
      end
      return res_reply(1, settle(r))
    end
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
  elseif splitting() then
    return {'empty', S.avail}
  elseif S.avail == 0 and S.held == 0 then
    return {'sold_out', 0}
  elseif S.avail + S.held < q then
    return {'sold_out', S.avail + S.held}
  elseif S.qlen >= S.qlimit then
    return {'queue_full'}
  else
    status = 'queued'
  end
  local step = 1
  if S.segs > 1 then
    -- Segment i numbers its reservations i + k*segs, so that seqs stay unique across the
    -- segments, and its ids carry its index in the random half's first byte.
    step, rnd = S.segs, string.format('%02x', S.seg) .. string.sub(rnd, 3)
  end
  if step > 1 then
    local s = math.max(S.seq, seq_floor) + 1
    S.seq = s + (S.seg - s) % step -- the next seq of this segment's residue
  else
    S.seq = S.seq + 1
  end
  local r = {id = string.format('%016x', S.seq) .. rnd, status = status, user = user, q = q,
    exp = 0, seq = S.seq, amount = q * S.price, created = now, pid = '', key = key}
  user_add(user, q)
  if key ~= '' then
    redis.call('HSET', KEYS[6], idem, r.id)
  end
  if status == 'held' then
    hold(r)
  else
    redis.call('ZADD', KEYS[4], num(r.seq), r.id)
    S.qlen, S.qunits = S.qlen + 1, S.qunits + q
  end
  put_res(r)
  emit(r)
  return res_reply(0, r)
end

local function main()
  begin()
  local extra = (#ARGV - 1) % 4
  local n = (#ARGV - 1 - extra) / 4
  if n < 1 or n > 64 or extra > 1 then
    fail('want the clock and 4 arguments for each of 1 to 64 buyers (and a seq floor), got ' .. #ARGV .. ' arguments')
  end
  if extra == 1 then
    seq_floor = int_arg(ARGV[#ARGV], 'seq floor', 0, MAX_EXACT)
  end
  local buyers = {}
  for i = 1, n do
    local a = 4 * i - 2
    buyers[i] = {id_arg(ARGV[a], 'user'), int_arg(ARGV[a + 1], 'quantity', 0, MAX_EXACT),
      str_arg(ARGV[a + 2], 'idempotency key', 128), hex_arg(ARGV[a + 3], 'random', 16)}
  end
  local missing = ready()
  if missing then
    return missing
  end
  local out, reclaimed = {'ok'}, false
  local gate = seg_gate('')
  if gate then -- a FROZEN or MOVED segment changes nothing, not even by a reclaim
    for i = 1, n do
      out[i + 1] = gate
    end
    return out
  end
  for i = 1, n do
    local b = buyers[i]
    if b[2] >= 1 and not reclaimed then
      reclaim(RECLAIM) -- once, before the first buyer it can matter to
      reclaimed = true
    end
    out[i + 1] = buy_one(b[1], b[2], b[3], b[4])
  end
  return out
end

local out = main()
save_state()
return with_version(out)
