-- Fencing counter repair: raise this master's counter to at least a value read from a majority, and
-- stamp the epoch with the master's run_id, which vouches for the counter until the next restart.
-- KEYS[1] = fencing counter, KEYS[2] = fencing epoch.
-- ARGV[1] = the value to raise the counter to, ARGV[2] = the run_id the client judged the repair
-- safe for (its grace is counted from that run's start).
-- Creates a missing counter; never lowers one. Returns the counter afterwards, or -1 (and changes
-- nothing) when the master's run_id is not ARGV[2]: it restarted since the client last checked it.
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
if run_id ~= ARGV[2] then
  return -1
end
local current = redis.call('GET', KEYS[1])
local target = tonumber(ARGV[1])
if current == false or tonumber(current) < target then
  redis.call('SET', KEYS[1], ARGV[1])
  current = target
end
redis.call('SET', KEYS[2], run_id)
return tonumber(current)
