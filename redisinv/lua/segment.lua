-- segment.lua: the moves between the segments of a segmented sale (docs/DECISIONS.md
-- "Segmented stock"; common.lua, Segments): lending free units from one segment to another, and
-- collapsing every segment into segment 0. Each operation is atomic on one segment; the engine
-- chains them, and every step can be repeated (by the same instance after an error, or by
-- another that finds the work half done) without changing the result.
--
-- A transfer of k units from segment d to segment h is two steps. 'take' at d: available -= k,
-- lent += k, and an outbox entry "xe:<h>:<seq>" = k in d's sale hash, where seq is the next of
-- the pair's sequence "xs:<h>". 'apply' at h: available += k, got += k, but only if seq is the
-- next one after "xa:<d>" (h's last applied from d), so a repeat changes nothing. Then 'ack' at d
-- deletes the entry. Until then the units are in transit: the sale's sum of lent - got counts
-- them, and whoever finds the entry ('outbox') applies it again. No unit is lost by a crash.
--
-- KEYS: the segment's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] operation; then by operation:
--   'take'    [3] destination segment, [4] units wanted (1 to 10^9): SPLIT only; reclaims first.
--             -> {'ok', units taken (0 to wanted), seq (0 if none), available left} or
--                {'busy', mode}.
--   'apply'   [3] source segment, [4] seq, [5] units -> {'ok', units added (0 for a repeat)} or
--             {'gap', last applied} (an earlier entry of the pair comes first) / {'moved'}.
--   'ack'     [3] destination segment, [4] seq -> {'ok'}.
--   'outbox'  -> {'ok', destination, seq, units, ...} every entry not acknowledged.
--   'counts'  -> {'ok', mode, available, held, sold, seq, lent, got, pend, segments, streams}
--             (streams: the segments whose event streams the sale has, more than its segments
--             once a rebuild made a segmented sale one segment: field "streams"). No reclaim.
--             One of the three operations a one-segment sale answers (with 'halt' and 'freeze';
--             every other answers {'single'}: a rebuild made the sale one segment while the
--             caller, an instance that had not seen it yet, still took it for segmented).
--   'halt'    (segment 0) [3] a rebuild's token, [4] a stale version (0 for none), [5] '1' when
--             another segment is lost: a SPLIT or COLLAPSING segmented sale stops (loading, the
--             token its loader) when a segment is lost or its version is below the stale one,
--             so that the rebuild (rebuild.go) reads the database while no segment can change
--             -> {'ok', segments}; {'fine'} when it is not to be rebuilt; {'single'} for a sale of one
--             segment (collapsed too: load.lua decides as for any sale).
--   'freeze'  segment 0: SPLIT -> COLLAPSING; segment i: SPLIT -> FROZEN. -> {'ok', mode} with
--             the mode after (SINGLE or MOVED: the collapse is over; SINGLE too for a sale that
--             a rebuild made one segment, to an instance that still takes it for segmented).
--   'absorb'  (segment 0, COLLAPSING) [3] source segment, [4] kind ('users', 'idem': field,
--             value pairs; 'holds': suffix, stored reservation, expires_ms triples) from [5] on:
--             the source's state, copied where segment 0 has no such field (absorb_copy)
--             -> {'ok', 1}, or {'ok', 0} once the source's counts were absorbed (a late copy
--             must not overwrite what the source's users did at segment 0 since).
--   'counts_in' (segment 0, COLLAPSING) [3] source, [4] available, [5] held, [6] sold, [7] seq
--             -> {'ok', 1} the first time, {'ok', 0} after (field "ab:<source>").
--   'seal'    (segment i, FROZEN) -> {'ok'}: MOVED; its holds (now in segment 0) are deleted
--             here, so what stays is terminal reservations only.
--   'finish'  (segment 0) -> {'ok'} once every other segment's counts are in: SINGLE, and the
--             queue is served; {'not_ready'} before.
--   'adopt'   (segment 0, SINGLE) [3] suffix, [4] the reservation as stored in a MOVED segment
--             -> {'ok'} (kept if segment 0 has it already).
-- Returns: as above, or {'not_loaded'} / {'loading'}; then the version (common.lua).
-- @common

local function seg_arg(v, name)
  return int_arg(v, name, 0, S.segs - 1)
end

-- absorb_copy copies a FROZEN segment's users, idempotency keys or holds into segment 0. A
-- field segment 0 has already is left as it is: several instances may copy the same segment, one
-- after another, and segment 0 acts on what the first copy brought before the last is done (a
-- copied hold expires, is cancelled or paid, and its user's count falls; user_add keeps a count
-- at 0 while segment 0 is COLLAPSING for this). Overwriting would bring a hold back to life after
-- its unit was returned: the unit counted twice (available one too many, held one too few).
-- Users, keys and reservation ids of different segments never share a field, so a field that is
-- there came from this copy.
local function absorb_copy(kind)
  local n = #ARGV - 4
  if kind == 'users' or kind == 'idem' then
    if n < 2 or n % 2 ~= 0 or n > 2000 then
      fail('absorb wants 1 to 1000 field, value pairs')
    end
    for i = 5, #ARGV, 2 do
      str_arg(ARGV[i], 'field', 200)
      str_arg(ARGV[i + 1], 'value', 64)
    end
    local key = KEYS[6]
    if kind == 'users' then
      for i = 6, #ARGV, 2 do
        int_arg(ARGV[i], 'units', 1, MAX_QUANTITY)
      end
      key = KEYS[5]
    end
    for i = 5, #ARGV, 2 do
      redis.call('HSETNX', key, ARGV[i], ARGV[i + 1])
    end
    return
  end
  if kind ~= 'holds' then
    fail("kind must be 'users', 'idem' or 'holds'")
  end
  if n < 3 or n % 3 ~= 0 or n > 3000 then
    fail('absorb wants 1 to 1000 suffix, reservation, expiry triples')
  end
  for i = 5, #ARGV, 3 do
    hex_arg(ARGV[i], 'reservation', 32)
    str_arg(ARGV[i + 1], 'reservation', 1024)
    int_arg(ARGV[i + 2], 'expires', 1, MAX_EXACT)
  end
  for i = 5, #ARGV, 3 do
    if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
      local exp = tonumber(ARGV[i + 2])
      redis.call('ZADD', KEYS[3], ARGV[i + 2], ARGV[i])
      if S.nexp == 0 or exp < S.nexp then
        S.nexp = exp
      end
    end
  end
end

local OPS = {take = 1, apply = 1, ack = 1, outbox = 1, counts = 1, freeze = 1, absorb = 1, counts_in = 1,
  seal = 1, finish = 1, adopt = 1, halt = 1}

local function main()
  begin()
  local op = ARGV[2]
  if not OPS[op] then
    fail('unknown operation ' .. tostring(op))
  end
  local missing = ready()
  if missing then
    return missing
  end
  if S.segs < 2 and op ~= 'counts' and op ~= 'halt' and op ~= 'freeze' then
    -- A rebuild made the sale one segment while the caller still took it for segmented.
    return {'single'}
  end
  if op == 'take' then
    local to = seg_arg(ARGV[3], 'destination')
    local want = int_arg(ARGV[4], 'wanted', 1, MAX_QUANTITY)
    if S.mode ~= SPLIT or to == S.seg then
      return {'busy', S.mode}
    end
    reclaim(RECLAIM)
    local k = math.min(want, S.avail)
    if k == 0 then
      return {'ok', 0, 0, S.avail}
    end
    local seq = redis.call('HINCRBY', KEYS[1], 'xs:' .. to, 1)
    redis.call('HSET', KEYS[1], 'xe:' .. to .. ':' .. seq, num(k))
    S.avail, S.lent, S.pend = S.avail - k, S.lent + k, S.pend + 1
    changed = true
    return {'ok', k, seq, S.avail}
  elseif op == 'apply' then
    local from = seg_arg(ARGV[3], 'source')
    local seq = int_arg(ARGV[4], 'seq', 1, MAX_EXACT)
    local k = int_arg(ARGV[5], 'units', 1, MAX_QUANTITY)
    local last = tonumber(redis.call('HGET', KEYS[1], 'xa:' .. from) or '0')
    if seq <= last then
      return {'ok', 0}
    end
    if seq > last + 1 then
      return {'gap', last}
    end
    if S.mode == MOVED then
      return {'moved'} -- cannot happen: a segment is sealed only once every outbox is empty
    end
    redis.call('HSET', KEYS[1], 'xa:' .. from, num(seq))
    S.avail, S.got = S.avail + k, S.got + k
    changed = true
    if S.mode == SINGLE then
      serve()
    end
    return {'ok', k}
  elseif op == 'ack' then
    local to = seg_arg(ARGV[3], 'destination')
    local seq = int_arg(ARGV[4], 'seq', 1, MAX_EXACT)
    if redis.call('HDEL', KEYS[1], 'xe:' .. to .. ':' .. seq) == 1 then
      S.pend = S.pend - 1
      changed = true
    end
    return {'ok'}
  elseif op == 'outbox' then
    local out = {'ok'}
    if S.pend > 0 then
      local all = redis.call('HGETALL', KEYS[1])
      for i = 1, #all, 2 do
        local to, seq = string.match(all[i], '^xe:(%d+):(%d+)$')
        if to then
          out[#out + 1] = tonumber(to)
          out[#out + 1] = tonumber(seq)
          out[#out + 1] = tonumber(all[i + 1])
        end
      end
    end
    return out
  elseif op == 'counts' then
    local streams = math.max(S.segs, tonumber(redis.call('HGET', KEYS[1], 'streams') or '1') or 1)
    return {'ok', S.mode, S.avail, S.held, S.sold, S.seq, S.lent, S.got, S.pend, S.segs, streams}
  elseif op == 'halt' then
    local token = token_arg(ARGV[3])
    local stale = int_arg(ARGV[4], 'stale version', 0, MAX_EXACT)
    local lost = ARGV[5]
    if lost ~= '1' and lost ~= '0' then
      fail("lost must be '1' or '0'")
    end
    if S.segs < 2 or S.mode == SINGLE or S.seg ~= 0 then
      return {'single'}
    end
    if lost == '0' and not (stale > 0 and S.ver < stale) then
      return {'fine'}
    end
    redis.call('HSET', KEYS[1], 'loader', token)
    S.loading = 1
    changed = true
    return {'ok', S.segs}
  elseif op == 'freeze' then
    if S.mode == SPLIT then
      if S.seg == 0 then
        S.mode = COLLAPSING
      else
        S.mode = FROZEN
      end
      changed = true
    end
    return {'ok', S.mode}
  elseif op == 'absorb' then
    local from = int_arg(ARGV[3], 'source', 1, S.segs - 1)
    if S.seg ~= 0 or S.mode ~= COLLAPSING or redis.call('HEXISTS', KEYS[1], 'ab:' .. from) == 1 then
      return {'ok', 0}
    end
    check_types(2, 3, 5, 6)
    absorb_copy(ARGV[4])
    changed = true
    return {'ok', 1}
  elseif op == 'counts_in' then
    local from = int_arg(ARGV[3], 'source', 1, S.segs - 1)
    local avail = int_arg(ARGV[4], 'available', 0, MAX_QUANTITY)
    local held = int_arg(ARGV[5], 'held', 0, MAX_QUANTITY)
    local sold = int_arg(ARGV[6], 'sold', 0, MAX_QUANTITY)
    local seq = int_arg(ARGV[7], 'seq', 0, MAX_EXACT)
    if S.seg ~= 0 or S.mode ~= COLLAPSING or redis.call('HEXISTS', KEYS[1], 'ab:' .. from) == 1 then
      return {'ok', 0}
    end
    redis.call('HSET', KEYS[1], 'ab:' .. from, '1')
    S.avail, S.held, S.sold = S.avail + avail, S.held + held, S.sold + sold
    -- Segment 0 goes on numbering above every seq handed out (its own stay 0 mod segs).
    -- A segment that made no reservation still has its starting seq (its index): that one
    -- counts for nothing (CloseUnreserved looks for seq 0).
    local above = math.ceil(seq / S.segs) * S.segs
    if seq > from and above > S.seq then
      S.seq = above
    end
    changed = true
    return {'ok', 1}
  elseif op == 'seal' then
    if S.mode == FROZEN then
      while true do
        local ids = redis.call('ZRANGE', KEYS[3], 0, 999)
        if #ids == 0 then
          break
        end
        redis.call('HDEL', KEYS[2], unpack(ids))
        redis.call('ZREM', KEYS[3], unpack(ids))
      end
      S.mode, S.avail, S.held, S.nexp = MOVED, 0, 0, 0
      changed = true
    end
    return {'ok'}
  elseif op == 'finish' then
    if S.mode == COLLAPSING then
      for i = 1, S.segs - 1 do
        if redis.call('HEXISTS', KEYS[1], 'ab:' .. i) == 0 then
          return {'not_ready'}
        end
      end
      S.mode = SINGLE
      changed = true
      reclaim(RECLAIM)
      serve()
    end
    return {'ok'}
  elseif op == 'adopt' then
    local id = hex_arg(ARGV[3], 'reservation', 32)
    local raw = str_arg(ARGV[4], 'reservation', 1024)
    if S.seg ~= 0 or S.mode ~= SINGLE then
      return {'busy', S.mode}
    end
    if redis.call('HSETNX', KEYS[2], id, raw) == 1 then
      changed = true
    end
    return {'ok'}
  end
  fail('unknown operation ' .. tostring(op))
end

local out = main()
save_state()
return with_version(out)
