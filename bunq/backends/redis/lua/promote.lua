-- Move delayed jobs that are due into their lanes (bounded); part of lease and listings.
local function promote(now)
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, 1000)
  for _, id in ipairs(due) do
    redis.call('ZREM', DELAYED, id)
    place(id, tonumber(redis.call('HGET', JOB .. id, 'ra')), now)
  end
  return #due
end
