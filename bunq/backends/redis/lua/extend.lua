-- Push a lease's expiry under its fence. ARGV: id, token, attempt, until.
local k = JOB .. ARGV[1]
local f = redis.call('HMGET', k, 's', 't', 'a')
if not (f[1] == 'active' and f[2] == ARGV[2] and f[3] == ARGV[3]) then return 0 end
redis.call('HSET', k, 'lu', ARGV[4])
redis.call('ZADD', ACTIVE, ARGV[4], ARGV[1])
return 1
