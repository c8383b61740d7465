-- Housekeeping of one queue, each step a bounded batch: TTL expiry, expired unique
-- keys, DLQ auto-retry and bounds, retention of completed jobs.
-- ARGV: now, completed_max_age, completed_max_count.
-- Returns {ttl_expired, dlq_retried, dlq_dropped, removed ids, outbox length}.
local now, max_age, max_count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local removed = {}
local function drop(id)
  if forget(id) == 1 then removed[#removed + 1] = id end
end

local ttl_expired = tonumber(redis.call('HGET', CNT, 'ttlx') or '0')
if ttl_expired > 0 then redis.call('HSET', CNT, 'ttlx', 0) end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', TTL, '-inf', now, 'LIMIT', 0, 1000)) do
  redis.call('ZREM', TTL, id)
  local k = JOB .. id
  local f = redis.call('HMGET', k, 's', 'g', 'm', 'uk')
  if f[1] == 'waiting' then
    unplace(id, f[2], f[3])
    redis.call('HSET', k, 's', 'failed', 'fa', now, 'da', now, 'e', 'not started within its ttl',
      'rs', 'ttl_expired')
    redis.call('HDEL', k, 'm')
    redis.call('ZADD', DLQ, now, id)
    release_unique(f[4], id)
    child_dead(id, 'not started within its ttl')
    ttl_expired = ttl_expired + 1
  end
end

for _, uk in ipairs(redis.call('ZRANGEBYSCORE', UQX, '-inf', '(' .. now, 'LIMIT', 0, 1000)) do
  redis.call('ZREM', UQX, uk)
  redis.call('HDEL', UQ, 'k:' .. uk, 't:' .. uk)
end

local cfg = redis.call('HMGET', META, 'dlq_auto', 'dlq_interval', 'dlq_max_retries', 'dlq_max_age',
  'dlq_max_entries')
local retried, dropped, woken = 0, 0, 0
if cfg[1] == '1' then
  local before, max_retries = now - tonumber(cfg[2]), tonumber(cfg[3])
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', DLQ, '-inf', before, 'LIMIT', 0, 1000)) do
    local k = JOB .. id
    local f = redis.call('HMGET', k, 'dr', 'rs')
    if tonumber(f[1] or '0') < max_retries and f[2] ~= 'ttl_expired' then
      redis.call('ZREM', DLQ, id)
      redis.call('HSET', k, 's', 'waiting', 'ra', now, 'a', 0, 'st', 0)
      redis.call('HINCRBY', k, 'dr', 1)
      redis.call('HDEL', k, 'fa', 'da')
      woken = woken + place(id, now, now)
      retried = retried + 1
    end
  end
end
local dlq_age = cfg[4] or '604800000'
if dlq_age ~= 'none' then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', DLQ, '-inf', '(' .. (now - tonumber(dlq_age)), 'LIMIT', 0, 1000)) do
    drop(id)
    dropped = dropped + 1
  end
end
local over = redis.call('ZCARD', DLQ) - tonumber(cfg[5] or '10000')
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', DLQ, 0, math.min(over, 1000) - 1)) do
    drop(id)
    dropped = dropped + 1
  end
end

-- completed jobs the bounds drop stay counted ('retired': bunq serve's GetJobCounts adds
-- them, as bunqueue counts every completed job); a clean of completed jobs resets it
local retired = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', DONE, '-inf', '(' .. (now - max_age), 'LIMIT', 0, 1000)) do
  drop(id)
  retired = retired + 1
end
over = redis.call('ZCARD', DONE) - max_count
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', DONE, 0, math.min(over, 1000) - 1)) do
    drop(id)
    retired = retired + 1
  end
end
if retired > 0 then redis.call('HINCRBY', CNT, 'retired', retired) end
wake(woken)
return {ttl_expired, retried, dropped, removed, redis.call('LLEN', T .. ':outbox')}
