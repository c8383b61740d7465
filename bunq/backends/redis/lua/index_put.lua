-- Record job id -> queue in one id-index shard (KEYS[1]). ARGV: queue, ids...
-- An id already mapped to another queue is left alone and returned: the caller
-- decides (a duplicate, an idempotent job id, or a stale entry).
local out = {}
for i = 2, #ARGV do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if cur and cur ~= ARGV[1] then
    out[#out + 1] = {ARGV[i], cur}
  elseif not cur then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
  end
end
return out
