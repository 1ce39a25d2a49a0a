-- Fenced acquire, round 1: take the lock and draw the next value of this master's fencing counter.
-- KEYS[1] = lock key, KEYS[2] = fencing counter (one per master, shared by every resource),
-- KEYS[3] = fencing epoch (the run_id of the master when its counter was last initialised or
-- repaired).
-- ARGV[1] = our token, ARGV[2] = TTL in milliseconds,
-- ARGV[3] = the highest counter value this client has seen from this master (its floor),
-- ARGV[4] = the run_id this client has verified for this master.
-- Returns the counter after INCR (>= 1) when the lock was taken; -1 when another token holds it;
-- -2 when the counter is missing (a fresh master, or one that lost its data); -3 when it is below
-- the floor (the master went back in time); -4 when the epoch is not ARGV[4]: the master restarted
-- since its counter was last vouched for, and may have lost increments that no client saw. In the
-- last three cases nothing is set: the master must be repaired before its vote counts.
local counter = redis.call('GET', KEYS[2])
if counter == false then
  return -2
end
if tonumber(counter) < tonumber(ARGV[3]) then
  return -3
end
if redis.call('GET', KEYS[3]) ~= ARGV[4] then
  return -4
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return -1
