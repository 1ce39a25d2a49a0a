-- Reads a lock key without touching it, in one atomic step: its type, its value when it is a
-- string, and its remaining time to live in milliseconds (-1: no expiry, -2: absent).
-- KEYS[1] = lock key. Returns {type, value or nil, pttl}.
local kind = redis.call('TYPE', KEYS[1])['ok']
local pttl = redis.call('PTTL', KEYS[1])
if kind == 'string' then
  return {kind, redis.call('GET', KEYS[1]), pttl}
end
return {kind, false, pttl}
