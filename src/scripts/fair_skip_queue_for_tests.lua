-- Out of model, never sent unless a test asked for it (`unsafe_fair_skips_queue_for_tests`, behind
-- the `seam` feature): placed between fair_common.lua and fair_acquire.lua, it shadows `live_head`
-- so that the acquire believes its own ticket is always at the head of the queue. The simulation's
-- negative control `fair-skips-queue` uses it to show that its fair-order check can fail.
local function live_head(skip)
  return ARGV[1]
end
