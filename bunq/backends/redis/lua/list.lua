-- One page of jobs in a state, each {HGETALL}. ARGV: now, state, offset, limit.
local now, state, offset, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local ids = {}
if state == 'waiting' or state == 'paused' then
  if (state == 'paused') ~= (redis.call('HGET', META, 'paused') == '1') then return {} end
  promote(now)
  local upto = offset + limit
  local ms = redis.call('ZRANGE', WAIT, 0, upto - 1)
  for _, g in ipairs(redis.call('LRANGE', GROT, 0, -1)) do
    for _, m in ipairs(redis.call('ZRANGE', T .. ':g:' .. g, 0, upto - 1)) do ms[#ms + 1] = m end
  end
  table.sort(ms)
  for i = offset + 1, math.min(upto, #ms) do ids[#ids + 1] = string.sub(ms[i], MW + 1) end
elseif state == 'delayed' then
  ids = redis.call('ZRANGEBYSCORE', DELAYED, '(' .. now, '+inf', 'LIMIT', offset, limit)
elseif state == 'completed' then
  ids = redis.call('ZREVRANGE', DONE, offset, offset + limit - 1)
elseif state == 'failed' then
  ids = redis.call('ZREVRANGE', DLQ, offset, offset + limit - 1)
elseif state == 'active' then
  ids = redis.call('ZRANGE', ACTIVE, offset, offset + limit - 1)
elseif state == 'waiting-children' then
  ids = redis.call('ZRANGE', WC, offset, offset + limit - 1)
end
local out = {}
for _, id in ipairs(ids) do out[#out + 1] = redis.call('HGETALL', JOB .. id) end
return out
