-- Shared by every per-queue function. bind(tag) names the keys of one queue from its
-- tag "{prefix:queue}" (KEYS[1]); every key a function touches is built from it, so a call
-- stays in one slot. Calls run one at a time, so the names are the library's own
-- variables, set at the start of each call.
local T, JOB, WAIT, DELAYED, ACTIVE, DONE, DLQ, WC, TTL, META, CNT
local SEQ, GROT, GSET, GACT, UQ, UQX, WAKE
local function bind(tag)
  T = tag
  JOB = T .. ':j:'
  WAIT, DELAYED, ACTIVE, DONE = T .. ':wait', T .. ':delayed', T .. ':active', T .. ':done'
  DLQ, WC, TTL, META, CNT = T .. ':dlq', T .. ':wc', T .. ':ttl', T .. ':meta', T .. ':cnt'
  SEQ, GROT, GSET, GACT = T .. ':seq', T .. ':grot', T .. ':gset', T .. ':gact'
  UQ, UQX, WAKE = T .. ':uq', T .. ':uqx', T .. ':wake'
end
local LIVE = {waiting = true, active = true, ['waiting-children'] = true}

-- Ready jobs sit in zsets with score 0 ordered by member: a fixed-width sort key
-- (priority high first; LIFO newest first; then run time, then admission), then the id.
local MW = 41
local function member(p, lifo, ra, seq, id)
  local head = string.format('%010d', 2147483648 - tonumber(p))
  ra, seq = tonumber(ra), tonumber(seq)
  if lifo == '1' then
    return head .. '0' .. string.format('%015d%015d', 999999999999999 - ra, 999999999999999 - seq) .. id
  end
  return head .. '1' .. string.format('%015d%015d', ra, seq) .. id
end

local function lane_add(g, m)
  if g and g ~= '' then
    redis.call('ZADD', T .. ':g:' .. g, 0, m)
    if redis.call('SADD', GSET, g) == 1 then redis.call('RPUSH', GROT, g) end
    redis.call('HINCRBY', CNT, 'gready', 1)
  else
    redis.call('ZADD', WAIT, 0, m)
  end
end

local function lane_rem(g, m)
  if not m then return 0 end
  if g and g ~= '' then
    local r = redis.call('ZREM', T .. ':g:' .. g, m)
    if r == 1 then redis.call('HINCRBY', CNT, 'gready', -1) end
    return r
  end
  return redis.call('ZREM', WAIT, m)
end

-- Make a waiting job ready (in its lane) or delayed, by its run time.
local function place(id, ra, now)
  local k = JOB .. id
  if ra > now then
    redis.call('ZADD', DELAYED, ra, id)
    return 0
  end
  local f = redis.call('HMGET', k, 'p', 'lifo', 'seq', 'g')
  local m = member(f[1], f[2], ra, f[3], id)
  redis.call('HSET', k, 'm', m)
  lane_add(f[4], m)
  return 1
end

local function unplace(id, g, m)
  lane_rem(g, m)
  redis.call('ZREM', DELAYED, id)
end

local function wake(n)
  if n <= 0 then return end
  local k = math.min(n, 8 - redis.call('LLEN', WAKE))
  for _ = 1, k do redis.call('RPUSH', WAKE, '1') end
end

local function gact_dec(g)
  if g and g ~= '' and redis.call('HINCRBY', GACT, g, -1) <= 0 then redis.call('HDEL', GACT, g) end
end

local function release_unique(uk, id)
  if uk and uk ~= '' and redis.call('HGET', UQ, 'k:' .. uk) == id
      and redis.call('HEXISTS', UQ, 't:' .. uk) == 0 then
    redis.call('HDEL', UQ, 'k:' .. uk)
  end
end

local function hist(id, attempt, err, dur, now, reason)
  local hk = T .. ':h:' .. id
  redis.call('RPUSH', hk, cmsgpack.pack({tonumber(attempt), err, tonumber(dur), tonumber(now), reason}))
  if redis.call('LLEN', hk) > 1000 then redis.call('LPOP', hk) end
end

-- Remove a job and everything it owns from the queue; return 1 if it existed.
local function forget(id)
  local k = JOB .. id
  local f = redis.call('HMGET', k, 's', 'g', 'm', 'uk')
  local s = f[1]
  if not s then return 0 end
  if s == 'waiting' then unplace(id, f[2], f[3])
  elseif s == 'active' then redis.call('ZREM', ACTIVE, id); gact_dec(f[2])
  elseif s == 'completed' then redis.call('ZREM', DONE, id)
  elseif s == 'failed' then redis.call('ZREM', DLQ, id)
  elseif s == 'waiting-children' then redis.call('ZREM', WC, id) end
  redis.call('ZREM', TTL, id)
  release_unique(f[4], id)
  redis.call('DEL', k, T .. ':h:' .. id, T .. ':l:' .. id, T .. ':dep:' .. id, T .. ':res:' .. id,
    T .. ':xdep:' .. id, T .. ':xrel:' .. id)
  return 1
end

-- A flow child went to the DLQ: if it names a policy for its parent
-- (bunq.jobrules.FlowFailure) and the parent still waits for it, stop the parent waiting
-- on it here and queue {queue or false (this one), parent, child, false, policy, error}
-- in this queue's outbox; the caller (or the next sweep) delivers it (xrelease.lua).
local FLOW_POLICIES = {'fail_parent_on_failure', 'ignore_dependency_on_failure',
  'remove_dependency_on_failure', 'continue_parent_on_failure'}
local function child_dead(id, err, force)
  local f = redis.call('HMGET', JOB .. id, 'pid', 'o')
  local pid = f[1]
  if not pid then return 0 end
  local policy = force
  if not policy then
    local ok, opts = pcall(cmsgpack.unpack, f[2] or '')
    if not ok or type(opts) ~= 'table' then return 0 end
    for _, p in ipairs(FLOW_POLICIES) do
      if opts[p] == true then policy = p end
    end
    if not policy then return 0 end
  end
  local q = false
  if redis.call('SREM', T .. ':dep:' .. id, pid) == 0 then
    q = nil
    local xk = T .. ':xdep:' .. id
    for _, e in ipairs(redis.call('SMEMBERS', xk)) do
      local eq, dependent = unpack(cmsgpack.unpack(e))
      if dependent == pid then
        q = eq
        redis.call('SREM', xk, e)
      end
    end
    if q == nil then return 0 end  -- the parent no longer waits for this child
  end
  redis.call('RPUSH', T .. ':outbox', cmsgpack.pack({q, pid, id, false, policy, err or ''}))
  return 1
end

-- A finished dependency releases its dependents; those with none left become ready.
local function release_dependents(id, now)
  local dk = T .. ':dep:' .. id
  local woken = 0
  for _, dep in ipairs(redis.call('SMEMBERS', dk)) do
    local k = JOB .. dep
    if redis.call('HGET', k, 's') == 'waiting-children' then
      if redis.call('HINCRBY', k, 'pd', -1) <= 0 then
        redis.call('ZREM', WC, dep)
        redis.call('HSET', k, 's', 'waiting', 'ra', now)
        woken = woken + place(dep, now, now)
      end
    end
  end
  redis.call('DEL', dk)
  return woken
end
