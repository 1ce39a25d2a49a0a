-- Fencing counter repair: raise this master's counter to at least a value read from a majority.
-- KEYS[1] = fencing counter. ARGV[1] = the value to raise it to.
-- Returns the counter afterwards. Never lowers it.
local counter = tonumber(redis.call('GET', KEYS[1]) or '0')
local target = tonumber(ARGV[1])
if counter < target then
  redis.call('SET', KEYS[1], ARGV[1])
  return target
end
return counter
