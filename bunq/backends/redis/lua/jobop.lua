-- Per-job operations (bunq.backends.jobops). ARGV: now, op, id, arg, arg2.
-- Returns {1, state} done | {0} no such job | {-1, state} the job's state refuses op.
-- op: remove | retry | promote | priority (arg p, arg2 options) | delay (arg ms) |
-- data (arg blob) | discard | clear_logs (arg keep). promote_many (arg count) returns
-- {n}; uq_get / uq_del (arg key) return {job id or false} / {0 or 1}; by_priority returns
-- {p1, n1, p2, n2, ...} over waiting and delayed jobs.
local now, op, id, arg = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local k = JOB .. id

local function requeue(ra, f)
  unplace(id, f[2], f[4])
  redis.call('HSET', k, 'ra', ra)
  wake(place(id, ra, now))
end

if op == 'promote_many' then
  local n = 0
  for _, jid in ipairs(redis.call('ZRANGEBYSCORE', DELAYED, '(' .. now, '+inf', 'LIMIT', 0, tonumber(arg))) do
    redis.call('ZREM', DELAYED, jid)
    redis.call('HSET', JOB .. jid, 'ra', now)
    n = n + place(jid, now, now)
  end
  wake(n)
  return {n}
elseif op == 'by_priority' then
  local counts = {}
  -- Ready lanes order by a 10-digit priority head: one range count per distinct priority.
  local function lane(z)
    local m = redis.call('ZRANGEBYLEX', z, '-', '+', 'LIMIT', 0, 1)[1]
    while m do
      local head = tonumber(string.sub(m, 1, 10))
      local nxt = string.format('%010d', head + 1)
      local p = 2147483648 - head
      counts[p] = (counts[p] or 0) + redis.call('ZLEXCOUNT', z, '[' .. string.sub(m, 1, 10), '(' .. nxt)
      m = redis.call('ZRANGEBYLEX', z, '[' .. nxt, '+', 'LIMIT', 0, 1)[1]
    end
  end
  lane(WAIT)
  for _, g in ipairs(redis.call('LRANGE', GROT, 0, -1)) do lane(T .. ':g:' .. g) end
  for _, jid in ipairs(redis.call('ZRANGE', DELAYED, 0, -1)) do
    local p = tonumber(redis.call('HGET', JOB .. jid, 'p'))
    counts[p] = (counts[p] or 0) + 1
  end
  local flat = {}
  for p, n in pairs(counts) do flat[#flat + 1] = p; flat[#flat + 1] = n end
  return flat
elseif op == 'uq_get' then
  local holder = redis.call('HGET', UQ, 'k:' .. arg)
  local until_ = tonumber(redis.call('HGET', UQ, 't:' .. arg) or '')
  if holder and until_ and until_ <= now then holder = false end
  return {holder or false}
elseif op == 'uq_del' then
  local held = redis.call('HDEL', UQ, 'k:' .. arg)
  redis.call('HDEL', UQ, 't:' .. arg)
  redis.call('ZREM', UQX, arg)
  return {held}
end

local f = redis.call('HMGET', k, 's', 'g', 'ra', 'm', 'uk', 'a')
local s = f[1]
if not s then return {0} end
local state = s
if s == 'waiting' and tonumber(f[3]) > now then state = 'delayed' end
local function allowed(...)
  for _, st in ipairs({...}) do if st == state then return true end end
  return false
end

if op == 'unlink_parent' then  -- remove_child_dependency: {1, state, 1 if the parent waited}
  return {1, state, child_dead(id, '', 'remove_dependency_on_failure')}
elseif op == 'remove' then
  if state == 'active' then return {-1, state} end
  forget(id)
elseif op == 'retry' then
  if not allowed('failed', 'completed') then return {-1, state} end
  redis.call('ZREM', s == 'failed' and DLQ or DONE, id)
  redis.call('HSET', k, 's', 'waiting', 'ra', now, 'a', 0, 'st', 0)
  redis.call('HDEL', k, 'fa', 'da', 'sa', 'r')
  wake(place(id, now, now))
elseif op == 'promote' then
  if state ~= 'delayed' then return {-1, state} end
  requeue(now, f)
elseif op == 'priority' then
  if not allowed('waiting', 'delayed', 'waiting-children') then return {-1, state} end
  redis.call('HSET', k, 'p', arg, 'o', ARGV[5])
  if s == 'waiting' then requeue(tonumber(f[3]), f) end
elseif op == 'delay' then
  if not allowed('waiting', 'delayed') then return {-1, state} end
  requeue(now + tonumber(arg), f)
elseif op == 'data' then
  if not allowed('waiting', 'delayed', 'active', 'waiting-children') then return {-1, state} end
  redis.call('HSET', k, 'd', arg)
elseif op == 'discard' then
  if not allowed('waiting', 'delayed', 'active') then return {-1, state} end
  if s == 'active' then
    redis.call('ZREM', ACTIVE, id)
    gact_dec(f[2])
    redis.call('HDEL', k, 't', 'lu')
    hist(id, f[6], 'discarded', 0, now, 'explicit_fail')
    wake(1)
  else
    unplace(id, f[2], f[4])
  end
  redis.call('ZREM', TTL, id)
  release_unique(f[5], id)
  redis.call('HSET', k, 's', 'failed', 'fa', now, 'da', now, 'e', 'discarded', 'rs', 'explicit_fail')
  redis.call('ZADD', DLQ, now, id)
  child_dead(id, 'discarded')
elseif op == 'clear_logs' then
  local keep = tonumber(arg)
  if keep > 0 then redis.call('LTRIM', T .. ':l:' .. id, -keep, -1)
  else redis.call('DEL', T .. ':l:' .. id) end
end
return {1, state}
