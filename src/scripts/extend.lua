-- Compare-and-PEXPIRE: give our lock a new TTL only while it still holds our token (after
-- token_common.lua).
-- KEYS[1] = lock key, ARGV[1] = our token, ARGV[2] = new TTL in milliseconds.
-- Returns 1 when extended, 0 when the key is absent (expired), -1 when another token holds it.
local refused = not_ours(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
