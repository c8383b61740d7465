-- Complete leases under their fences. ARGV: now, then per item: id, token, attempt, result.
-- Dependents in other queues get a release in this queue's outbox (the caller, or
-- the next sweep, delivers it). Returns {ok flags..., removed ids, outbox length}.
local now = tonumber(ARGV[1])
local out, removed, woken = {}, {}, 0
local OUTBOX = T .. ':outbox'
for i = 2, #ARGV, 4 do
  local id, token, attempt = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local k = JOB .. id
  local f = redis.call('HMGET', k, 's', 't', 'a', 'g', 'uk', 'pid', 'rmc')
  if f[1] == 'active' and f[2] == token and f[3] == attempt then
    redis.call('ZREM', ACTIVE, id)
    gact_dec(f[4])
    woken = woken + release_dependents(id, now)
    local xk = T .. ':xdep:' .. id
    for _, e in ipairs(redis.call('SMEMBERS', xk)) do
      local q, dependent = unpack(cmsgpack.unpack(e))
      redis.call('RPUSH', OUTBOX, cmsgpack.pack({q, dependent, id, f[6] == dependent and ARGV[i + 3] or false}))
    end
    redis.call('DEL', xk)
    if f[6] and redis.call('EXISTS', JOB .. f[6]) == 1 then redis.call('HSET', T .. ':res:' .. f[6], id, ARGV[i + 3]) end
    if f[7] then
      forget(id)
      removed[#removed + 1] = id
    else
      release_unique(f[5], id)
      redis.call('HSET', k, 's', 'completed', 'fa', now, 'r', ARGV[i + 3])
      redis.call('HDEL', k, 't', 'lu', 'e')
      redis.call('ZADD', DONE, now, id)
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
wake(woken)
out[#out + 1] = removed
out[#out + 1] = redis.call('LLEN', OUTBOX)
return out
