'use strict'
// One of the processes of bench/redis.js's contended case: takes a lock
// `n` times through its own Redis connection with the subject's library,
// holding it for one turn of the event loop and staying away 2 ms after
// each release, and reports [asked, entered,
// left] (monotonic ns, comparable across processes on one machine) for
// each time. argv: JSON { subject, url, key, n, lease }. Messages in:
// 'warm' (3 times, unrecorded; answers 'warm'), then 'go'.
const Redis = require('ioredis')
const { sent } = require('./redis-count')

const { subject, url, key, n, lease } = JSON.parse(process.argv[2])
const redis = new Redis(url)
const now = () => Number(process.hrtime.bigint())

function lockOf () {
  if (subject === 'sabsync') {
    const { Mutex } = require('../../lib/redis')
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
  throw new Error('unknown subject ' + subject)
}

const lock = lockOf()
process.on('message', async msg => {
  if (msg === 'warm') {
    for (let i = 0; i < 3; i++) {
      await lock.acquire()
      await lock.release()
    }
    return process.send('warm')
  }
  const records = []
  const sentBefore = sent()
  for (let i = 0; i < n; i++) {
    const asked = now()
    await lock.acquire()
    const entered = now()
    await new Promise(resolve => setImmediate(resolve))
    const left = now()
    await lock.release()
    records.push([asked, entered, left])
    // Away for 2 ms: the next holder is one that waited, not this process
    // taking the lock straight back (which a polling lock lets it do).
    await new Promise(resolve => setTimeout(resolve, 2))
  }
  process.send({ records, sent: sent() - sentBefore }, () => {
    redis.disconnect()
    process.disconnect()
  })
})
redis.ping().then(() => process.send('ready'))
