-- Write acquire: take the writer key unless a writer or an unexpired reader holds the lock here
-- (the rule of rw_common.lua, sent in front of this text; keys and arguments as there).
-- Returns 1 when we hold the writer key, -1 when another writer holds it, -2 when readers do (we
-- now wait here, and new readers are refused until we hold it, leave, or our wait lapses).
local refused = take_writer(-2)
if refused then
  return refused
end
return 1
