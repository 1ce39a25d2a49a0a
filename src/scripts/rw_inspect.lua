-- Reads a read-write lock without touching it: the unexpired readers and waiting writers on this
-- master's clock. KEYS[1] = the readers, KEYS[2] = the waiting writers.
-- Returns {reader tokens, number of waiting writers}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local readers = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
local waiting = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
return {readers, waiting}
