-- Reentrant release: remove one hold; the last hold deletes the lock and announces the release
-- (after reentrant_common.lua).
-- KEYS[1] = the reentrant lock's hash.
-- ARGV[1] = owner field, ARGV[2] = hold field, ARGV[3] = channel to announce the release on ('' for none).
-- The announcement carries the hold field, unique to the hold: listeners count the masters that
-- announced one release by its payload, so two releases by the same owner must not look alike.
-- Returns 1 when our hold was removed, 0 when it is absent (expired, or released already), -1 when
-- another owner holds the lock.
if redis.call('HDEL', KEYS[1], ARGV[2]) == 1 then
  if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
    redis.call('DEL', KEYS[1])
    if ARGV[3] ~= '' then
      redis.call('PUBLISH', ARGV[3], ARGV[2])
    end
  end
  return 1
end
return hold_missing(KEYS[1], ARGV[1])
