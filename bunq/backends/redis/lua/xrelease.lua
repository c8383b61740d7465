-- A dependency in another queue completed: release it for a dependent of this queue.
-- ARGV: dependent id, dependency id, result, has_result (1|0), now[, policy, error].
-- Idempotent: the set xrel:<dependent> remembers every release, also one that arrives
-- before the dependent's admission (add.lua counts those).
-- With a policy (a flow child was dead-lettered: common.lua child_dead) the parent
-- applies it (bunq.jobrules.FlowFailure); returns 1 when it did.
local id, dep, now = ARGV[1], ARGV[2], tonumber(ARGV[5])
local k = JOB .. id
local s = redis.call('HGET', k, 's')
local policy = ARGV[6] or ''
if policy ~= '' then
  local xk = T .. ':xrel:' .. id
  if s ~= 'waiting-children' or redis.call('SADD', xk, dep) == 0 then return 0 end
  local opts = cmsgpack.unpack(redis.call('HGET', k, 'o'))
  if policy == 'ignore_dependency_on_failure' or policy == 'remove_dependency_on_failure' then
    if policy == 'remove_dependency_on_failure' then  -- no longer one of its dependencies
      local deps = {}
      for _, d in ipairs(opts['depends_on'] or {}) do
        if d ~= dep then deps[#deps + 1] = d end
      end
      opts['depends_on'] = deps
      redis.call('HSET', k, 'o', cmsgpack.pack(opts))
    end
    if redis.call('HINCRBY', k, 'pd', -1) <= 0 then
      redis.call('ZREM', WC, id)
      redis.call('HSET', k, 's', 'waiting', 'ra', now)
      wake(place(id, now, now))
    end
    return 1
  end
  for _, d in ipairs(opts['depends_on'] or {}) do  -- it waits for none of them any more
    redis.call('SREM', T .. ':dep:' .. d, id)
    redis.call('SADD', xk, d)
  end
  redis.call('ZREM', WC, id)
  if policy == 'continue_parent_on_failure' then
    redis.call('HSET', k, 's', 'waiting', 'ra', now, 'pd', 0)
    wake(place(id, now, now))
    return 1
  end
  local why = 'child ' .. ARGV[8] .. ':' .. dep .. ' failed: ' .. (ARGV[7] ~= '' and ARGV[7] or 'unknown error')
  redis.call('HSET', k, 's', 'failed', 'fa', now, 'da', now, 'pd', 0, 'e', why, 'rs', 'dependency_failed')
  redis.call('ZADD', DLQ, now, id)
  release_unique(redis.call('HGET', k, 'uk'), id)
  child_dead(id, why)  -- its own policy, up the tree (this queue's outbox)
  return 1
end
if ARGV[4] == '1' then
  redis.call('HSET', T .. ':res:' .. id, dep, ARGV[3])
  if not s then redis.call('PEXPIRE', T .. ':res:' .. id, 86400000) end
end
local xk = T .. ':xrel:' .. id
if redis.call('SADD', xk, dep) == 0 then return 0 end
if not s then
  redis.call('PEXPIRE', xk, 86400000)  -- not admitted (yet): forgotten in a day if never
  return 0
end
if s == 'waiting-children' and redis.call('HINCRBY', k, 'pd', -1) <= 0 then
  redis.call('ZREM', WC, id)
  redis.call('HSET', k, 's', 'waiting', 'ra', now)
  wake(place(id, now, now))
end
return 1
