-- Shared by the compare-and-act scripts (release, extend, the fenced commit, a permit's extend),
-- which are sent with this text in front of them.

-- Whether `key` holds `token`: nil when it does (the caller acts, then returns 1); otherwise the
-- caller's reply, 0 when the key is absent (expired, or released already) and -1 when another
-- token holds it. A key of another type raises WRONGTYPE from GET, which the client reports for
-- this master.
local function not_ours(key, token)
  local current = redis.call('GET', key)
  if current == token then
    return nil
  end
  if current == false then
    return 0
  end
  return -1
end
