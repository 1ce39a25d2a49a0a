-- Fenced acquire, round 2: while our lock still holds our token, raise the counter to the token
-- (after token_common.lua).
-- KEYS[1] = lock key, KEYS[2] = fencing counter. ARGV[1] = our token, ARGV[2] = the fencing token T.
-- Returns 1 when the counter is now at least T, 0 when the key is absent (expired), -1 when another
-- token holds it. Only a commit on a majority, inside the validity, issues T.
local refused = not_ours(KEYS[1], ARGV[1])
if refused then
  return refused
end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
