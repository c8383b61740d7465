-- A dependency in another queue completed: release it for a dependent of this queue.
-- ARGV: dependent id, dependency id, result, has_result (1|0), now. Idempotent: the
-- set xrel:<dependent> remembers every release, also one that arrives before the
-- dependent's admission (add.lua counts those).
local id, dep, now = ARGV[1], ARGV[2], tonumber(ARGV[5])
local k = JOB .. id
local s = redis.call('HGET', k, 's')
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
