-- common.lua: the state, the helpers and the rules (docs/MODEL.md) that the scripts of this
-- directory share, after the validators of prelude.lua. It never runs on its own: the Go side
-- splices prelude.lua and it into each script at the script's "-- @common" line.
--
-- KEYS (the same eight for every script; all belong to one sale and carry its hash tag
-- {sale:<id>}, so that every script is atomic on one Redis Cluster node):
--   KEYS[1] sale    HASH    the definition and the counters (fields below)
--   KEYS[2] res     HASH    reservation suffix -> cmsgpack(status, user, quantity, expires_ms,
--                           seq, amount, created_ms, payment_id, idempotency_key)
--   KEYS[3] holds   ZSET    suffix of every live hold, scored by expires_ms (reclaim order)
--   KEYS[4] queue   ZSET    suffix of every queued reservation, scored by seq (FIFO order)
--   KEYS[5] users   HASH    user -> units held + queued + paid (per-user limit)
--   KEYS[6] idem    HASH    user .. ':' .. idempotency key -> suffix (user ids have no ':')
--   KEYS[7] events  STREAM  the reservation changes, for the order store: one field e per
--                           change, in order, the changes of one script call in one entry
--   KEYS[8] rate    ZSET    'u:<user>' / 'a:<client address>' -> theoretical arrival time in µs:
--                           the buy limits across instances (only buy.lua uses it)
-- ARGV[1] of every script is the clock: '' means Redis TIME, so that every instance shares one
-- clock (production); digits are milliseconds since the Unix epoch, sent only by an engine
-- built with a test clock (redisinv.WithTestClock). Whatever its source, a sale's clock never
-- goes back: a script uses the latest time any script of the sale has used (field "now").
-- Returns: what each script's header says. Domain outcomes are replies whose first element is
-- 'ok' or an error code ('not_loaded' when the sale's hash is missing, 'loading' while a rebuild
-- restores it); malformed arguments and keys are Redis errors ("ERR seckill: ...").
--
-- Sale hash fields: name; currency; listed ('1' or '0'); loader (the token of the rebuild that
-- wrote the sale, '' if none); and
-- st = cmsgpack(price, stock, holdback, starts, ends (ms), limit (per user), hold (s), qlimit
-- (buyers), created (ms), closed (0/1), avail, held, sold, qunits (units wanted by queued
-- buyers), seq (last reservation sequence), now (ms), loading (1 during a rebuild), qlen, nexp,
-- ver), so that a script reads and writes the whole state in one command and converts no number
-- to text. ver is the sale's version (docs/MODEL.md "The state's version"): it only grows, by one
-- per script call that changes the state (bump), and starts at load.lua's ARGV[17] (1 for a new
-- sale, above every version seen before for a rebuild); a state written before it existed reads
-- as 0 (unknown). Every script's reply ends with it (with_version), and every stream entry of a
-- call carries the version after the call's change ('v<ver>|' before each e field).
-- A segmented sale (docs/DECISIONS.md "Segmented stock") appends segs (its number of segments),
-- seg (this segment's index), mode (SINGLE, SPLIT, COLLAPSING, FROZEN or MOVED below), lent and
-- got (units this segment ever lent to and received from the others: their difference summed
-- over the segments is the units in transit) and pend (its outbox entries not yet acknowledged);
-- a one-segment sale stores none of them and reads as segs 1, mode SINGLE.
-- To look at it: EVAL "return {cmsgpack.unpack(redis.call('HGET', KEYS[1], 'st'))}" 1 <sale key>
--
-- Numbers sent to Redis commands go through num() (string.format('%d')): Redis would format a
-- Lua number with printf's %.17g, which costs about a microsecond per number.
--
-- Every script validates all of its keys and arguments before its first write (Redis does not
-- roll back a script that fails half way) and compares replies explicitly: in Lua, 0 is true,
-- and a missing value is false, not nil.
--
-- The keys' types (a key of the wrong type fails the command that touches it, and Redis keeps
-- what the script wrote before): a script either checks them all when it loads the state
-- (check_types, the default), or declares with lazy_types the keys it may touch and calls
-- guard before each of its writes. The first guard of the call checks every declared key that
-- no read of the call has shown to be of its type yet (verified, prelude.lua), except the key
-- being written, whose own write fails first if it is of the wrong type; later guards do
-- nothing. So a call that writes nothing (a refusal) runs no TYPE at all, and one that writes
-- runs one only for the keys it writes before reading them, while a corrupted key still fails
-- the call before its first write. The stream's check is the read of its newest entry, which
-- flush_events needs anyway (newest_entry).

