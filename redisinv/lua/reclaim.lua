-- reclaim.lua: Reclaim: expires up to a given number of overdue holds (the sweeper calls it
-- until it reports no more).
-- KEYS: the sale's seven keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] the most holds to expire, 1 to 100000.
-- Returns: {'ok', holds expired, 1 if it stopped at the limit (more may be overdue) else 0,
--          segments, outbox entries not yet acknowledged, mode (common.lua)}, or {'not_loaded'} /
--          {'loading'} / {'moving'} (a FROZEN segment); a MOVED segment has nothing to reclaim.
-- @common
local function main()
  begin()
  local limit = int_arg(ARGV[2], 'limit', 1, 100000)
  local missing = ready()
  if missing then
    return missing
  end
  if S.mode == MOVED then
    return {'ok', 0, 0, S.segs, S.pend, S.mode}
  end
  missing = seg_gate('')
  if missing then
    return missing
  end
  local n, more = reclaim(limit)
  if more then
    return {'ok', n, 1, S.segs, S.pend, S.mode}
  end
  return {'ok', n, 0, S.segs, S.pend, S.mode}
end

local out = main()
save_state()
return with_version(out)
