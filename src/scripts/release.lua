-- Compare-and-delete: remove the lock only while it still holds our token (after token_common.lua).
-- KEYS[1] = lock key, ARGV[1] = our token, ARGV[2] = channel to announce the release on ('' for none).
-- Returns 1 when our lock was deleted, 0 when the key is absent, -1 when another token holds it.
local refused = not_ours(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= nil and ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], ARGV[1])
end
return 1
