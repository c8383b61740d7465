-- Expired leases (at most 1000): {id, attempts, max_attempts, stalls, token}...
local now = tonumber(ARGV[1])
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', ACTIVE, '-inf', '(' .. now, 'LIMIT', 0, 1000)) do
  local f = redis.call('HMGET', JOB .. id, 'a', 'ma', 'st', 't')
  if f[4] then
    out[#out + 1] = {id, f[1], f[2], f[3] or '0', f[4]}
  else
    redis.call('ZREM', ACTIVE, id)  -- a dangling entry: its job is gone
  end
end
return out
