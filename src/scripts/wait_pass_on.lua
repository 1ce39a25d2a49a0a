-- A hand-off that reached a process with no waiter left for the key (it stopped waiting, and its
-- leave did not reach this master): passed on to the next queued process while the key is still
-- free (after handoff_common.lua).
-- KEYS[1] = lock key, KEYS[2] = its queue, ARGV[1] = the released token, ARGV[2] = the key's
-- release channel. Returns 1 when a queued process was woken.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
return hand_off(KEYS[2], ARGV[1], ARGV[2])
