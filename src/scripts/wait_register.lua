-- A queued waiter's look at the lock between attempts (after handoff_common.lua): its process joins
-- the key's queue (or keeps its place), and reads the lock's PTTL and its place in the queue.
-- KEYS[1] = lock key, KEYS[2] = its queue, KEYS[3..] = other keys the lock is held by (a write
-- hold's readers), ARGV[1] = the process's wake channel, ARGV[2] = the process's score (when it
-- first registered, ms), ARGV[3] = how long the queue lives unused (ms).
-- Returns {the lock's PTTL (-2 when every key is gone, -1 when one has no TTL, else the longest),
-- how many processes are ahead of ours}.
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
drop_dead_heads(KEYS[2], ARGV[1])
local ahead = redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. ARGV[2])
local pttl = redis.call('PTTL', KEYS[1])
for i = 3, #KEYS do
  local other = redis.call('PTTL', KEYS[i])
  if other == -1 or pttl == -1 then
    pttl = -1
  elseif other > pttl then
    pttl = other
  end
end
return {pttl, ahead}
