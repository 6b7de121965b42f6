'use strict'
// sabsync/redis: a Mutex, a Sema and a RateLimit that hold across every
// process and machine using the same Redis server.
//
//   REDIS_URL=redis://127.0.0.1:6379 node examples/redis-quickstart.js
const Redis = require('ioredis')
const { Mutex, Sema, RateLimit } = require('sabsync/redis')

const redis = new Redis(process.env.REDIS_URL)

async function main () {
  // A lock with a lease, renewed while this process lives.
  const lock = new Mutex(redis, 'orders:42', { lease: 10_000 })
  const fence = await lock.lockAsync({ timeout: 5000 }) // false on timeout
  try {
    console.log(`holding orders:42 with fence ${fence}`)
    // ... update the order, passing `fence` along (see redis-fencing.js)
  } finally {
    console.log(`unlocked: ${await lock.unlock()}`)
  }

  // At most 2 transcodes at once, across every machine.
  const pool = new Sema(redis, 'transcode', 2)
  const tokens = await Promise.all([pool.acquire(), pool.acquire()])
  const third = pool.acquire({ timeout: 100 }) // waits for a token...
  console.log(`tokens ${tokens.join(', ')} out; the third caller gets ${await third}`) // ...and times out
  for (const t of tokens) await pool.release(t)

  // At most 5 calls in any second, on the server's clock.
  const limit = RateLimit(redis, 'github', 5, { timeUnit: 1000 })
  const times = []
  for (let i = 0; i < 7; i++) times.push(await limit())
  console.log(`7 calls at +${times.map(t => Math.round(t - times[0])).join(', +')} ms`)
}

main().finally(() => redis.quit())
