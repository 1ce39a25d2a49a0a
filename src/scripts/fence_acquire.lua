-- Fenced acquire, round 1: take the lock and draw the next value of this master's fencing counter.
-- KEYS[1] = lock key, KEYS[2] = fencing counter (one per master, shared by every resource).
-- ARGV[1] = our token, ARGV[2] = TTL in milliseconds,
-- ARGV[3] = the highest counter value this client has seen from this master (its floor).
-- Returns the counter after INCR (>= 1) when the lock was taken; -1 when another token holds it;
-- -2 when the counter is missing (a fresh master, or one that lost its data) and -3 when it is below
-- the floor (the master went back in time). In both last cases nothing is set: the master must be
-- repaired before its vote counts.
local counter = redis.call('GET', KEYS[2])
if counter == false then
  return -2
end
if tonumber(counter) < tonumber(ARGV[3]) then
  return -3
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return -1
