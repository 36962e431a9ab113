-- room_join.lua: WaitingRooms.Join: puts an entrant in the sale's room, once.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] entrant (32 lower-case hex: seckill.EntrantID); [3] its
--       draw key (0 to 2^48-1: seckill.DrawKey; '' for a key out of that range, refused only
--       where a key is used: a draw room before the start); [4] the most entrants the room
--       takes (1 to 10^9: room.go MaxRoomEntrants). The policy is the sale's (its field room).
-- Returns: <ticket> (room_common.lua ticket_reply): the entrant's, unchanged, when it joined
--          before; a ticket 'sold_out' (not kept) when the room closed sold out; {'ended'} once
--          the sale is over (or closed); {'not_started'} before the room opens; {'full'} when
--          the room holds its most entrants; {'no_room'} for a sale without a room; {'bad_key'}
--          for a draw key out of range; {'not_loaded'} / {'loading'} / {'segmented'}.
-- Before the start the entrant joins the pre-queue: at its draw key in rwait and in rpre for a
-- draw (drawn), at its arrival for a fifo; from the start, at its arrival, behind everyone.
-- @room
local function main()
  room_begin()
  local e = hex_arg(ARGV[2], 'entrant', 32)
  local key = ARGV[3]
  if key ~= '' then
    key = int_arg(key, 'draw key', 0, TWO48 - 1)
  end
  local most = int_arg(ARGV[4], 'most entrants', 1, MAX_QUANTITY)
  local missing = room_open()
  if missing then
    return missing
  end
  local t = get_ticket(e)
  if t then
    return ticket_reply(e, t)
  end
  if now >= S.ends or S.closed == 1 then
    return {'ended'}
  end
  if now < S.starts - P.opens * 1000 then
    return {'not_started'}
  end
  if R.closed ~= 0 then
    return {'ok', CLOSED[R.closed], 0, 0, 0, now, 0, 0, 0}
  end
  local draw = P.order == 'draw' and now < S.starts
  if draw and key == '' then
    return {'bad_key'}
  end
  if R.entrants >= most then
    return {'full'}
  end
  R.seq, R.entrants = R.seq + 1, R.entrants + 1
  local drawn, score = 0, TWO48 + R.seq
  if draw then
    drawn, R.pre, score = 1, R.pre + 1, key
    redis.call('ZADD', KEYS[4], '0', e)
  end
  redis.call('ZADD', KEYS[3], num(score), e)
  t = {joined = now, drawn = drawn, admitted = 0, index = 0, active = 0, arrival = R.seq}
  put_ticket(e, t)
  rchanged = true
  return ticket_reply(e, t)
end

local out = main()
save_room()
return with_room_version(out)
