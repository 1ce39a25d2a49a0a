-- Shared by the reentrant lock's release and extend, which are sent with this text in front of them.

-- The reply of a reentrant script that did not find our hold in the lock `key`: 0 when the hold is
-- absent (the lock expired, the hold was released already, or our owner holds it by other holds),
-- -1 when another owner holds the lock.
local function hold_missing(key, owner)
  if redis.call('EXISTS', key) == 0 or redis.call('HEXISTS', key, owner) == 1 then
    return 0
  end
  return -1
end
