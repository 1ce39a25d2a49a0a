-- A master check's read of the record the master keeps about itself, in one step with what it is
-- judged against: the master's run_id now, its clock now, and its fencing counter.
-- KEYS[1] = the record (a hash), KEYS[2] = the fencing counter.
-- Returns {run_id, now in ms, counter or false, then the record's run_id, since, lost, durable,
-- grace and hwm fields, each false when absent}.
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reply = {run_id, tostring(now), redis.call('GET', KEYS[2])}
local fields = redis.call('HMGET', KEYS[1], 'run_id', 'since', 'lost', 'durable', 'grace', 'hwm')
for i = 1, 6 do
  reply[3 + i] = fields[i]
end
return reply
