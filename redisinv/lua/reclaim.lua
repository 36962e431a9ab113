-- reclaim.lua: Reclaim: expires up to a given number of overdue holds (the sweeper calls it
-- until it reports no more).
-- KEYS: the sale's seven keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] the most holds to expire, 1 to 100000.
-- Returns: {'ok', holds expired, 1 if it stopped at the limit (more may be overdue) else 0},
--          or {'not_loaded'} / {'loading'}.
-- @common
local function main()
  begin()
  local limit = int_arg(ARGV[2], 'limit', 1, 100000)
  local missing = ready()
  if missing then
    return missing
  end
  local n, more = reclaim(limit)
  if more then
    return {'ok', n, 1}
  end
  return {'ok', n, 0}
end

local out = main()
save_state()
return with_version(out)
