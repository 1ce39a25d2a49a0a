-- Fencing counter repair: raise this master's counter to at least a value read from a majority, and
-- stamp the epoch with the master's run_id, which vouches for the counter until the next restart.
-- KEYS[1] = fencing counter, KEYS[2] = fencing epoch, KEYS[3] = the record the master keeps about
-- itself (see master_record.lua).
-- ARGV[1] = the value to raise the counter to, ARGV[2] = the run_id the client judged the repair
-- safe for, ARGV[3] = the grace in ms the repair waits out since the incarnation was first seen (0
-- for a master whose record shows it lost nothing).
-- Creates a missing counter; never lowers one. Returns the counter afterwards; -1 (and changes
-- nothing) when the master's run_id is not ARGV[2] or its record speaks for another run (it
-- restarted since the client last checked it); -2 when the record says this incarnation may lack
-- writes and the longer of ARGV[3] and the grace the record holds has not passed since it was
-- first seen (a client with longer TTLs declared a longer grace than the repairing one knew).
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
if run_id ~= ARGV[2] then
  return -1
end
local record = redis.call('HMGET', KEYS[3], 'run_id', 'since', 'lost', 'grace')
if record[1] ~= run_id then
  return -1
end
if tonumber(ARGV[3]) > 0 and record[3] == '1' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local grace = math.max(tonumber(ARGV[3]), tonumber(record[4] or '0'))
  if now - tonumber(record[2] or now) < grace then
    return -2
  end
end
local current = redis.call('GET', KEYS[1])
local target = tonumber(ARGV[1])
if current == false or tonumber(current) < target then
  redis.call('SET', KEYS[1], ARGV[1])
  current = target
end
redis.call('SET', KEYS[2], run_id)
return tonumber(current)
