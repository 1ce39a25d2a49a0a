-- A permit's extend: compare-and-PEXPIRE of its slot, and the semaphore's permits key kept alive at
-- least as long (see semaphore_acquire.lua). Sent after token_common.lua.
-- KEYS[1] = the slot key, KEYS[2] = the permits key. ARGV[1] = our token, ARGV[2] = new TTL in ms,
-- ARGV[3] = the permits our holder counts (to set the permits key again, had it gone).
-- Returns 1 when extended, 0 when the slot is absent (expired), -1 when another token holds it.
local refused = not_ours(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local left = redis.call('PTTL', KEYS[2])
if left == -2 then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
elseif left >= 0 and left < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
