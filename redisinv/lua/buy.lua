-- buy.lua: Buy (docs/MODEL.md "Buy") for one or more buyers of one sale, one after the other in
-- the order given, exactly as that many calls one after the other would: a hold when units are
-- free, a queue place when every unit is held by others, else the refusal that applies first.
-- Several buyers per call let the engine group the buys that arrive together (one round trip,
-- one read and one write of the sale's state for all of them); one buyer per call is the plain
-- form, which any client can send.
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); then 4 per buyer, for 1 to 64 buyers: user id; quantity, digits
--       ('0' stands for anything below 1; at most 2^53); idempotency key ('' for none, at most
--       128 bytes); 16 lowercase hex digits from crypto/rand, the random half of the id of a
--       new reservation; then, optionally, one more: a floor for the new reservations' seq
--       (a segmented sale: the highest seq the engine has seen, so that a reservation made after
--       another one's answer has a higher seq whatever segments made them).
--       With the buy limits across instances (docs/DECISIONS.md "Limits across instances"),
--       ARGV[2] is 'gcra:<user interval>:<user burst>:<address interval>:<address burst>'
--       (intervals in µs, 0 to 10^9, 0: that limit is off; bursts 1 to 10^6; a user id has no
--       ':', so the two layouts cannot be confused) and each buyer has a fifth argument after
--       its random half: its client address ('' for none; at most 39 of [0-9a-f.:]).
-- Returns: {'not_loaded'} or {'loading'} for the whole call, else {'ok', <answer per buyer>...},
--          each answer {'ok', replayed (0/1), <reservation> (see res_reply)} or
--          {'invalid_argument'} / {'not_started'} / {'ended'} /
--          {'limit_exceeded', 'quantity'|'user', per-user limit} /
--          {'sold_out', units left unsold (available + held)} / {'queue_full'} /
--          {'rate_limited', µs until the buy would be allowed, 'user'|'address'}; for a segmented
--          sale (common.lua, Segments) also {'segments', n} (the buyer's state is in another
--          segment), {'empty', available} (a SPLIT segment without the units: nothing changed),
--          {'elsewhere', suffix} (a replayed key whose reservation stayed in a MOVED segment),
--          {'moving'} and {'moved'}.
-- @common

local seq_floor = 0 -- the optional last argument

-- The buy limits across instances (GCRA, seckill.RateLimit.GCRA's arithmetic, in µs): rate is
-- nil without the gcra block, else {user interval, user burst, address interval, address
-- burst}. Each buyer's check comes before its other rules and is spent only by an answer that
-- is the buyer's own (not a segment's signal, after which the engine sends the buy again);
-- KEYS[8] is a ZSET of 'u:<user>' and 'a:<address>' scored by their theoretical arrival time
-- in µs of the script's clock. A member whose time has passed is the same as none, so those
-- are removed, by the first call that spends once the member SWEEP's time has passed (then
-- SWEEP_US later): the set holds only the subjects seen within the last burst × interval and
-- a second, and goes with the sale's other keys (cool.lua, sale_admin.lua). A call reads every
-- buyer's subjects and SWEEP in one ZMSCORE (tats), spends in that table, buyer after buyer,
-- and writes what it spent in one ZADD at its end (spend_rates).
local SWEEP, SWEEP_US = '~', 1000000 -- '~' is neither 'u:...' nor 'a:...'
local rate = nil
local now_us = 0
local tats = {}  -- member -> theoretical arrival time in µs (0: none), this call's view
local spent = {} -- member -> the time this call spent it to, for spend_rates

-- gcra is one step for a subject with theoretical arrival time tat (0: none) under interval t
-- and burst b: allowed, the new tat, or the wait in µs.
local function gcra(tat, t, b)
  local base = math.max(tat, now_us)
  local tau = t * (b - 1)
  if base - now_us > tau then
    return false, tat, base - now_us - tau
  end
  return true, base + t, 0
end

-- rate_members sets a buyer's members of KEYS[8], once: b[6] = 'u:<user>' while the user
-- limit is on, b[7] = 'a:<address>' while the address limit is on and the buyer has one
-- (false otherwise), for read_rates and rate_check.
local function rate_members(b)
  b[6] = rate[1] ~= 0 and 'u:' .. b[1]
  b[7] = b[5] ~= '' and rate[3] ~= 0 and 'a:' .. b[5]
end

