-- Fenced write acquire, round 1: the write rule of rw_common.lua (sent in front of this text)
-- and the counter rule of fence_acquire.lua in one step, so the writer key is taken and the counter
-- drawn together.
-- KEYS[1..3] and ARGV[1..4] as rw_common.lua; KEYS[4] = the fencing counter, KEYS[5] = the
-- fencing epoch (as fence_acquire.lua); ARGV[5] = the highest counter value this client has seen
-- from this master, ARGV[6] = the run_id this client has verified for this master.
-- Returns the counter after INCR (>= 1) when we hold the writer key; -1 when another writer holds
-- it; -2 when the counter is missing, -3 when it is below ARGV[5], -4 when the epoch is not ARGV[6]
-- (in these three cases nothing is set: the master is repaired before its vote counts); -5 when
-- unexpired readers hold the lock (we now wait here, and new readers are refused). The codes are
-- fence_acquire.lua's, plus -5: rw_write.lua's -2 (readers) would collide with "counter missing".
local counter = redis.call('GET', KEYS[4])
if counter == false then
  return -2
end
if tonumber(counter) < tonumber(ARGV[5]) then
  return -3
end
if redis.call('GET', KEYS[5]) ~= ARGV[6] then
  return -4
end
local refused = take_writer(-5)
if refused then
  return refused
end
return redis.call('INCR', KEYS[4])
