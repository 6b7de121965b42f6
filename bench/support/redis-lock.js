'use strict'
// The lock each Redis bench subject offers, as { acquire, release }, on one
// ioredis connection: shared by the contended case's processes
// (redis-contender.js) and the one-waiter hand-off's (redis-pair.js).
// Returns null for a subject that is not a lock library.
function lockOf (subject, redis, key, lease) {
  if (subject === 'sabsync' || subject === 'sabsync-before') {
    // sabsync-before: another checkout's lib/redis (SABSYNC_BENCH_BEFORE), for a before/after run.
    const { Mutex } = require(subject === 'sabsync' ? '../../lib/redis' : process.env.SABSYNC_BENCH_BEFORE)
    const m = new Mutex(redis, key, { lease })
    return { acquire: () => m.lockAsync(), release: () => m.unlock() }
  }
  if (subject === 'redlock') {
    const Redlock = require('redlock')
    // Its defaults (retry every 200 ± 100 ms), retrying without a limit.
    const redlock = new Redlock([redis], { retryCount: -1 })
    let lock
    return { acquire: async () => { lock = await redlock.lock(key, lease) }, release: () => lock.unlock() }
  }
  if (subject === 'redis-semaphore') {
    const { Mutex } = require('redis-semaphore')
    // Its defaults (retry every 10 ms), without giving up.
    const m = new Mutex(redis, key, { lockTimeout: lease, acquireTimeout: 600000 })
    return { acquire: () => m.acquire(), release: () => m.release() }
  }
  return null
}

module.exports = { lockOf }
