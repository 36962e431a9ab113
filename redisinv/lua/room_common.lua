-- room_common.lua: the state and the helpers of a sale's waiting room (room.go; docs/DECISIONS.md
-- "Waiting rooms on Redis"), spliced after prelude.lua into each room_*.lua script at its
-- "-- @room" line (scripts.go), in place of common.lua, whose eight keys a room does not use.
--
-- KEYS (the same six for every room script; all carry the sale's hash tag {sale:<id>}, so that
-- a room's script runs on its sale's Cluster node, atomically with nothing else):
--   KEYS[1] sale   HASH  the sale's hash (common.lua), read only: its window, stock and clock,
--                        and its room policy (the field room: room_policy)
--   KEYS[2] room   HASH  field p while a restore runs (room_restore.lua); field r = cmsgpack(entrants, pre, admitted, seq, closed, credit, refill,
--                        now, told, closed at): the entrants joined so far, those joined before the start, those
--                        admitted so far, the last arrival's number,
--                        closed (0 admitting, 1 sold out, 2 ended), the admission bucket's credit
--                        in thousandths of an admission (-1 before the first admission), the time
--                        it was last refilled (ms), the latest time a room script used, and the
--                        admissions told (the serving counter, room.go RoomTeller: absent in a
--                        room written before it was kept, read as admitted), and when the room
--                        closed (ms; 0 while it admits, and in a room closed before it was kept); field u =
--                        cmsgpack(entrant...) the admitted entrants not told yet (admissions
--                        told+1 .. admitted, in order; absent when none)
--   KEYS[3] rwait  ZSET  the entrants not admitted: scored by draw key (below 2^48) for the
--                        draw's pre-queue, by 2^48 + arrival number otherwise; equal scores
--                        sort by entrant id, which is seckill.DrawOrder's tie-break; removed
--                        when the room closes (those left were told)
--   KEYS[4] rpre   ZSET  the draw's pre-queue, score 0, paged by id (DrawEntrants)
--   KEYS[5] rent   HASH  entrant -> cmsgpack(joined ms, drawn 0/1, admitted ms, index, active
--                        ms, arrival): index 0 until admitted; active is when its place stops
--                        counting against max_active; arrival its arrival number (seq when it
--                        joined; absent, read 0, in entries written before it was kept)
--   KEYS[6] ract   ZSET  admitted entrants scored by active ms; the admission drops those at or
--                        before now (a place that ended never counts again)
-- ARGV[1] is the clock, as common.lua's. The room's time is the latest of it, the sale's (st's
-- now) and the room's own, so that a room and its sale share a clock that never goes back.
-- Every script validates its keys and arguments before its first write. Replies: 'ok' or a
-- domain code first, as common.lua's ('not_loaded', 'loading', and 'segmented' for a sale split
-- in segments, which has no room; 'restoring' while room_restore.lua rebuilds the room); then
-- the sale's version (as with_version).

local TWO48 = 281474976710656 -- 2^48: draw keys are below it, arrivals above it
local CLOSED = {'sold_out', 'ended'}
local ROOM_TYPES = {'hash', 'hash', 'zset', 'zset', 'hash', 'zset'}

local now -- the room's time in ms
local S   -- the sale, read only: starts, ends, closed, sellable, sold, ver, segs
local R   -- the room's counters (KEYS[2] r), once room_ready read them
local rchanged = false

