-- room_draw.lua: WaitingRooms.DrawEntrants: a page of the draw's pre-queue, in id order.
-- KEYS: the room's six keys (room_common.lua).
-- ARGV: [1] clock (common.lua); [2] after: '' for the first page, else the page's last id
--       (any string of at most 1024 bytes: the ids after it in byte order); [3] limit (1 to 1000).
-- Returns: {'ok', {entrant...}}: at most limit ids after after; {'not_loaded'} / {'loading'} /
--          {'segmented'}.
-- @room
local function main()
  room_begin()
  local after = str_arg(ARGV[2], 'after', 1024)
  local limit = int_arg(ARGV[3], 'limit', 1, 1000)
  local missing = room_ready()
  if missing then
    return missing
  end
  local from = '-'
  if after ~= '' then
    from = '(' .. after
  end
  return {'ok', redis.call('ZRANGEBYLEX', KEYS[4], from, '+', 'LIMIT', '0', num(limit))}
end

return with_room_version(main())
