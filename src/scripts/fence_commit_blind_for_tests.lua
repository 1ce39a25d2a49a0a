-- Out of model, never sent unless a test asked for it (`unsafe_without_for_tests` with
-- `Mechanism::FenceCommitKey`, behind the `seam` feature): the fenced commit with its key check
-- taken out, so that a holder whose key expired between the rounds, and was taken by another, is
-- issued its token all the same. The simulation's negative control `without-commit-key-check` uses
-- it to show that its fencing check can fail. Same keys and arguments as fence_commit.lua.
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
