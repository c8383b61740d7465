-- Lease up to n jobs. ARGV: now, n, lease_ms, token, owner.
-- Returns {expired_by_ttl, job1 HGETALL, job2 HGETALL, ...}.
local now, n, lease_ms, token, owner = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local meta = redis.call('HMGET', META, 'paused', 'conc', 'rate_max', 'rate_dur', 'tokens', 'rate_at',
  'gconc', 'grate', 'grate_dur')
if meta[1] == '1' then return {0} end
promote(now)
local conc, rate_max = tonumber(meta[2] or '0'), tonumber(meta[3] or '0')
if conc > 0 then n = math.min(n, conc - redis.call('ZCARD', ACTIVE)) end
local tokens
if rate_max > 0 then
  local dur = math.max(tonumber(meta[4] or '1000'), 1)
  if meta[5] then
    tokens = math.min(rate_max, tonumber(meta[5]) + math.max(now - tonumber(meta[6]), 0) * rate_max / dur)
  else
    tokens = rate_max
  end
  n = math.min(n, math.floor(tokens))
end
if n <= 0 then return {0} end

local gconc, grate = tonumber(meta[7] or '0'), tonumber(meta[8] or '0')
local gdur = math.max(tonumber(meta[9] or '1000'), 1)
local rot = redis.call('LRANGE', GROT, 0, -1)
local cursor = tonumber(redis.call('HGET', META, 'gcur') or '0')
local rot_changed = false
local blocked = {}

-- The head of the next eligible group in round-robin order: member, group, index.
local function next_group()
  local tried = 0
  while tried < #rot do
    local idx = (cursor + tried) % #rot
    local g = rot[idx + 1]
    local head = redis.call('ZRANGE', T .. ':g:' .. g, 0, 0)[1]
    if not head then
      table.remove(rot, idx + 1)
      redis.call('SREM', GSET, g)
      rot_changed = true
      if idx < cursor then cursor = cursor - 1 end
    else
      if not blocked[g] then
        if gconc > 0 and tonumber(redis.call('HGET', GACT, g) or '0') >= gconc then
          blocked[g] = true
        elseif grate > 0 then
          redis.call('ZREMRANGEBYSCORE', T .. ':gw:' .. g, '-inf', now - gdur)
          if redis.call('ZCARD', T .. ':gw:' .. g) >= grate then blocked[g] = true
          else return head, g, idx end
        else
          return head, g, idx
        end
      end
      tried = tried + 1
    end
  end
  return nil
end

local out, expired, taken = {0}, 0, 0
local until_ = now + lease_ms
while taken < n do
  local id, g
  if #rot > 0 then
    local gm, gname, gidx = next_group()
    local rhead = redis.call('ZRANGE', WAIT, 0, 0)[1]
    if gm and (not rhead or gm < rhead) then
      redis.call('ZREM', T .. ':g:' .. gname, gm)
      redis.call('HINCRBY', CNT, 'gready', -1)
      id, g = string.sub(gm, MW + 1), gname
      cursor = gidx + 1
    elseif rhead then
      redis.call('ZREM', WAIT, rhead)
      id = string.sub(rhead, MW + 1)
    end
  else
    local got = redis.call('ZPOPMIN', WAIT)
    if got[1] then id = string.sub(got[1], MW + 1) end
  end
  if not id then break end
  local k = JOB .. id
  local x = redis.call('HGET', k, 'x')
  if x and tonumber(x) <= now then
    -- past its ttl: never started; into the DLQ (sweep reports it)
    redis.call('HSET', k, 's', 'failed', 'fa', now, 'da', now, 'e', 'not started within its ttl',
      'rs', 'ttl_expired')
    redis.call('HDEL', k, 'm')
    redis.call('ZREM', TTL, id)
    redis.call('ZADD', DLQ, now, id)
    release_unique(redis.call('HGET', k, 'uk'), id)
    child_dead(id, 'not started within its ttl')  -- delivered by the next sweep
    expired = expired + 1
  else
    redis.call('HINCRBY', k, 'a', 1)
    redis.call('HSET', k, 's', 'active', 't', token, 'ow', owner, 'lu', until_, 'sa', now)
    redis.call('HDEL', k, 'm')
    redis.call('ZADD', ACTIVE, until_, id)
    if g then
      redis.call('HINCRBY', GACT, g, 1)
      if grate > 0 then
        -- the window outlives its group's idle spells, and expires unused (memory stays bounded)
        redis.call('ZADD', T .. ':gw:' .. g, now, token .. ':' .. id)
        redis.call('PEXPIRE', T .. ':gw:' .. g, gdur + 60000)
      end
    end
    out[#out + 1] = redis.call('HGETALL', k)
    taken = taken + 1
  end
end
if expired > 0 then redis.call('HINCRBY', CNT, 'ttlx', expired) end
if rot_changed then
  redis.call('DEL', GROT)
  for i = 1, #rot, 1000 do  -- in chunks: unpack() has a stack limit
    redis.call('RPUSH', GROT, unpack(rot, i, math.min(i + 999, #rot)))
  end
end
if #rot > 0 then redis.call('HSET', META, 'gcur', #rot > 0 and cursor % #rot or 0) end
if tokens then redis.call('HSET', META, 'tokens', tokens - taken, 'rate_at', now) end
out[1] = expired
return out
