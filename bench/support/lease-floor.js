'use strict'
// The least script work a lease kept on the server's clock, without a TTL
// while held (sabsync's rules: lib/redis/scripts.js), needs, in its most
// compact state, one string "<holder> <expiry ms> <fence>": TIME and
// SET NX to take, GET, TIME and DEL to give back. KEYS: the string; ARGV:
// the holder's id and the lease in ms to take, the id to give back. Take
// answers as sabsync's general take grants ({1, slot, fence, lease, top})
// or {0}; give back 1 when the lease held, else 0. No queue, no
// validation of what others wrote (bench/redis.js, redis-lock-turns.js).
const clock = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
`
const take = clock + `local f = string.format('%.0f', nowUs)
if redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. (now + tonumber(ARGV[2])) .. ' ' .. f, 'NX') then return { 1, 0, nowUs, tonumber(ARGV[2]), 1 } end
return { 0 }`
const leave = `local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local h, hx, hf = string.match(v, '^(%S+) (%d+) (%d+)$')
if h ~= ARGV[1] then return 0 end
` + clock + `redis.call('DEL', KEYS[1])
if tonumber(hx) > now and tonumber(hf) < nowUs then return 1 end
return 0`

module.exports = { take, leave }
