-- Fencing counter repair: raise this master's counter to at least a value read from a majority.
-- KEYS[1] = fencing counter. ARGV[1] = the value to raise it to.
-- Creates a missing counter; never lowers one. Returns the counter afterwards.
local current = redis.call('GET', KEYS[1])
local target = tonumber(ARGV[1])
if current == false or tonumber(current) < target then
  redis.call('SET', KEYS[1], ARGV[1])
  return target
end
return tonumber(current)
