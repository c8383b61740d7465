-- One cursor page of jobs in a state (bunq.pages): up to n {key, HGETALL} after the cursor.
-- ARGV: now, state, n, then the cursor's key: for waiting/paused the lane member of the
-- last job; else its score and id (a zset's ties are ordered by member).
local now, state, n = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local ca, cb = ARGV[4], ARGV[5]

-- Up to n {id, score} of zset z after (score ca, member cb), ascending or (rev) descending:
-- by rank when the cursor's member is still there at its score (O(log N + n)), else the
-- rest of the cursor's score (its ties), then the scores beyond it.
local function after(z, rev)
  local out = {}
  local sc = redis.call('ZSCORE', z, cb)
  local ms
  if sc and tonumber(sc) == tonumber(ca) then
    local r = rev and redis.call('ZREVRANK', z, cb) or redis.call('ZRANK', z, cb)
    if rev then ms = redis.call('ZREVRANGE', z, r + 1, r + n, 'WITHSCORES')
    else ms = redis.call('ZRANGE', z, r + 1, r + n, 'WITHSCORES') end
    for i = 1, #ms, 2 do out[#out + 1] = {ms[i], ms[i + 1]} end
    return out
  end
  local ties = redis.call('ZRANGEBYSCORE', z, ca, ca, 'WITHSCORES')
  local lo, hi, step = 1, #ties - 1, 2
  if rev then lo, hi, step = #ties - 1, 1, -2 end
  for i = lo, hi, step do
    local m = ties[i]
    if #out < n and ((rev and m < cb) or (not rev and m > cb)) then out[#out + 1] = {m, ties[i + 1]} end
  end
  if #out < n then
    if rev then ms = redis.call('ZREVRANGEBYSCORE', z, '(' .. ca, '-inf', 'WITHSCORES', 'LIMIT', 0, n - #out)
    else ms = redis.call('ZRANGEBYSCORE', z, '(' .. ca, '+inf', 'WITHSCORES', 'LIMIT', 0, n - #out) end
    for i = 1, #ms, 2 do out[#out + 1] = {ms[i], ms[i + 1]} end
  end
  return out
end

local function pairs_of(ms)
  local out = {}
  for i = 1, #ms, 2 do out[#out + 1] = {ms[i], ms[i + 1]} end
  return out
end

local got = {}  -- {id, key}
if state == 'waiting' or state == 'paused' then
  if (state == 'paused') ~= (redis.call('HGET', META, 'paused') == '1') then return {} end
  promote(now)
  local from = ca and ('(' .. ca) or '-'
  local ms = redis.call('ZRANGEBYLEX', WAIT, from, '+', 'LIMIT', 0, n)
  for _, g in ipairs(redis.call('LRANGE', GROT, 0, -1)) do
    for _, m in ipairs(redis.call('ZRANGEBYLEX', T .. ':g:' .. g, from, '+', 'LIMIT', 0, n)) do
      ms[#ms + 1] = m
    end
  end
  table.sort(ms)
  for i = 1, math.min(n, #ms) do got[i] = {string.sub(ms[i], MW + 1), ms[i]} end
else
  local z, rev = ({delayed = DELAYED, completed = DONE, failed = DLQ, active = ACTIVE,
                   ['waiting-children'] = WC})[state], state == 'completed' or state == 'failed'
  if not z then return {} end
  local found
  if state == 'delayed' and (not ca or tonumber(ca) <= now) then
    found = pairs_of(redis.call('ZRANGEBYSCORE', z, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, n))
  elseif not ca then
    if rev then found = pairs_of(redis.call('ZREVRANGE', z, 0, n - 1, 'WITHSCORES'))
    else found = pairs_of(redis.call('ZRANGE', z, 0, n - 1, 'WITHSCORES')) end
  else
    found = after(z, rev)
  end
  for i, e in ipairs(found) do got[i] = {e[1], e[2]} end
end
local out = {}
for _, e in ipairs(got) do out[#out + 1] = {e[2], redis.call('HGETALL', JOB .. e[1])} end
return out
