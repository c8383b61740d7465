-- Per-job data: ARGV: id, what (progress|log), value. Returns 0 when the job is unknown.
local k = JOB .. ARGV[1]
if redis.call('EXISTS', k) == 0 then return 0 end
if ARGV[2] == 'progress' then
  redis.call('HSET', k, 'pg', ARGV[3])
else
  local lk = T .. ':l:' .. ARGV[1]
  redis.call('RPUSH', lk, ARGV[3])
  redis.call('LTRIM', lk, -1000, -1)
end
return 1
