-- Shared by the scripts that free a plain lock's key or look at its queue of waiting processes (the
-- release, the wait's registration, the pass-on of a wake nobody took), sent with this text in front.
--
-- A key's queue is a sorted set: each member is a waiting process's own wake channel, scored by
-- when that process first registered (its wall clock, the same score on every master, so every
-- master orders the queue alike). A member whose channel nobody hears (its process is gone) is
-- dropped when it is met at the head.

-- Drops dead processes at the head of `queue`, a few at most, until a live one or `stop` heads it.
-- A live process is probed with an empty message, which its client ignores.
local function drop_dead_heads(queue, stop)
  for _ = 1, 8 do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if head == nil or head == stop or redis.call('PUBLISH', head, '') > 0 then
      return
    end
    redis.call('ZREM', queue, head)
  end
end

-- Hands the freed key to the first process in `queue` that still listens: it leaves the queue and
-- hears `token` and `channel`. When no queued process hears it, the release is announced on the
-- key's `channel`, where the waiters of other kinds, and waiters not queued, listen. Returns 1 when
-- a queued process was woken.
local function hand_off(queue, token, channel)
  for _ = 1, 8 do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if head == nil then
      break
    end
    redis.call('ZREM', queue, head)
    if redis.call('PUBLISH', head, token .. '\n' .. channel) > 0 then
      return 1
    end
  end
  redis.call('PUBLISH', channel, token)
  return 0
end
