-- Compare-and-PEXPIRE: give our lock a new TTL only while it still holds our token.
-- KEYS[1] = lock key, ARGV[1] = our token, ARGV[2] = new TTL in milliseconds.
-- Returns 1 when extended, 0 when the key is absent (expired), -1 when another token holds it.
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if current == false then
  return 0
end
return -1
