-- Fair release: delete the lock while it holds our token, and tell the next live waiter.
-- ARGV[1] = our token, ARGV[2] = the release channel ('' for none), ARGV[3] = our ticket id (not
-- told: a copy of it may linger in the queue here); the message is the ticket id of the waiter
-- whose turn it is.
-- Returns 1 when our lock was deleted, 0 when the lock is absent, -1 when another holder has it.
local current = redis.call('GET', KEYS[1])
if current == false then
  return 0
end
if current ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
notify_next(ARGV[2], ARGV[3])
return 1
