-- Multi-resource release: delete every key that still holds our token, announcing each release.
-- KEYS = the lock keys, ARGV[1] = our token, ARGV[2] = prefix of the release channels ('' for none):
-- the release of a key is published on that prefix followed by the key, as for a plain lock.
-- Returns 1 when every key held our token, -1 when another holder (or a non-lock value) has any of
-- them, else 0 (some or all had expired).
local other, absent = 0, 0
for _, key in ipairs(KEYS) do
  local current = redis.pcall('GET', key)
  if current == ARGV[1] then
    redis.call('DEL', key)
    if ARGV[2] ~= '' then
      redis.call('PUBLISH', ARGV[2] .. key, ARGV[1])
    end
  elseif current == false then
    absent = absent + 1
  else
    other = other + 1
  end
end
if other > 0 then
  return -1
end
if absent > 0 then
  return 0
end
return 1