-- read_rates reads the times of every buyer's members in one ZMSCORE (which also shows KEYS[8]
-- to be a sorted set, or absent, before any write: common.lua, guard).
local function read_rates(buyers)
  local members, seen = {SWEEP}, {}
  for _, b in ipairs(buyers) do
    rate_members(b)
    for k = 6, 7 do
      local m = b[k]
      if m and not seen[m] then
        seen[m] = true
        members[#members + 1] = m
      end
    end
  end
  verified[8] = true
  local got = redis.call('ZMSCORE', KEYS[8], unpack(members))
  for i, m in ipairs(members) do
    tats[m] = tonumber(got[i] or '0')
  end
end

-- rate_check answers the buyer's refusal, or nil and the times its answer spends its members
-- to (nil for a member it does not spend).
local function rate_check(b)
  local tu, ta, wait, who = nil, nil, 0, nil
  if b[6] then
    local ok, nt, w = gcra(tats[b[6]] or 0, rate[1], rate[2])
    if ok then
      tu = nt
    else
      wait, who = w, 'user'
    end
  end
  if b[7] then
    local ok, nt, w = gcra(tats[b[7]] or 0, rate[3], rate[4])
    if ok then
      ta = nt
    elseif w > wait then
      wait, who = w, 'address'
    end
  end
  if who then
    return {'rate_limited', wait, who}
  end
  return nil, tu, ta
end

-- spend_rates writes the call's spending at its end: one ZADD of every member spent (each at
-- the last time the call gave it), after removing the members whose time has passed when
-- SWEEP's has.
local function spend_rates()
  local args = {}
  for m, t in pairs(spent) do
    args[#args + 1] = num(t)
    args[#args + 1] = m
  end
  if #args == 0 then
    return
  end
  guard(8, after_state())
  if tats[SWEEP] <= now_us then
    redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', num(now_us))
    args[#args + 1] = num(now_us + SWEEP_US)
    args[#args + 1] = SWEEP
  end
  redis.call('ZADD', KEYS[8], unpack(args))
end

-- rate_arg reads the gcra block.
local function rate_arg(v)
  local ut, ub, at, ab = string.match(v, '^gcra:(%d+):(%d+):(%d+):(%d+)$')
  if not ut then
    fail("the gcra block must be 'gcra:<user interval>:<user burst>:<address interval>:<address burst>'")
  end
  return {int_arg(ut, 'user interval', 0, 1000000000), int_arg(ub, 'user burst', 1, 1000000),
    int_arg(at, 'address interval', 0, 1000000000), int_arg(ab, 'address burst', 1, 1000000)}
end

-- addr_arg is a buyer's client address: '' or up to 39 of [0-9a-f.:].
local function addr_arg(v)
  if type(v) ~= 'string' or #v > 39 or not string.find(v, '^[0-9a-f.:]*$') then
    fail('client address must be at most 39 of [0-9a-f.:]')
  end
  return v
end

-- SIGNALS are the answers after which the engine sends the buy again (a segment's business):
-- they spend no budget.
local SIGNALS = {segments = true, empty = true, elsewhere = true}

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
    verified[6] = true
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
  -- The hold or the queue place first: a key no read has verified yet, so that when it is
  -- the call's first write its own ZADD is its type check (common.lua, guard).
  if status == 'held' then
    hold(r)
  else
    guard(4)
    redis.call('ZADD', KEYS[4], num(r.seq), r.id)
    S.qlen, S.qunits = S.qlen + 1, S.qunits + q
  end
  user_add(user, q)
  if key ~= '' then
    guard(6)
    redis.call('HSET', KEYS[6], idem, r.id)
  end
  put_res(r)
  emit(r)
  return res_reply(0, r)
end

local function main()
  begin()
  local first, per = 2, 4 -- the first buyer's argument, and the arguments per buyer
  if type(ARGV[2]) == 'string' and string.sub(ARGV[2], 1, 5) == 'gcra:' then
    rate, first, per = rate_arg(ARGV[2]), 3, 5
  end
  local extra = (#ARGV - first + 1) % per
  local n = (#ARGV - first + 1 - extra) / per
  if n < 1 or n > 64 or extra > 1 then
    fail('want the clock' .. (rate and ', the gcra block' or '') .. ' and ' .. per ..
      ' arguments for each of 1 to 64 buyers (and a seq floor), got ' .. #ARGV .. ' arguments')
  end
  if extra == 1 then
    seq_floor = int_arg(ARGV[#ARGV], 'seq floor', 0, MAX_EXACT)
  end
  local buyers = {}
  local keys = {2, 3, 4, 5, 7} -- the keys the call may touch (lazy_types), and:
  local with_idem = false
  for i = 1, n do
    local a = first + per * (i - 1)
    buyers[i] = {id_arg(ARGV[a], 'user'), int_arg(ARGV[a + 1], 'quantity', 0, MAX_EXACT),
      str_arg(ARGV[a + 2], 'idempotency key', 128), hex_arg(ARGV[a + 3], 'random', 16), ''}
    if rate then
      buyers[i][5] = addr_arg(ARGV[a + 4])
    end
    with_idem = with_idem or buyers[i][3] ~= ''
  end
  if with_idem then
    keys[#keys + 1] = 6 -- a buyer with an idempotency key
  end
  if rate then
    keys[#keys + 1] = 8
  end
  lazy_types(keys)
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
  if rate then
    now_us = now * 1000
    read_rates(buyers)
  end
  for i = 1, n do
    local b = buyers[i]
    if b[2] >= 1 and not reclaimed then
      reclaim(RECLAIM) -- once, before the first buyer it can matter to
      reclaimed = true
    end
    local refusal, tu, ta = nil, nil, nil
    if rate then
      refusal, tu, ta = rate_check(b)
    end
    if refusal then
      out[i + 1] = refusal
    else
      out[i + 1] = buy_one(b[1], b[2], b[3], b[4])
      if not SIGNALS[out[i + 1][1]] then
        if tu then
          tats[b[6]], spent[b[6]] = tu, tu
        end
        if ta then
          tats[b[7]], spent[b[7]] = ta, ta
        end
      end
    end
  end
  if rate then
    spend_rates()
  end
  return out
end

local out = main()
save_state()
return with_version(out)