-- A segment's modes (see "Segments" below).
local SINGLE, SPLIT, COLLAPSING, FROZEN, MOVED = 0, 1, 2, 3, 4

local now     -- the script's time in ms, set by the script before load_state
local S       -- the sale's definition and counters, once load_state found them
local changed -- whether save_state has counters to write
local pending = {} -- XADD's field-value arguments for the script's changes not yet in the stream
local vtag = ''    -- 'v<ver>|' once the call has bumped the version (bump), else ''
local touches = nil -- lazy_types: the KEYS indexes the script may touch; nil: check_types up front
local wrote = false -- a guard has let a write through (the call's first)
local newest = nil  -- the stream's newest entry id in this call: nil before newest_entry, false for none

-- newest_entry is the id of the stream's newest entry (false when it has none), read once per
-- call: the script's own XADDs keep it current after that (flush_events).
local function newest_entry()
  if newest == nil then
    local last = redis.call('XREVRANGE', KEYS[7], '+', '-', 'COUNT', 1)[1]
    newest = last and last[1] or false
    verified[7] = true
  end
  return newest
end

-- lazy_types declares the keys (KEYS indexes besides 1) the script may read or write: their
-- types are checked at the first write (guard), not when the state is loaded.
local function lazy_types(keys)
  touches = keys
end

-- guard comes before every write of a lazy_types script, with k the key written. At the call's
-- first write it checks the keys the rest of the call may touch (rest, by default every
-- declared one) that no read has verified yet, but k.
local function guard(k, rest)
  if wrote or not touches then
    return
  end
  wrote = true
  for _, i in ipairs(rest or touches) do
    if i ~= k and not verified[i] then
      if i == 7 then
        newest_entry()
      else
        check_types(i)
      end
    end
  end
end

-- after_state is guard's rest for a write at the end of a call: only the state (KEYS[1], read
-- first) and the stream's entry, if the call has events.
local function after_state()
  if #pending > 0 then
    return {7}
  end
  return {}
end

-- load_state reads the sale's hash into S. It returns false when the sale is not loaded.
local function load_state()
  local v = redis.call('HGET', KEYS[1], 'st')
  verified[1] = true
  if not v then
    return false
  end
  local price, stock, holdback, starts, ends, limit, hold, qlimit, created, closed, avail, held,
    sold, qunits, seq, last, loading, qlen, nexp, ver, segs, seg, mode, lent, got, pend = cmsgpack.unpack(v)
  S = {
    price = price, stock = stock, holdback = holdback, starts = starts, ends = ends, limit = limit,
    hold = hold, qlimit = qlimit, created = created, closed = closed, avail = avail, held = held,
    sold = sold, qunits = qunits, seq = seq, now = last, loading = loading, qlen = qlen, nexp = nexp,
    ver = ver or 0, segs = segs or 1, seg = seg or 0, mode = mode or 0, lent = lent or 0, got = got or 0,
    pend = pend or 0,
  }
  if S.now > now then
    now = S.now
  end
  if not touches then
    check_types(2, 3, 4, 5, 6, 7)
  end
  return true
end

-- pack_state is the st field for S.
local function pack_state()
  return pack_st(S.price, S.stock, S.holdback, S.starts, S.ends, S.limit, S.hold, S.qlimit,
    S.created, S.closed, S.avail, S.held, S.sold, S.qunits, S.seq, now, S.loading, S.qlen, S.nexp, S.ver,
    S.segs, S.seg, S.mode, S.lent, S.got, S.pend)
end

-- bump raises the version once per call, at the call's first change: every event of the call
-- and the saved state carry the same version, the one after the call.
local function bump()
  if vtag == '' then
    S.ver = S.ver + 1
    vtag = 'v' .. num(S.ver) .. '|'
  end
end

