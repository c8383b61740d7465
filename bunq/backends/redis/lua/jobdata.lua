-- Per-job data: ARGV: id, what (progress|log), value. Returns 0 when the job is unknown.
-- A log line keeps the newest min(1000, the job's keep_logs option) lines.
local k = JOB .. ARGV[1]
if redis.call('EXISTS', k) == 0 then return 0 end
if ARGV[2] == 'progress' then
  redis.call('HSET', k, 'pg', ARGV[3])
else
  local lk = T .. ':l:' .. ARGV[1]
  local keep = 1000
  local o = redis.call('HGET', k, 'o')
  if o then
    local opts = cmsgpack.unpack(o)
    if type(opts) == 'table' and opts['keep_logs'] then keep = math.min(keep, opts['keep_logs']) end
  end
  if keep <= 0 then
    redis.call('DEL', lk)
    return 1
  end
  redis.call('RPUSH', lk, ARGV[3])
  redis.call('LTRIM', lk, -keep, -1)
end
return 1
