-- Apply the stall policy to expired leases, under their fences.
-- ARGV: now, then per lease: id, token, dead (1|0). Returns {requeued, dead}.
local now = tonumber(ARGV[1])
local requeued, dead, woken = 0, 0, 0
for i = 2, #ARGV, 3 do
  local id, token = ARGV[i], ARGV[i + 1]
  local k = JOB .. id
  local f = redis.call('HMGET', k, 's', 't', 'lu', 'a', 'sa', 'g', 'uk')
  if f[1] == 'active' and f[2] == token and tonumber(f[3]) < now then
    redis.call('ZREM', ACTIVE, id)
    gact_dec(f[6])
    redis.call('HINCRBY', k, 'st', 1)
    redis.call('HDEL', k, 't', 'lu')
    hist(id, f[4], 'lease expired', math.max(now - tonumber(f[5] or now), 0), now, 'stalled')
    if ARGV[i + 2] == '1' then
      redis.call('HSET', k, 's', 'failed', 'fa', now, 'da', now, 'e', 'lease expired', 'rs', 'stalled')
      redis.call('ZADD', DLQ, now, id)
      release_unique(f[7], id)
      child_dead(id, 'lease expired')
      dead = dead + 1
    else
      redis.call('HSET', k, 's', 'waiting', 'ra', now, 'e', 'lease expired', 'rs', 'stalled')
      woken = woken + place(id, now, now)
      requeued = requeued + 1
    end
  end
end
wake(woken)
return {requeued, dead}
