-- Multi-resource acquire: set every key to our token, or none of them.
-- KEYS = the lock keys of every resource, ARGV[1] = our token, ARGV[2] = TTL in ms.
-- Nothing is written unless every key is free, and the script runs atomically, so two clients
-- taking overlapping sets in any order can never each hold part of what the other needs.
-- Returns an empty array when every key was set, else the 1-based positions of the keys that exist
-- (held by another holder, or not a lock at all).
local held = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    held[#held + 1] = i
  end
end
if #held > 0 then
  return held
end
for _, key in ipairs(KEYS) do
  redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
end
return {}
