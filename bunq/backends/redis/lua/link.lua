-- Dependencies across queues, on the queue of the dependencies (KEYS[1]).
-- ARGV: the dependent's queue, then pairs (dependent id, dependency id). Per pair:
-- {'unknown'} | {'done', result or false} | {'pending'}: a pending dependency remembers
-- its dependent; completing it posts a release to this queue's outbox (complete.lua).
local out = {}
for i = 2, #ARGV, 2 do
  local dependent, dep = ARGV[i], ARGV[i + 1]
  local f = redis.call('HMGET', JOB .. dep, 's', 'pid', 'r')
  if not f[1] then
    out[#out + 1] = {'unknown'}
  elseif f[1] == 'completed' then
    out[#out + 1] = {'done', f[2] == dependent and f[3] or false}
  else
    redis.call('SADD', T .. ':xdep:' .. dep, cmsgpack.pack({ARGV[1], dependent}))
    out[#out + 1] = {'pending'}
  end
end
return out
