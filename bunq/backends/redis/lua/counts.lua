-- Counts per state from maintained counters (ZCARD, HGET) and one ZCOUNT split: O(log n).
-- ARGV: now. Returns {waiting, delayed, active, completed, failed, waiting-children, paused}.
local now = tonumber(ARGV[1])
local due = redis.call('ZCOUNT', DELAYED, '-inf', now)
local waiting = redis.call('ZCARD', WAIT) + tonumber(redis.call('HGET', CNT, 'gready') or '0') + due
return {waiting, redis.call('ZCARD', DELAYED) - due, redis.call('ZCARD', ACTIVE),
  redis.call('ZCARD', DONE), redis.call('ZCARD', DLQ), redis.call('ZCARD', WC),
  redis.call('HGET', META, 'paused') == '1' and 1 or 0}
