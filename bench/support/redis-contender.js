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
const { lockOf } = require('./redis-lock')

const { subject, url, key, n, lease } = JSON.parse(process.argv[2])
const redis = new Redis(url)
const now = () => Number(process.hrtime.bigint())

const lock = lockOf(subject, redis, key, lease)
if (lock === null) throw new Error('unknown subject ' + subject)
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
