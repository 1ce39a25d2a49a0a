-- Multi-resource extend: give every key a new TTL, only while every key still holds our token.
-- KEYS = the lock keys, ARGV[1] = our token, ARGV[2] = new TTL in ms.
-- A master that lost any key has lost the lock: nothing is extended there.
-- Returns 1 when extended, 0 when a key is absent and none is held by another, -1 when another
-- holder (or a non-lock value) has any of them.
local absent = 0
for _, key in ipairs(KEYS) do
  local current = redis.pcall('GET', key)
  if current ~= ARGV[1] then
    if current == false then
      absent = absent + 1
    else
      return -1
    end
  end
end
if absent > 0 then
  return 0
end
for _, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, ARGV[2])
end
return 1
