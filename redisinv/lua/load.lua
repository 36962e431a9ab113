-- load.lua: LoadSale, and the first step of a rebuild: writes a sale's definition and counters
-- (available = sellable - sold) and removes whatever else of the sale was left behind (a
-- partial rebuild, keys that outlived an eviction). The stream stays: its entries may not have
-- reached the order store yet.
-- KEYS: the sale's seven keys (common.lua).
-- ARGV: [1] clock (common.lua); [2] mode: 'new' (LoadSale: refused if the sale exists) or
--       'rebuild' (refused only if the sale exists and is not being rebuilt: another instance
--       finished first); [3] the rebuild's token ('' for 'new'; for 'rebuild' "<lock fencing
--       token>-<hex from crypto/rand>", which later calls must repeat); [4] name (at
--       most 200 bytes); [5] price_cents (0 to 10^12); [6] stock; [7] holdback; [8] starts_at
--       and [9] ends_at (ms); [10] per-user limit (1 to 10^9); [11] hold seconds (1 to 604800);
--       [12] queue limit (buyers, 0 to 10^10); [13] created_at (ms); [14] units already sold;
--       [15] currency ('' or 3 lower-case letters); [16] listed ('1' or '0'); [17] the
--       version the sale starts at (optional, default 1; a rebuild sends one above every version
--       seen before, docs/MODEL.md "The state's version"); [18] for 'rebuild' only, a stale
--       version (optional, default 0): a sale that is present and not being rebuilt, whose
--       version is below it, is a Redis that went back in time and is replaced (never one at or
--       above it: another rebuild has replaced it already); for a segmented sale (common.lua,
--       Segments) [19] segments (2 to 99), [20] this segment's index, [21] its share of the free
--       units (its available; sold is counted in segment 0 only); [22] the sale's incarnation
--       (optional, default ''; at most 32 bytes: seckill.Sale.Incarnation), kept in the hash's
--       field inc, which tells the engine a sale made again under a deleted sale's id from an
--       older state of the same sale (docs/MODEL.md "The state's version"); [23] its preheat seconds
--       (optional, default 0; 0 to 86400: seckill.Sale.PreheatSeconds), kept in the field pre
--       and answered with the definition; [24] its waiting room (optional, default '': none;
--       seckill.Sale.Room as "<order>,<opens s>,<admit/s>,<max active>,<token s>,<pow bits>",
--       room.go roomField), kept in the field room (absent without one) and answered with the
--       definition. Mode 'segment' loads segment
--       1 or more and replaces whatever is there (the engine loads them before segment 0, whose
--       'new' load is the one that can conflict).
-- Returns: {'ok'}, {'conflict'}, or {'fenced'} (a rebuild with a newer token is under way);
--          a rebuild leaves the sale 'loading' until ready.lua. Then the version (common.lua).
-- @common
local function main()
  begin()
  local mode = ARGV[2]
  if mode ~= 'new' and mode ~= 'rebuild' and mode ~= 'segment' then
    fail("mode must be 'new', 'rebuild' or 'segment'")
  end
  local token = ARGV[3]
  if (mode ~= 'rebuild') ~= (token == '') then
    fail("the token must be empty for 'new' and set for 'rebuild'")
  end
  if token ~= '' then
    token_arg(token)
  end
  local name = str_arg(ARGV[4], 'name', 200)
  local price = int_arg(ARGV[5], 'price', 0, 1000000000000)
  local stock = int_arg(ARGV[6], 'stock', 0, MAX_QUANTITY)
  local holdback = int_arg(ARGV[7], 'holdback', 0, stock)
  local starts = int_arg(ARGV[8], 'starts_at', 0, MAX_EXACT)
  local ends = int_arg(ARGV[9], 'ends_at', 0, MAX_EXACT)
  local limit = int_arg(ARGV[10], 'per_user_limit', 1, MAX_QUANTITY)
  local hold_s = int_arg(ARGV[11], 'hold_seconds', 1, 604800)
  local qlimit = int_arg(ARGV[12], 'queue_limit', 0, 10 * MAX_QUANTITY)
  local created = int_arg(ARGV[13], 'created_at', 0, MAX_EXACT)
  local sold = int_arg(ARGV[14], 'sold', 0, stock - holdback)
  local currency = ARGV[15]
  if type(currency) ~= 'string' or not (currency == '' or string.find(currency, '^[a-z][a-z][a-z]$')) then
    fail("currency must be '' or 3 lower-case letters")
  end
  local listed = ARGV[16]
  if listed ~= '1' and listed ~= '0' then
    fail("listed must be '1' or '0'")
  end
  local ver = int_arg(ARGV[17] or '1', 'version', 1, MAX_EXACT)
  local stale = int_arg(ARGV[18] or '0', 'stale version', 0, MAX_EXACT)
  if mode ~= 'rebuild' and stale ~= 0 then
    fail("a stale version is for 'rebuild' only")
  end
  local segs = int_arg(ARGV[19] or '1', 'segments', 1, 99)
  local seg = int_arg(ARGV[20] or '0', 'segment', 0, segs - 1)
  local share = int_arg(ARGV[21] or '0', 'share', 0, MAX_QUANTITY)
  local inc = str_arg(ARGV[22] or '', 'incarnation', 32)
  local pre = int_arg(ARGV[23] or '0', 'preheat seconds', 0, 86400)
  local room = ARGV[24] or ''
  if room ~= '' then
    local order, o, r, m, tk, pw = string.match(str_arg(room, 'room', 80), '^(%l+),(%d+),(%d+),(%d+),(%d+),(%d+)$')
    if not (order == 'draw' or order == 'fifo') then
      fail("room must be '' or <draw|fifo>,<opens s>,<admit/s>,<max active>,<token s>,<pow bits>")
    end
    int_arg(o, 'room opens seconds', 0, pre)
    int_arg(r, 'room admit per second', 0, 1000000)
    int_arg(m, 'room max active', 0, MAX_QUANTITY)
    int_arg(tk, 'room token seconds', 10, 3600)
    int_arg(pw, 'room pow bits', 0, 28)
  end
  if (mode == 'segment') ~= (seg > 0) or (mode == 'rebuild' and segs > 1) then
    fail("mode 'segment' loads segment 1 or more of a segmented sale, which is not rebuilt")
  end
  if mode ~= 'segment' and load_state() and not (mode == 'rebuild' and S.loading ~= 1 and S.ver < stale) then
    if mode == 'new' or S.loading ~= 1 then
      return {'conflict'}
    end
    -- Taking over a rebuild left half way: only with a newer lock token than the one that
    -- wrote it (a rebuild that lost its lock must not wipe the one that took over), or by the
    -- rebuild that stopped the sale itself (segment.lua 'halt': the same token).
    local loader = redis.call('HGET', KEYS[1], 'loader') or ''
    local old = tonumber(string.match(loader, '^(%d+)%-') or '0')
    if loader ~= token and tonumber(string.match(token, '^(%d+)%-')) <= old then
      return {'fenced'}
    end
  end
  redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  local loading = 0
  if mode == 'rebuild' then
    loading = 1
  end
  S = {
    price = price, stock = stock, holdback = holdback, starts = starts, ends = ends, limit = limit,
    hold = hold_s, qlimit = qlimit, created = created, closed = 0, avail = stock - holdback - sold,
    held = 0, sold = sold, qunits = 0, seq = 0, loading = loading, qlen = 0, nexp = 0, ver = ver,
    segs = segs, seg = seg, mode = SINGLE, lent = 0, got = 0, pend = 0,
  }
  if segs > 1 then
    if share > stock - holdback - sold then
      fail('a share must not exceed the free units')
    end
    S.avail, S.seq, S.mode = share, seg, SPLIT
  end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'name', name, 'loader', token, 'st', pack_state(), 'currency', currency,
    'listed', listed, 'inc', inc, 'pre', num(pre))
  if room ~= '' then
    redis.call('HSET', KEYS[1], 'room', room)
  end
  return {'ok'}
end

return with_version(main())