-- with_version appends the sale's version to a script's reply table (0 when the sale is not
-- loaded): the Go side takes it off in one place (execRaw) and compares it with the highest
-- version this instance has seen (version.go).
local function with_version(out)
  out[#out + 1] = (S and S.ver) or 0
  return out
end

-- The streams' readers are woken by a notification, not by polling (docs/DECISIONS.md "Stream
-- readers woken by a notification"): an entry added to a stream that was quiet for NOTIFY_QUIET_MS
-- (no entry, or its newest one older) publishes the stream's key on the channel <key prefix>notify.
-- An entry added sooner publishes nothing: a reader woken by the entry before it reads on until
-- two of its reads NOTIFY_QUIET_MS apart find nothing new (notifyQuiet in stream.go, equal to it).
local NOTIFY_QUIET_MS = 20

local function stream_id_ms(id)
  return tonumber(string.match(id, '^(%d+)'))
end

-- flush_events appends the pending changes to the stream, as one entry, and notifies the readers
-- when the stream was quiet.
local function flush_events()
  if #pending > 0 then
    guard(7)
    local last = newest_entry()
    local id = redis.call('XADD', KEYS[7], '*', unpack(pending))
    newest = id
    pending = {}
    if not last or stream_id_ms(id) - stream_id_ms(last) >= NOTIFY_QUIET_MS then
      redis.call('PUBLISH', string.match(KEYS[7], '^[^{]*') .. 'notify', KEYS[7])
    end
  end
end

-- save_state writes the state back once, at the end of a script that changed it, and the
-- changes' events.
local function save_state()
  if changed then
    guard(1, after_state())
    bump()
    redis.call('HSET', KEYS[1], 'st', pack_state())
  end
  flush_events()
end

local function get_res(id)
  local v = redis.call('HGET', KEYS[2], id)
  verified[2] = true
  if not v then
    return nil
  end
  local st, user, q, exp, seq, amount, created, pid, key = cmsgpack.unpack(v)
  return {id = id, status = st, user = user, q = q, exp = exp, seq = seq, amount = amount,
    created = created, pid = pid, key = key}
end

local function put_res(r)
  guard(2)
  redis.call('HSET', KEYS[2], r.id,
    cmsgpack.pack(r.status, r.user, r.q, r.exp, r.seq, r.amount, r.created, r.pid, r.key))
  changed = true
end

-- emit records r, as it is after its change, for the sale's stream: in the same script as the
-- change, so that the order store can never miss one (no dual write). Each change is one
-- field e = "v<version>|<id>|<status>|<user>|<quantity>|<seq>|<amount>|<created>|<at>|<expires>|<payment
-- id length>|<payment id><idempotency key>" (numbers in decimal, expires 0 unless held): the
-- fields before the payment id cannot contain '|', and the two strings are told apart by the
-- length. The changes of one call go in one entry (save_state), at most EVENTS_PER_ENTRY of
-- them, in order: one XADD per call rather than per change, and one entry to read and
-- acknowledge.
local EVENTS_PER_ENTRY = 64
-- typ, if given, replaces the status in the entry for a change the status alone does not name
-- ('granted': a queued buyer got a hold, its status held; 'late_paid': a payment after the hold
-- ended was honoured, its status paid), for the event export (seckill.Event.Type).
local function emit(r, typ)
  local exp = 0
  if r.status == 'held' then
    exp = r.exp
  end
  bump()
  pending[#pending + 1] = 'e'
  pending[#pending + 1] = vtag .. event(r.id, typ or r.status, r.user, r.q, r.seq, r.amount, r.created, now, exp,
    r.pid, r.key)
  if #pending >= 2 * EVENTS_PER_ENTRY then
    flush_events()
  end
end

local function user_units(user)
  local v = redis.call('HGET', KEYS[5], user)
  verified[5] = true
  return tonumber(v or '0')
end

-- user_add changes a user's count; a count that falls to 0 is removed, except while segment 0
-- of a segmented sale is COLLAPSING: a later copy of the user's segment must find the field and
-- leave it (absorb_copy in segment.lua), not bring back the count from before.
local function user_add(user, d)
  guard(5)
  if redis.call('HINCRBY', KEYS[5], user, num(d)) <= 0 and S.mode ~= COLLAPSING then
    redis.call('HDEL', KEYS[5], user)
  end
end

-- open: buying is open, starts <= now < ends and not closed.
local function open()
  return S.closed == 0 and S.starts <= now and now < S.ends
end

-- window_code is nil while buying is open, else ended or not_started (in that order, as
-- seckill.Sale.WindowError: a sale closed before its start has ended).
local function window_code()
  if now >= S.ends or S.closed == 1 then
    return 'ended'
  end
  if now < S.starts then
    return 'not_started'
  end
  return nil
end

-- add_hold puts r's hold in the holds set and keeps nexp a lower bound of every expiry.
local function add_hold(r)
  guard(3)
  redis.call('ZADD', KEYS[3], num(r.exp), r.id)
  if S.nexp == 0 or r.exp < S.nexp then
    S.nexp = r.exp
  end
end

-- hold gives r a fresh hold of its units, from now.
local function hold(r)
  r.status, r.exp = 'held', now + S.hold * 1000
  S.avail, S.held = S.avail - r.q, S.held + r.q
  add_hold(r)
  changed = true
end

-- dequeue takes queued r out of the queue (its units stay counted for the user).
local function dequeue(r)
  guard(4)
  redis.call('ZREM', KEYS[4], r.id)
  S.qlen, S.qunits = S.qlen - 1, S.qunits - r.q
  changed = true
end

local function reject(r)
  dequeue(r)
  user_add(r.user, -r.q)
  r.status = 'rejected'
  put_res(r)
  emit(r)
end

local function reject_queue()
  while S.qlen > 0 do
    local ids = redis.call('ZRANGE', KEYS[4], 0, 255)
    verified[4] = true
    if #ids == 0 then
      S.qlen = 0
      break
    end
    for _, id in ipairs(ids) do
      reject(get_res(id))
    end
  end
end

-- serve hands free units to the earliest queued buyers (docs/MODEL.md "Serving the queue").
local function serve()
  if not open() then
    reject_queue()
    return
  end
  while S.qlen > 0 do
    local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
    verified[4] = true
    if not head then
      S.qlen = 0
      break
    end
    local r = get_res(head)
    if S.avail >= r.q then
      dequeue(r)
      hold(r)
      put_res(r)
      emit(r, 'granted')
    elseif S.avail + S.held < r.q then
      reject(r)
    else
      break -- the head waits, and everyone behind it
    end
  end
  if S.avail == 0 and S.held == 0 then
    reject_queue()
  end
end

-- expire ends r's hold (its units go back to available); the caller takes it out of the holds
-- set and serves the queue.
local function expire(r)
  S.held, S.avail = S.held - r.q, S.avail + r.q
  user_add(r.user, -r.q)
  r.status, r.exp = 'expired', 0
  put_res(r)
  emit(r)
end

-- settle expires r if its hold is overdue, which the bounded reclaim may have left for later
-- (more than RECLAIM holds overdue at once): a script that acts on one reservation settles it
-- first, so that it never treats an expired hold as live. It returns r.
local function settle(r)
  if r and r.status == 'held' and r.exp <= now then
    guard(3)
    redis.call('ZREM', KEYS[3], r.id)
    expire(r)
    serve()
  end
  return r
end

-- reclaim expires up to limit holds whose expiry has passed, earliest first, then serves the
-- queue. It returns how many it expired and whether it stopped at the limit.
local function reclaim(limit)
  local n, full = 0, false
  if S.nexp ~= 0 and S.nexp <= now then
    local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', num(now), 'LIMIT', 0, limit)
    verified[3] = true
    for _, id in ipairs(ids) do
      local r = get_res(id)
      if r and r.status == 'held' then
        expire(r)
        n = n + 1
      end
    end
    if #ids > 0 then
      guard(3)
      redis.call('ZREM', KEYS[3], unpack(ids))
    end
    full = #ids == limit
    -- The earliest expiry left (nexp may also have been a hold that was paid or cancelled).
    local head = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    S.nexp = tonumber(head[2] or '0')
    changed = true
  end
  if n > 0 or (S.qlen > 0 and not open()) then
    serve()
  end
  return n, full
end

-- res_reply is {'ok', flag, id suffix, status, user, quantity, expires_ms (0 unless held), seq,
-- amount, created_ms, payment id, idempotency key, position (0 unless queued)}.
local function res_reply(flag, r)
  local pos, exp = 0, 0
  if r.status == 'queued' then
    pos = redis.call('ZRANK', KEYS[4], r.id) + 1
  elseif r.status == 'held' then
    exp = r.exp
  end
  return {'ok', flag, r.id, r.status, r.user, r.q, exp, r.seq, r.amount, r.created, r.pid, r.key, pos}
end

-- sale_reply is {'ok', name, price, stock, holdback, starts, ends, limit, hold, qlimit,
-- created, avail, held, sold, qunits, currency, listed, segs, mode, lent, got, pre, room} (segs
-- to got: this segment's, see the header). currency, listed, pre (preheat seconds) and room (the
-- waiting room, load.lua ARGV[24]) are fields of their own in the sale's hash; a sale loaded
-- before they existed has none, and reads as currency '', listed '1', pre '0' and room ''.
local function sale_reply()
  local meta = redis.call('HMGET', KEYS[1], 'name', 'currency', 'listed', 'pre', 'room')
  return {'ok', meta[1], S.price, S.stock, S.holdback, S.starts, S.ends,
    S.limit, S.hold, S.qlimit, S.created, S.avail, S.held, S.sold, S.qunits, meta[2] or '', meta[3] or '1',
    S.segs, S.mode, S.lent, S.got, meta[4] or '0', meta[5] or ''}
end

-- begin validates the keys and reads the clock; ready loads the sale and refuses a sale that is
-- missing or being rebuilt. Scripts call begin, validate their own arguments, then ready.
local function begin()
  check_keys()
  now = clock_arg(ARGV[1])
  changed = false
  vtag = ''
end

local function ready()
  if not load_state() then
    return {'not_loaded'}
  end
  if S.loading == 1 then
    return {'loading'}
  end
  return nil
end

-- Segments (docs/DECISIONS.md "Segmented stock"). A one-segment sale is SINGLE for good. A
-- segmented sale starts with every segment SPLIT: a segment holds its share of the free units
-- and the state of the users whose hash falls on it, and never answers sold_out nor queues a
-- buyer (it answers 'empty' and the engine lends it units from another segment). At the tail
-- segment 0 goes COLLAPSING and every other segment FROZEN, their users, keys, holds and units
-- move to segment 0, they become MOVED, and segment 0 becomes SINGLE: a one-segment sale.
-- (The modes themselves are defined at the top of this file: user_add needs COLLAPSING.)

-- user_seg is the segment of user among n: the Go side's userSegment, the same arithmetic (every
-- intermediate value is an integer far below 2^53, so Lua's doubles compute it exactly).
local function user_seg(user, n)
  local h = 0
  for i = 1, #user do
    h = (h * 31 + string.byte(user, i)) % 1000003
  end
  return h % n
end

-- splitting: this segment holds only a share of the free units, so it cannot tell sold_out or
-- queue from a lack of units here (it answers 'empty'; the engine lends or collapses).
local function splitting()
  return S.mode == SPLIT or S.mode == COLLAPSING
end

-- seg_gate is nil when a script may act on this segment, else its reply: a FROZEN segment (its
-- state is being moved to segment 0) changes nothing and answers 'moving'; a MOVED one answers
-- 'moved' unless the caller asks for it (flag 'm': a reservation that stayed there, which the
-- engine did not find in segment 0).
local function seg_gate(flag)
  if S.mode == FROZEN then
    return {'moving'}
  end
  if S.mode == MOVED and flag ~= 'm' then
    return {'moved'}
  end
  return nil
end

-- flag_arg is the optional segment flag of the scripts that take a reservation id: '' from an
-- engine that takes the sale for a one-segment sale, 's' from one that knows it is segmented,
-- 'm' to act on a MOVED segment.
local function flag_arg(v)
  if v == nil or v == '' then
    return ''
  end
  if v ~= 's' and v ~= 'm' then
    fail("segment flag must be '', 's' or 'm'")
  end
  return v
end

-- not_found_reply is what a script answers for a reservation it does not have: not_found, or,
-- to an engine that takes a segmented sale for a one-segment one, the number of segments, so
-- that it looks in the reservation's own segment.
local function not_found_reply(flag)
  if S.segs > 1 and flag == '' then
    return {'segments', S.segs}
  end
  return {'not_found'}
end
