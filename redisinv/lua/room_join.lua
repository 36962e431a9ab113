-- room_join.lua: WaitingRooms.Join: puts an entrant in the sale's room, once.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] entrant (32 lower-case hex: seckill.EntrantID); [3] its
--       draw key (0 to 2^48-1: seckill.DrawKey; ignored for fifo and from the start); [4] order
--       ('draw' or 'fifo'); [5] opens seconds (0 to 86400: joining opens that long before the
--       start); [6] the most entrants the room takes (1 to 10^9: room.go MaxRoomEntrants).
-- Returns: <ticket> (room_common.lua ticket_reply): the entrant's, unchanged, when it joined
--          before; a ticket 'sold_out' (not kept) when the room closed sold out; {'not_started'}
--          before the room opens; {'ended'} once the sale is over (or closed); {'full'} when
--          the room holds its most entrants; {'not_loaded'} / {'loading'} / {'segmented'}.
-- Before the start the entrant joins the pre-queue: at its draw key in rwait and in rpre for a
-- draw, at its arrival for a fifo; from the start, at its arrival, behind everyone.
-- @room
local function main()
  room_begin()
  local e = hex_arg(ARGV[2], 'entrant', 32)
  local key = int_arg(ARGV[3], 'draw key', 0, TWO48 - 1)
  local order = ARGV[4]
  if order ~= 'draw' and order ~= 'fifo' then
    fail("order must be 'draw' or 'fifo'")
  end
  local opens = int_arg(ARGV[5], 'opens seconds', 0, 86400)
  local most = int_arg(ARGV[6], 'most entrants', 1, MAX_QUANTITY)
  local missing = room_ready()
  if missing then
    return missing
  end
  room_check_types()
  local t = get_ticket(e)
  if t then
    return ticket_reply(e, t)
  end
  if now < S.starts - opens * 1000 then
    return {'not_started'}
  end
  if now >= S.ends or S.closed == 1 or R.closed == 2 then
    return {'ended'}
  end
  if R.closed == 1 then
    return {'ok', 'sold_out', 0, 0, 0, now, 0, 0}
  end
  if R.entrants >= most then
    return {'full'}
  end
  R.seq, R.entrants = R.seq + 1, R.entrants + 1
  local drawn, score = 0, TWO48 + R.seq
  if now < S.starts then
    drawn, R.pre = 1, R.pre + 1
    if order == 'draw' then
      score = key
      redis.call('ZADD', KEYS[4], '0', e)
    end
  end
  redis.call('ZADD', KEYS[3], num(score), e)
  t = {joined = now, drawn = drawn, admitted = 0, index = 0, active = 0}
  put_ticket(e, t)
  rchanged = true
  return ticket_reply(e, t)
end

local out = main()
save_room()
return with_room_version(out)
