-- Shared by the fair lock's scripts, which are sent with this text in front of them.
-- KEYS[1] = the lock (a string holding the holder's random token, drawn for each acquisition),
-- KEYS[2] = the queue (a sorted set of ticket ids scored by ticket time), KEYS[3] = the heartbeat
-- deadlines (a sorted set of ticket ids scored by this master's time in ms after which the waiter
-- counts as gone).

-- This master's clock in milliseconds. Deadlines are only ever compared on the master that set them.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Drops every waiter whose heartbeat deadline has passed.
local function purge(now)
  local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
  for _, id in ipairs(stale) do
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
  end
end

-- The first live waiter other than `skip` (nil for none). Queued tickets without a deadline are not
-- live waiters and are dropped on the way. Returns false when nobody waits.
local function live_head(skip)
  local i = 0
  while true do
    local id = redis.call('ZRANGE', KEYS[2], i, i)[1]
    if not id then
      return false
    end
    if id == skip then
      i = i + 1
    elseif redis.call('ZSCORE', KEYS[3], id) then
      return id
    else
      redis.call('ZREM', KEYS[2], id)
    end
  end
end

-- Tells the next live waiter that the lock is free: publishes its ticket id on the release channel.
local function notify_next(channel, skip)
  if channel == '' then
    return
  end
  purge(now_ms())
  local head = live_head(skip)
  if head then
    redis.call('PUBLISH', channel, head)
  end
end

