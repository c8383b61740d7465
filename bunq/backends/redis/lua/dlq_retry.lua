-- Move DLQ entries back to waiting with fresh attempts. ARGV: now, limit, [id].
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local ids = ARGV[3] and {ARGV[3]} or redis.call('ZRANGE', DLQ, 0, limit - 1)
local n, woken = 0, 0
for _, id in ipairs(ids) do
  local k = JOB .. id
  if redis.call('HGET', k, 's') == 'failed' then
    redis.call('ZREM', DLQ, id)
    redis.call('HSET', k, 's', 'waiting', 'ra', now, 'a', 0, 'st', 0)
    redis.call('HDEL', k, 'fa', 'da')
    woken = woken + place(id, now, now)
    n = n + 1
  end
end
wake(woken)
return n
