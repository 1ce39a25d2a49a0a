-- Fair leave: take our ticket out of the queue (we got the lock, gave up, or were cancelled), and
-- tell the next live waiter when the lock is free.
-- ARGV[1] = our ticket id, ARGV[2] = the release channel ('' for none).
-- Returns 1 when our ticket was queued here, 0 when it was not.
local removed = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if removed == 1 and redis.call('EXISTS', KEYS[1]) == 0 then
  notify_next(ARGV[2], ARGV[1])
end
return removed
