-- reclaim.lua: Reclaim: expires up to a given number of overdue holds (the sweeper calls it
-- until it reports no more).
-- KEYS: the sale's eight keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] the most holds to expire, 1 to 100000.
-- Returns: {'ok', holds expired, 1 if it stopped at the limit (more may be overdue) else 0,
--          segments, outbox entries not yet acknowledged, mode (common.lua), due, quiet}, or
--          {'not_loaded'} / {'loading'} / {'moving'} (a FROZEN segment); a MOVED segment has
--          nothing to reclaim (due and quiet -1). due and quiet feed the sweeper's due-time
--          index (sweeper.go): due is the ms from the script's now until this segment next needs
--          a sweep, -1 if nothing will come due by itself; quiet is the ms for which no new hold
--          can be made (until the start), -1 once the sale has ended or is closed, else 0.
-- @common

-- REPAIR_MS is when a segment with a transfer or a collapse under way is swept again: the
-- instance doing it finishes it well before; the sweep finishes it if that instance died.
local REPAIR_MS = 1000

local function due()
  if S.pend > 0 or S.mode == COLLAPSING then
    return REPAIR_MS
  end
  local d = -1
  if S.nexp ~= 0 then
    d = math.max(S.nexp - now, 0) -- nexp is a lower bound: a sweep then finds the next
  end
  if S.qlen > 0 and S.closed == 0 and S.ends > now and (d < 0 or S.ends - now < d) then
    d = S.ends - now -- the queue is rejected at the end
  end
  return d
end

local function quiet()
  if S.closed == 1 or now >= S.ends then
    return -1
  end
  return math.max(S.starts - now, 0)
end
local function main()
  begin()
  lazy_types({2, 3, 4, 5, 7}) -- common.lua: the keys' types are checked at the first write
  local limit = int_arg(ARGV[2], 'limit', 1, 100000)
  local missing = ready()
  if missing then
    return missing
  end
  if S.mode == MOVED then
    return {'ok', 0, 0, S.segs, S.pend, S.mode, -1, -1}
  end
  missing = seg_gate('')
  if missing then
    return missing
  end
  local n, more = reclaim(limit)
  if more then
    return {'ok', n, 1, S.segs, S.pend, S.mode, due(), quiet()}
  end
  return {'ok', n, 0, S.segs, S.pend, S.mode, due(), quiet()}
end

local out = main()
save_state()
return with_version(out)
