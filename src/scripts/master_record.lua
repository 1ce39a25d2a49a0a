-- A master check's write of the record the master keeps about itself: only if the record is still
-- the one the check read (compare and set), and only under the run_id the check judged it for.
-- KEYS[1] = the record (a hash).
-- ARGV[1] = the record's fields as read, joined by ',' ('' when there was none);
-- ARGV[2..7] = the new run_id, since, lost, durable, grace and hwm.
-- Returns 1 when written, 0 (nothing written) when the record changed since it was read, -1 when
-- the master's run_id is not the new record's (it restarted since the check read it).
local fields = redis.call('HMGET', KEYS[1], 'run_id', 'since', 'lost', 'durable', 'grace', 'hwm')
local read = ''
if fields[1] then
  local parts = {}
  for i = 1, 6 do
    parts[i] = fields[i] or ''
  end
  read = table.concat(parts, ',')
end
if read ~= ARGV[1] then
  return 0
end
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
if run_id ~= ARGV[2] then
  return -1
end
redis.call('HSET', KEYS[1], 'run_id', ARGV[2], 'since', ARGV[3], 'lost', ARGV[4], 'durable', ARGV[5],
  'grace', ARGV[6], 'hwm', ARGV[7])
return 1