-- check_room_keys requires the six keys of one sale's room: '<prefix>{sale:<id>}:sale' (the
-- prefix without braces, the id 1 to 64 of [A-Za-z0-9_.-]: no segment) and the same base with
-- ':room', ':rwait', ':rpre', ':rent', ':ract' (ROOM_PARTS, prelude.lua).
local function check_room_keys()
  if #KEYS ~= 6 then
    fail('want the 6 keys of a sale room, got ' .. #KEYS)
  end
  local k = KEYS[1]
  local n = #k - 5 -- the length of the base, before ':sale'
  local open = string.find(k, '{', 1, true)
  if not open or string.find(k, '}', 1, true) ~= n or string.find(k, 'sale:', open + 1, true) ~= open + 1 or
      n - open - 6 > 64 or not string.find(k, '^[A-Za-z0-9_.-]+}:sale$', open + 6) then
    fail('KEYS[1] must be <prefix without braces>{sale:<id>}:sale, got ' .. k)
  end
  local base = string.sub(k, 1, n)
  for i = 2, 6 do
    if KEYS[i] ~= base .. ROOM_PARTS[i - 1] then
      fail('KEYS[' .. i .. '] must be ' .. base .. ROOM_PARTS[i - 1])
    end
  end
end

-- room_check_types requires the room's keys to be of their type or absent: a script that writes
-- calls it before its first write, so that a corrupted key fails it before it changed anything.
local function room_check_types()
  for i = 2, 6 do
    local got = redis.call('TYPE', KEYS[i])['ok']
    if got ~= ROOM_TYPES[i] and got ~= 'none' then
      fail('KEYS[' .. i .. '] is a ' .. got .. ', want a ' .. ROOM_TYPES[i])
    end
  end
end

-- room_begin validates the keys and reads the clock; scripts then validate their own
-- arguments, then call room_ready, or room_open (which also answers no_room and checks types).
local function room_begin()
  check_room_keys()
  now = clock_arg(ARGV[1])
end

-- room_policy reads the sale hash's room field (load.lua ARGV[24]; room.go roomField): nil for a
-- sale without a room.
local function room_policy(f)
  if not f then
    return nil
  end
  local order, opens, rate, maxact, token = string.match(f, '^(%l+),(%d+),(%d+),(%d+),(%d+),%d+$')
  if not order then
    fail('the sale hash has a malformed room field: ' .. f)
  end
  return {order = order, opens = tonumber(opens), rate = tonumber(rate), maxact = tonumber(maxact),
    token = tonumber(token)}
end

-- room_ready reads the sale (S, its room policy P: nil without one) and the room (R): nil when
-- the room can be used, else the reply. A room being restored (its hash's field p, set by
-- room_restore.lua until it ends) answers {'restoring'}, as a sale being rebuilt answers
-- {'loading'}; restoring is true for room_restore.lua itself, which reads the room whatever
-- the sale's loading and the room's p (it checks them itself).
local P
local function room_ready(restoring)
  local h = redis.call('HMGET', KEYS[1], 'st', 'room')
  local v = h[1]
  if not v then
    return {'not_loaded'}
  end
  P = room_policy(h[2])
  local _, stock, holdback, starts, ends, _, _, _, _, closed, _, _, sold, _, _, last, loading, _, _, ver,
    segs = cmsgpack.unpack(v)
  S = {sellable = stock - holdback, starts = starts, ends = ends, closed = closed, sold = sold, ver = ver or 0,
    segs = segs or 1}
  S.loading = loading
  if loading == 1 and not restoring then
    return {'loading'}
  end
  if S.segs > 1 then
    return {'segmented'}
  end
  if last > now then
    now = last
  end
  if not restoring and redis.call('HEXISTS', KEYS[2], 'p') == 1 then
    return {'restoring'}
  end
  local r = redis.call('HGET', KEYS[2], 'r')
  if r then
    local entrants, pre, admitted, seq, rclosed, credit, refill, rnow, told, closedat = cmsgpack.unpack(r)
    R = {entrants = entrants, pre = pre, admitted = admitted, seq = seq, closed = rclosed, credit = credit,
      refill = refill, told = told or admitted, closedat = closedat or 0}
    if rnow > now then
      now = rnow
    end
  else
    R = {entrants = 0, pre = 0, admitted = 0, seq = 0, closed = 0, credit = -1, refill = 0, told = 0, closedat = 0}
  end
  return nil
end

-- room_open is room_ready for a script that needs the room and writes to it (join, tell, admit):
-- nil when the sale has a room that can be used, with its keys checked (room_check_types)
-- before any write; else the reply: room_ready's, or {'no_room'} for a sale without a room.
local function room_open()
  local missing = room_ready()
  if missing then
    return missing
  end
  if not P then
    return {'no_room'}
  end
  room_check_types()
  return nil
end

-- save_room writes the room's counters back, once, at the end of a script that changed them.
local function save_room()
  if rchanged then
    redis.call('HSET', KEYS[2], 'r',
      cmsgpack.pack(R.entrants, R.pre, R.admitted, R.seq, R.closed, R.credit, R.refill, now, R.told, R.closedat))
  end
end

local function with_room_version(out)
  out[#out + 1] = (S and S.ver) or 0
  return out
end

local function get_ticket(e)
  local v = redis.call('HGET', KEYS[5], e)
  if not v then
    return nil
  end
  local joined, drawn, admitted, index, active, arrival = cmsgpack.unpack(v)
  return {joined = joined, drawn = drawn, admitted = admitted, index = index, active = active,
    arrival = arrival or 0}
end

local function put_ticket(e, t)
  redis.call('HSET', KEYS[5], e, cmsgpack.pack(t.joined, t.drawn, t.admitted, t.index, t.active, t.arrival))
end

-- ticket_reply is {'ok', state, index, ahead, drawn, joined ms, admitted ms, active ms, arrival} for
-- entrant e with ticket t. An entrant waiting has, from the start, the index its place in rwait
-- gives it (rank + admitted + 1: both change by one at each admission, so it is fixed); one in
-- a closed room has none (0): it was told. An admission not told yet (index above R.told) reads
-- waiting at its index; every waiting entrant has index − told − 1 ahead.
local function ticket_reply(e, t)
  if t.index > 0 and t.index <= R.told then
    return {'ok', 'admitted', t.index, 0, t.drawn, t.joined, t.admitted, t.active, t.arrival}
  end
  local state, index, ahead = 'pre_queue', 0, 0
  if R.closed ~= 0 then
    state = CLOSED[R.closed]
  elseif t.index > 0 then
    state, index, ahead = 'waiting', t.index, t.index - R.told - 1
  elseif now >= S.starts then
    state = 'waiting'
    local rank = redis.call('ZRANK', KEYS[3], e)
    if rank then
      index = rank + R.admitted + 1
      ahead = index - R.told - 1
    end
  end
  return {'ok', state, index, ahead, t.drawn, t.joined, 0, 0, t.arrival}
end

-- room_counts is {'ok', entrants, pre, admitted, waiting, active, closed ('' while admitting,
-- else 'sold_out' or 'ended'), closed at (ms, 0 while admitting)}: admitted counts the admissions told, waiting those not told
-- besides rwait's; waiting is 0 once the room closed (those left were told).
local function room_counts()
  local waiting, closed = 0, ''
  if R.closed == 0 then
    waiting = redis.call('ZCARD', KEYS[3]) + R.admitted - R.told
  else
    closed = CLOSED[R.closed]
  end
  local active = redis.call('ZCOUNT', KEYS[6], '(' .. num(now), '+inf')
  return {'ok', R.entrants, R.pre, R.told, waiting, active, closed, R.closedat}
end
