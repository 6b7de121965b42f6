'use strict'
// A `cluster` HTTP server whose worker processes share, through one sabsync
// space: a RateLimit toward a slow upstream (at most 10 calls per 500 ms,
// all workers together) and a Mutex around a cache rebuild. The primary
// sends requests, and kills the worker that is rebuilding the cache with
// SIGKILL while it holds the lock: another worker takes the lock over, sees
// `ownerDied`, and rebuilds.
//
//   npm run demo:processes      (node examples/cluster-shared.js)
const cluster = require('cluster')
const http = require('http')
const { openShared } = require('sabsync')

const WORKERS = 3
const REQUESTS = 40
const RPS = 10
const WINDOW = 500 // ms
const name = process.env.SABSYNC_DEMO_SPACE || `demo-processes-${process.pid}`

// The shared objects, by key: every process that opens the space gets the same.
function objects () {
  const space = openShared(name)
  return {
    space,
    limit: space.rateLimit('upstream', RPS, { timeUnit: WINDOW }),
    lock: space.mutex('cache-rebuild'),
    // [cache version, stale (1) or fresh (0), upstream calls so far]
    cache: space.int32Array('cache', 4),
    // When each upstream call was granted (µs on the monotonic clock).
    calls: space.bigInt64Array('upstream-calls', 1024)
  }
}

if (cluster.isPrimary) {
  openShared.unlink(name) // a leftover of an earlier run that crashed
  const { space, cache, calls } = objects()
  const t0 = Number(process.hrtime.bigint()) / 1e6
  const at = () => `[${((Number(process.hrtime.bigint()) / 1e6 - t0) / 1000).toFixed(2)}s]`
  console.log(`${WORKERS} cluster workers share the space "${name}": a RateLimit of ${RPS} upstream calls per ${WINDOW} ms and a Mutex "cache-rebuild"`)
  cache[1] = 1 // the cache starts stale: the first request rebuilds it
  let killed = false
  let port
  for (let i = 0; i < WORKERS; i++) {
    cluster.fork({ SABSYNC_DEMO_SPACE: name }).on('message', function (m) {
      if (m.event === 'rebuilding' && !killed) {
        // The first rebuild waits for a word from here that never comes:
        // it is killed while it holds the lock, however slow the machine.
        killed = true
        console.log(`${at()} worker ${m.pid} holds "cache-rebuild" and is rebuilding the cache`)
        setTimeout(() => {
          console.log(`${at()} the primary kills worker ${m.pid} with SIGKILL, in the middle of the rebuild`)
          this.process.kill('SIGKILL')
        }, 30)
      } else if (m.event === 'rebuilding') {
        this.send('carry on')
      } else if (m.event === 'rebuilt') {
        console.log(`${at()} worker ${m.pid} rebuilt the cache (version ${m.version})${m.ownerDied ? ': it took the lock over from the killed worker, ownerDied = true' : ''}`)
      }
    })
  }
  cluster.on('listening', (worker, address) => { port = address.port })

  // A request, or null if its connection died with a killed worker (or was
  // handed to it as it died, and never answered): the caller retries.
  let retried = 0
  const get = () => new Promise(resolve => {
    const req = http.get({ port, path: '/data', agent: false }, res => {
      let body = ''
      res.on('data', d => { body += d })
      res.on('end', () => resolve(JSON.parse(body)))
    })
    req.on('error', () => { retried++; resolve(null) })
    req.setTimeout(2000, () => req.destroy())
  })

  const started = setInterval(async () => {
    if (port === undefined || Object.keys(cluster.workers).length < WORKERS) return
    clearInterval(started)
    let served = 0
    const by = new Map()
    const queue = Array.from({ length: REQUESTS }, (_, i) => i)
    await Promise.all(Array.from({ length: 6 }, async () => {
      while (queue.length > 0) {
        queue.pop()
        let r
        while ((r = await get()) === null); // retried: its worker was killed
        served++
        by.set(r.pid, (by.get(r.pid) || 0) + 1)
      }
    }))
    // The upstream calls' times, from every worker: the most in any window.
    const n = Math.min(Atomics.load(cache, 2), calls.length)
    const times = Array.from(calls.subarray(0, n), us => Number(us) / 1000).sort((a, b) => a - b)
    let most = 0
    for (let i = 0; i < times.length; i++) {
      let j = i
      while (j < times.length && times[j] - times[i] < WINDOW) j++
      most = Math.max(most, j - i)
    }
    console.log(`${at()} ${served} requests served by workers ${[...by].map(([pid, k]) => `${pid} (${k})`).join(', ')}` +
      (retried > 0 ? `; ${retried} sent again after the killed worker dropped them` : ''))
    console.log(`${n} upstream calls in all; the most in any ${WINDOW} ms window: ${most} (the limit: ${RPS})`)
    for (const w of Object.values(cluster.workers)) w.kill()
    space.unlink()
    space.close()
  }, 20)
} else {
  const { limit, lock, cache, calls } = objects()

  async function upstream () {
    const granted = await limit() // ms, the same clock in every process
    calls[Atomics.add(cache, 2, 1) % calls.length] = BigInt(Math.round(granted * 1000))
    await new Promise(resolve => setTimeout(resolve, 20)) // a slow service
  }

  async function rebuild () {
    await lock.runExclusive(async () => {
      if (Atomics.load(cache, 1) === 0) return // another worker rebuilt it meanwhile
      const ownerDied = lock.ownerDied
      const told = new Promise(resolve => process.once('message', resolve))
      process.send({ event: 'rebuilding', pid: process.pid })
      await told // the primary's go-ahead (the first rebuild never gets one)
      for (let i = 0; i < 3; i++) await upstream()
      const version = Atomics.add(cache, 0, 1) + 1
      Atomics.store(cache, 1, 0)
      process.send({ event: 'rebuilt', pid: process.pid, version, ownerDied })
    })
  }

  http.createServer(async (req, res) => {
    if (Atomics.load(cache, 1) === 1) await rebuild()
    await upstream()
    res.end(JSON.stringify({ pid: process.pid, version: Atomics.load(cache, 0) }))
  }).listen(0)
}
