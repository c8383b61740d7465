-- Compare-and-set on one field of KEYS[1] (a namespace hash in the global tag).
-- ARGV: key, value, mode (create|set|cas), expected.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[3] == 'create' and cur then return 0 end
if ARGV[3] == 'cas' and cur ~= ARGV[4] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
