-- Admit a batch atomically. ARGV: now, count, then per job 19 fields and its deps:
-- id name data opts priority delay lifo ttl group parent rmc rmf idem ukey ustrategy uttl
-- max_attempts xpending ndeps dep...  (xpending: dependencies in other queues still
-- pending, linked by link.lua; deps: those in this queue)  Pass 1 checks everything (no writes), pass 2 writes, so a
-- refused batch changes nothing. Returns {'ok', per job {kind, payload}..., removed ids}
-- or {'err', code, detail...}.
local now, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local jobs, i = {}, 3
for j = 1, n do
  local J = {id = ARGV[i], name = ARGV[i + 1], data = ARGV[i + 2], opts = ARGV[i + 3],
    p = ARGV[i + 4], delay = tonumber(ARGV[i + 5]), lifo = ARGV[i + 6], ttl = ARGV[i + 7],
    g = ARGV[i + 8], pid = ARGV[i + 9], rmc = ARGV[i + 10], rmf = ARGV[i + 11],
    idem = ARGV[i + 12], uk = ARGV[i + 13], us = ARGV[i + 14], uttl = ARGV[i + 15],
    ma = ARGV[i + 16], xp = tonumber(ARGV[i + 17]), deps = {}}
  local nd = tonumber(ARGV[i + 18])
  for d = 1, nd do J.deps[d] = ARGV[i + 18 + d] end
  i = i + 19 + nd
  jobs[j] = J
end

-- pass 1: decide, write nothing
local seen, useen = {}, {}
for j = 1, n do
  local J = jobs[j]
  if J.idem == '1' and seen[J.id] then
    J.batch = seen[J.id]
  else
    local s = redis.call('HGET', JOB .. J.id, 's')
    if s and J.idem == '1' then
      if LIVE[s] then J.old = J.id else J.forget_first = true end
    elseif s or seen[J.id] then
      return {'err', 'duplicate_id', J.id}
    end
  end
  if not J.batch and not J.old and J.uk ~= '' then
    if useen[J.uk] then
      if J.us == 'extend' then J.batch = useen[J.uk] else return {'err', 'duplicate_key', J.uk, jobs[useen[J.uk]].id} end
    else
      local hid = redis.call('HGET', UQ, 'k:' .. J.uk)
      if hid then
        local until_ = redis.call('HGET', UQ, 't:' .. J.uk)
        local hs = redis.call('HGET', JOB .. hid, 's')
        local held
        if until_ then held = tonumber(until_) > now else held = hs ~= false and LIVE[hs] == true end
        if held then
          if J.us == 'extend' then
            if not hs then return {'err', 'duplicate_key', J.uk, hid} end
            J.old, J.extend = hid, true
          elseif J.us == 'replace' and hs ~= 'active' then
            J.replace = hid
          else
            return {'err', 'duplicate_key', J.uk, hid}
          end
        end
      end
    end
  end
  if not J.batch and not J.old then
    J.pending = J.xp
    if J.xp > 0 and not J.forget_first then  -- releases that arrived before this admission
      J.pending = J.pending - redis.call('SCARD', T .. ':xrel:' .. J.id)
    end
    for _, dep in ipairs(J.deps) do
      if dep == J.id then return {'err', 'dep_self', dep} end
      if seen[dep] then
        J.pending = J.pending + 1
      else
        local ds = redis.call('HGET', JOB .. dep, 's')
        if not ds then return {'err', 'dep_unknown', dep, J.id} end
        if ds ~= 'completed' then J.pending = J.pending + 1 end
      end
    end
    seen[J.id] = j
    if J.uk ~= '' then useen[J.uk] = j end
  end
end

-- pass 2: write
local out, removed, ready = {'ok'}, {}, 0
local seq = redis.call('INCRBY', SEQ, n) - n
for j = 1, n do
  local J = jobs[j]
  if J.batch then
    out[#out + 1] = 'batch'
    out[#out + 1] = J.batch
  elseif J.old then
    if J.extend and J.uttl ~= '' then
      local until_ = now + tonumber(J.uttl)
      redis.call('HSET', UQ, 't:' .. J.uk, until_)
      redis.call('ZADD', UQX, until_, J.uk)
    end
    out[#out + 1] = 'old'
    out[#out + 1] = redis.call('HGETALL', JOB .. J.old)
  else
    if J.forget_first then forget(J.id) end
    if J.replace then
      forget(J.replace)
      removed[#removed + 1] = J.replace
    end
    seq = seq + 1
    local ra = now + J.delay
    local k = JOB .. J.id
    local state = J.pending > 0 and 'waiting-children' or 'waiting'
    local h = {'id', J.id, 'n', J.name, 'd', J.data, 's', state, 'p', J.p, 'seq', seq, 'ra', ra,
      'ca', now, 'a', 0, 'ma', J.ma, 'o', J.opts}
    local function put(f, v) h[#h + 1] = f; h[#h + 1] = v end
    if J.pending > 0 then put('pd', J.pending) end
    if J.lifo == '1' then put('lifo', '1') end
    if J.g ~= '' then put('g', J.g) end
    if J.pid ~= '' then put('pid', J.pid) end
    if J.rmc == '1' then put('rmc', 1) end
    if J.rmf == '1' then put('rmf', 1) end
    if J.uk ~= '' then put('uk', J.uk) end
    local x
    if J.ttl ~= '' then
      x = now + tonumber(J.ttl)
      put('x', x)
    end
    local m
    if state == 'waiting' and ra <= now then
      m = member(J.p, J.lifo, ra, seq, J.id)
      put('m', m)
    end
    redis.call('HSET', k, unpack(h))
    if J.xp > 0 then redis.call('PERSIST', T .. ':xrel:' .. J.id) end
    for _, dep in ipairs(J.deps) do
      local ds = redis.call('HGET', JOB .. dep, 's')
      if ds ~= 'completed' then redis.call('SADD', T .. ':dep:' .. dep, J.id) end
    end
    if x then redis.call('ZADD', TTL, x, J.id) end
    if J.uk ~= '' then
      redis.call('HSET', UQ, 'k:' .. J.uk, J.id)
      if J.uttl ~= '' then
        redis.call('HSET', UQ, 't:' .. J.uk, now + tonumber(J.uttl))
        redis.call('ZADD', UQX, now + tonumber(J.uttl), J.uk)
      else
        redis.call('HDEL', UQ, 't:' .. J.uk)
        redis.call('ZREM', UQX, J.uk)
      end
    end
    if m then
      lane_add(J.g, m)
      ready = ready + 1
      out[#out + 1] = 'waiting'
    elseif state == 'waiting' then
      redis.call('ZADD', DELAYED, ra, J.id)
      out[#out + 1] = 'delayed'
    else
      redis.call('ZADD', WC, seq, J.id)
      out[#out + 1] = state
    end
    out[#out + 1] = now
  end
end
wake(ready)
out[#out + 1] = removed
return out
