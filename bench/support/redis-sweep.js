'use strict'
// The server's time per batch of a RateLimit's idle tidy (lib/redis/
// scripts.js, rateTidy: the oldest grants counted and removed by rank),
// against the same batch read and removed by name (ZRANGEBYSCORE, then
// ZREM with every member, as the tidy did before): a log of 20,000 grants
// that no longer count, tidied until empty, INFO commandstats per batch.
//
//   SABSYNC_REDIS_URL=redis://... node bench/support/redis-sweep.js [rounds]
//
// Uses the keys {sabsync-sweep-bench}:*, and resets the server's command
// statistics (CONFIG RESETSTAT): run it against a server of its own.
const path = require('path')
const Redis = require('ioredis')
const { commands, BATCH } = require(path.join(__dirname, '..', '..', 'lib', 'redis', 'scripts'))

const byName = `
local R = KEYS[1]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local old = redis.call('ZRANGEBYSCORE', R, '-inf', string.format('%.0f', now - tonumber(ARGV[1])), 'LIMIT', 0, ${BATCH})
if #old > 0 then redis.call('ZREM', R, unpack(old)) end
if #old == ${BATCH} then return 0 end
return 1
`
const R = '{sabsync-sweep-bench}:log'
const RM = '{sabsync-sweep-bench}:m'
const GRANTS = 20000

async function main () {
  const url = process.env.SABSYNC_REDIS_URL
  if (!url) throw new Error('set SABSYNC_REDIS_URL to a Redis server of its own')
  const rounds = Number(process.argv[2]) || 3
  const c = new Redis(url)
  const shas = {
    'by rank (rateTidy)': await c.script('LOAD', commands.sabsync2RateTidy.lua),
    'by name (ZRANGEBYSCORE, ZREM)': await c.script('LOAD', byName)
  }
  const us = Object.fromEntries(Object.keys(shas).map(k => [k, []]))
  for (let r = 0; r < rounds; r++) {
    for (const [name, sha] of Object.entries(shas)) {
      await c.del(R, RM)
      const fill = c.pipeline()
      for (let i = 0; i < GRANTS; i += 1000) {
        const args = []
        for (let j = i; j < i + 1000; j++) args.push(1e15 + j, `grant:${j}`) // long past
        fill.zadd(R, ...args)
      }
      await fill.exec()
      await c.config('RESETSTAT')
      let batches = 0
      while (await c.evalsha(sha, 2, R, RM, 1000000) === 0) batches++
      const stats = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await c.info('commandstats'))
      if (await c.zcard(R) !== 0) throw new Error(`${name}: grants left after the tidy`)
      us[name].push(Number(stats[2]) / Number(stats[1]))
      if (batches !== GRANTS / BATCH) throw new Error(`${name}: ${batches} full batches, not ${GRANTS / BATCH}`)
    }
  }
  await c.del(R, RM)
  c.disconnect()
  for (const [name, xs] of Object.entries(us)) {
    console.log(`${name}: ${xs.map(x => x.toFixed(0)).join(', ')} µs a batch of ${BATCH} (server)`)
  }
}

main().catch(err => { console.error(err); process.exit(1) })
