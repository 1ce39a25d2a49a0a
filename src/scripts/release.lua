-- Compare-and-delete, then the hand-off: the lock goes only while it still holds our token (after
-- token_common.lua and handoff_common.lua).
-- KEYS[1] = lock key, KEYS[2] = its queue of waiting processes, ARGV[1] = our token,
-- ARGV[2] = the key's release channel ('' for no hand-off: a failed attempt's cleanup).
-- Returns 1 when our lock was deleted, 0 when the key is absent, -1 when another token holds it.
local refused = not_ours(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= nil and ARGV[2] ~= '' then
  hand_off(KEYS[2], ARGV[1], ARGV[2])
end
return 1
