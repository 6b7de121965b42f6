'use strict'
// The least script a bucket per client key, kept on the server's clock
// without a TTL (sabsync's rules: lib/redis/scripts.js, keyedRate), needs:
// TIME, ZSCORE and ZADD, and one integer back. KEYS: the sorted set; ARGV
// as sabsync's keyed call sends them (the operation, T µs, tau µs, the
// client key). No decision, no sweep, no validation: what the server and
// ioredis take before any of them (bench/support/limiter.js,
// redis-turns.js).
module.exports = `
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local tat = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[4])) or 0
if tat < now then tat = now end
redis.call('ZADD', KEYS[1], tat + tonumber(ARGV[2]), ARGV[4])
return 1
`
