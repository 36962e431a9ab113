-- room_admit.lua: WaitingRooms.Admit: admits from the head of the room as many as its policy
-- allows now, or closes the room for good once the stock is gone for good.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] the most to admit in this call (1 to 10000: bounded work,
--       the rest next call), and the most admissions left untold; [3] tell: '1' tells every
--       admission (Admit), '0' tells none (AdmitUntold: room_tell.lua tells them once the
--       journal holds them). The policy is the sale's (its field room).
-- Returns: <counts> (room_common.lua room_counts), after, then the first untold admission's
--          index and the untold entrants (the room hash's u) as one flat list of entrant,
--          joined ms, drawn, arrival for each (empty once closed: those read the closing state);
--          {'no_room'} for a sale without a room; {'not_loaded'} / {'loading'} / {'segmented'}.
-- Before the start it admits no one. From the start: when every sellable unit is sold, or the
-- sale is closed or over, the room closes (sold_out when sold out, else ended) and admits no
-- one ever again. Otherwise it admits min(the bucket's whole admissions, max active - active,
-- waiting, the call's most): the bucket holds RoomBurst admissions (max(1, ceil(rate/10))),
-- starts full at the start and refills at the rate, kept exactly in thousandths.
-- @room

-- untold appends to the counts out the first untold admission's index and, when list, the
-- untold entrants' facts (entrant, joined, drawn, arrival each).
local function untold(out, list)
  out[#out + 1] = R.told + 1
  local flat = {}
  if list and R.admitted > R.told then
    local u = redis.call('HGET', KEYS[2], 'u')
    if u then
      for _, e in ipairs({cmsgpack.unpack(u)}) do
        local t = get_ticket(e)
        flat[#flat + 1] = e
        flat[#flat + 1] = t.joined
        flat[#flat + 1] = t.drawn
        flat[#flat + 1] = t.arrival
      end
    end
  end
  out[#out + 1] = flat
  return out
end

local function main()
  room_begin()
  local most = int_arg(ARGV[2], 'most admissions', 1, 10000)
  local tell = int_arg(ARGV[3], 'tell', 0, 1)
  local missing = room_open()
  if missing then
    return missing
  end
  local rate, maxact, token = P.rate, P.maxact, P.token
  if R.closed ~= 0 or now < S.starts then
    return untold(room_counts(), false)
  end
  if S.sold >= S.sellable or S.closed == 1 or now >= S.ends then
    R.closed, R.closedat = 2, now
    if S.sold >= S.sellable then
      R.closed = 1
    end
    redis.call('UNLINK', KEYS[3]) -- those waiting are told by their tickets: no index kept
    redis.call('HDEL', KEYS[2], 'u')
    rchanged = true
    return untold(room_counts(), false)
  end
  -- Places that ended never count again: drop them (ract stays as small as the active places).
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', num(now))
  local n = math.min(most - (R.admitted - R.told), redis.call('ZCARD', KEYS[3]))
  if rate > 0 then
    local cap = math.max(1, math.floor((rate + 9) / 10)) * 1000
    if R.credit < 0 then
      R.credit, R.refill = cap, S.starts
    end
    if now > R.refill then
      -- cap ms refill the bucket from empty at any rate >= 1/s: elapsed is bounded by it, so
      -- every product stays an exact integer.
      R.credit = math.min(cap, R.credit + math.min(now - R.refill, cap) * rate)
      R.refill = now
    end
    rchanged = true
    n = math.min(n, math.floor(R.credit / 1000))
  end
  if maxact > 0 then
    n = math.min(n, math.max(0, maxact - redis.call('ZCARD', KEYS[6])))
  end
  local ids = {}
  if n > 0 then
    local popped = redis.call('ZPOPMIN', KEYS[3], num(n))
    local till = now + token * 1000
    for i = 1, #popped, 2 do
      local e = popped[i]
      local t = get_ticket(e)
      R.admitted = R.admitted + 1
      t.admitted, t.index, t.active = now, R.admitted, till
      put_ticket(e, t)
      redis.call('ZADD', KEYS[6], num(till), e)
      ids[#ids + 1] = e
    end
    if rate > 0 then
      R.credit = R.credit - (#popped / 2) * 1000
    end
    rchanged = true
  end
  if tell == 1 then
    if R.told ~= R.admitted then
      R.told = R.admitted
      rchanged = true
    end
    redis.call('HDEL', KEYS[2], 'u')
    return untold(room_counts(), false)
  end
  if #ids > 0 then
    local u = redis.call('HGET', KEYS[2], 'u')
    local all = {}
    if u then
      all = {cmsgpack.unpack(u)}
    end
    for _, e in ipairs(ids) do
      all[#all + 1] = e
    end
    redis.call('HSET', KEYS[2], 'u', cmsgpack.pack(unpack(all)))
  end
  return untold(room_counts(), true)
end

local out = main()
save_room()
return with_room_version(out)
