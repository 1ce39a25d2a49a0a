-- Semaphore acquire: take the slot aimed at, or name the first free slot.
-- KEYS[1..P] = the semaphore's slot keys, in slot order (each a plain lock key holding a token).
-- ARGV[1] = our token, ARGV[2] = TTL in ms, ARGV[3] = the slot aimed at (0-based).
-- Returns -1 when the slot aimed at was taken for our token, the 0-based index of the first free
-- slot when it was held, or -2 when every slot is held. Only a -1 is a vote: a slot is held by
-- whoever a majority gave it to, exactly like a plain lock.
local aim = tonumber(ARGV[3]) + 1
if redis.call('SET', KEYS[aim], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return -1
end
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    return i - 1
  end
end
return -2
