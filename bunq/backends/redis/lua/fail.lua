-- Record a failed attempt under the fence and apply the policy's decision.
-- ARGV: now, id, token, attempt, kind (retry|delay|dlq), run_at, reason, error, duration.
-- Returns {ok, removed ids}.
local now, id, token, attempt = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local kind, run_at, reason, err, dur = ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9]
local k = JOB .. id
local f = redis.call('HMGET', k, 's', 't', 'a', 'g', 'uk', 'rmf')
if not (f[1] == 'active' and f[2] == token and f[3] == attempt) then return {0, {}} end
redis.call('ZREM', ACTIVE, id)
gact_dec(f[4])
redis.call('HDEL', k, 't', 'lu')
if kind ~= 'delay' then hist(id, attempt, err, dur, now, reason) end
if kind == 'dlq' then
  release_unique(f[5], id)
  child_dead(id, err)
  if f[6] then
    forget(id)
    return {1, {id}}
  end
  redis.call('HSET', k, 's', 'failed', 'fa', now, 'da', now, 'e', err, 'rs', reason)
  redis.call('ZADD', DLQ, now, id)
  return {1, {}}
end
if kind == 'delay' then redis.call('HINCRBY', k, 'a', -1) end
redis.call('HSET', k, 's', 'waiting', 'ra', run_at, 'e', err, 'rs', reason)
wake(place(id, run_at, now))
return {1, {}}
