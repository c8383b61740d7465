-- Remove jobs in bounded batches. ARGV: now, what, limit, grace (clean).
-- what: drain (waiting, delayed, waiting-children) | completed | failed | waiting |
-- delayed (clean, finished or created before now - grace) | dlq_one (ARGV[5] = id) |
-- all (obliterate). Returns the removed ids.
local now, what, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local before = now - tonumber(ARGV[4] or '0')
local ids = {}
local function take(list)
  for _, id in ipairs(list) do
    if #ids >= limit then return end
    ids[#ids + 1] = id
  end
end
local function lanes(dst, cap)
  for _, m in ipairs(redis.call('ZRANGE', WAIT, 0, cap - 1)) do dst[#dst + 1] = string.sub(m, MW + 1) end
  for _, g in ipairs(redis.call('LRANGE', GROT, 0, -1)) do
    if #dst >= cap then return end
    for _, m in ipairs(redis.call('ZRANGE', T .. ':g:' .. g, 0, cap - #dst - 1)) do
      dst[#dst + 1] = string.sub(m, MW + 1)
    end
  end
end
if what == 'drain' then
  lanes(ids, limit)
  take(redis.call('ZRANGE', DELAYED, 0, limit - 1))
  take(redis.call('ZRANGE', WC, 0, limit - 1))
elseif what == 'completed' then
  ids = redis.call('ZRANGEBYSCORE', DONE, '-inf', before, 'LIMIT', 0, limit)
elseif what == 'failed' then
  ids = redis.call('ZRANGEBYSCORE', DLQ, '-inf', before, 'LIMIT', 0, limit)
elseif what == 'waiting' or what == 'delayed' then
  local cand = {}
  if what == 'waiting' then
    promote(now)
    lanes(cand, 10 * limit)  -- lanes order by priority: look past the newest a while
  else
    cand = redis.call('ZRANGEBYSCORE', DELAYED, '(' .. now, '+inf', 'LIMIT', 0, 10 * limit)
  end
  for _, id in ipairs(cand) do
    if #ids >= limit then break end
    if tonumber(redis.call('HGET', JOB .. id, 'ca')) <= before then ids[#ids + 1] = id end
  end
elseif what == 'dlq_all' then
  ids = redis.call('ZRANGE', DLQ, 0, limit - 1)
elseif what == 'ids' then
  for i = 5, #ARGV do ids[#ids + 1] = ARGV[i] end
elseif what == 'dlq_one' then
  if redis.call('HGET', JOB .. ARGV[5], 's') == 'failed' then ids = {ARGV[5]} end
elseif what == 'all' then
  for _, z in ipairs({ACTIVE, DONE, DLQ, WC, DELAYED}) do take(redis.call('ZRANGE', z, 0, limit - 1)) end
  if #ids < limit then lanes(ids, limit) end
  if #ids == 0 then
    local gs = redis.call('LRANGE', GROT, 0, -1)
    for _, g in ipairs(gs) do redis.call('DEL', T .. ':g:' .. g, T .. ':gw:' .. g) end
    redis.call('DEL', WAIT, DELAYED, ACTIVE, DONE, DLQ, WC, TTL, META, CNT, SEQ, GROT, GSET, GACT, UQ,
      UQX, WAKE)
  end
end
local out = {}
for _, id in ipairs(ids) do
  if forget(id) == 1 then out[#out + 1] = id end
end
return out
