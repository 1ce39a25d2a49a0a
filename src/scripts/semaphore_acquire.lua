-- Semaphore acquire: take the slot aimed at, or name the first free slot; never beside holders that
-- count another number of permits.
-- KEYS[1..P] = the semaphore's slot keys, in slot order (each a plain lock key holding a token);
-- KEYS[P+1] = its permits key, holding the number of permits its holders count, which lives at
-- least as long as any slot taken here (raised by every acquire and every extend).
-- ARGV[1] = our token, ARGV[2] = TTL in ms, ARGV[3] = the slot aimed at (0-based), ARGV[4] = P.
-- Returns -1 when the slot aimed at was taken for our token, the 0-based index of the first free
-- slot when it was held, -2 when every slot is held, or {-3, n} (nothing taken) when holders here
-- count n permits, not P. Only a -1 is a vote: a slot is held by whoever a majority gave it to,
-- exactly like a plain lock.
local permits = KEYS[#KEYS]
local in_use = redis.call('GET', permits)
if in_use and in_use ~= ARGV[4] then
  return {-3, tonumber(in_use)}
end
local aim = tonumber(ARGV[3]) + 1
if redis.call('SET', KEYS[aim], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('PTTL', permits) < tonumber(ARGV[2]) then
    redis.call('SET', permits, ARGV[4], 'PX', ARGV[2])
  end
  return -1
end
for i = 1, #KEYS - 1 do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    return i - 1
  end
end
return -2
