-- Jobs by id with their attempt history: per id {HGETALL, history}. ARGV: ids.
local out = {}
for i = 1, #ARGV do
  out[i] = {redis.call('HGETALL', JOB .. ARGV[i]), redis.call('LRANGE', T .. ':h:' .. ARGV[i], 0, -1)}
end
return out
