'use strict'
// sabsync/redis RateLimiter against a real redis-server: the table of checks
// every tier passes (test/fixtures/rate-limiter/checks.js) with three
// processes hammering one key (test/fixtures/rate-limiter/hammer.js), and
// what only Redis has: keys that expire when full, parameters that
// disagree, replies that are checked, SIGKILL mid-consume
// (test/fixtures/rate-limiter/killed-redis.js).
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { redisSuite } = require('./fixtures/redis/suite')
const { RateLimiter } = require('../lib/redis')
const { checks, sleep } = require('./fixtures/rate-limiter/checks')

const fixtures = path.join(__dirname, 'fixtures', 'rate-limiter')

function child (t, file, args) {
  const p = fork(path.join(fixtures, file), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  t.teardown(() => p.kill('SIGKILL'))
  p.exited = new Promise(resolve => p.once('exit', (code, signal) => resolve({ code, signal })))
  return p
}

redisSuite(t, async s => {
  let k // the running test's prefix (s.test deletes its keys when it ends)
  const made = new Map() // limiter -> its prefix
  let n = 0
  const tap = { test: (name, fn) => s.test(name, (t, keys) => { k = keys; return fn(t) }) }

  checks(tap, {
    name: 'redis',
    table: false,
    make (opts) {
      const prefix = `${k.prefix}:lim${++n}`
      const l = new RateLimiter(s.client(), prefix, opts)
      made.set(l, prefix)
      return l
    },
    hammer: (limiter, opts, key) => [0, 1, 2].map(() => {
      const p = child(t, 'hammer.js', [JSON.stringify({ tier: 'redis', url: s.url, prefix: made.get(limiter), opts, key })])
      const ready = new Promise(resolve => p.once('message', resolve))
      const done = new Promise((resolve, reject) => {
        p.on('message', m => {
          if (m.error) reject(new Error(m.error))
          else if (m.grants) resolve(m)
        })
      })
      return { ready, go: until => { p.send({ go: until }); return done } }
    }),
    async count (limiter) {
      const [, keys] = await s.admin.scan('0', 'MATCH', made.get(limiter) + ':*', 'COUNT', 100000)
      return keys.length
    }
  })

  s.test('redis: a key expires when its bucket is full again, and not before', async (t, k) => {
    const l = new RateLimiter(s.client(), k.prefix, { limit: 2, window: 400 })
    const r = await l.consume('e')
    const ttl = await s.admin.pttl(`${k.prefix}:e`)
    t.ok(ttl > 0 && ttl >= r.resetAfter - 5 && ttl <= Math.ceil(r.resetAfter) + 1, `PTTL ${ttl} ms: the moment the bucket is full (${r.resetAfter} ms)`)
    await s.until(async () => (await s.admin.exists(`${k.prefix}:e`)) === 0, 'the key to expire', 5000)
    t.equal((await l.peek('e')).remaining, 2, 'gone: a full bucket')
  })

  s.test('redis: other parameters on the same keys, and foreign values, are refused', async (t, k) => {
    const a = new RateLimiter(s.client(), k.prefix, { limit: 2, window: 1000 })
    const b = new RateLimiter(s.client(), k.prefix, { limit: 3, window: 1000 })
    await a.consume('m')
    await t.rejects(b.consume('m'), { code: 'ERR_SABSYNC_SHARED_MISMATCH', message: /T:tau = 500000:1000000 µs, not 333334:1000002 µs/ })
    await s.admin.set(`${k.prefix}:junk`, 'hello')
    await t.rejects(a.consume('junk'), { code: 'ERR_SABSYNC_SHARED_MISMATCH', message: /not a RateLimiter key/ })
    await s.admin.set(`${k.prefix}:far`, `${2 ** 52}:500000:1000000`)
    await t.rejects(a.consume('far'), { code: 'ERR_SABSYNC_REDIS', message: /unexpected reply/ }, 'a tat beyond the bucket is not believed')
    t.throws(() => new RateLimiter({}, 'p', { limit: 1, window: 1 }), { name: 'TypeError', message: /"redis"/ })
    t.throws(() => new RateLimiter(s.client(), '', { limit: 1, window: 1 }), { name: 'RangeError', message: /"prefix"/ })
  })

  s.test('redis: SIGKILL of a process mid-consume loses at most that call', async (t, k) => {
    const opts = { limit: 1, window: 1_000_000, burst: 1_000_000 }
    const countKey = `${k.prefix}:count`
    const kills = 4
    for (let i = 0; i < kills; i++) {
      const p = child(t, 'killed-redis.js', [s.url, k.prefix, JSON.stringify(opts), countKey])
      await new Promise(resolve => p.once('message', resolve))
      await sleep(100 + Math.random() * 200)
      p.kill('SIGKILL')
      t.same(await p.exited, { code: null, signal: 'SIGKILL' })
    }
    const counted = Number(await s.admin.get(countKey))
    const used = opts.burst - (await new RateLimiter(s.client(), k.prefix, opts).peek('hot')).remaining
    t.ok(counted > 0, `the killed processes were granted ${counted} points`)
    t.ok(used >= counted && used <= counted + kills, `used ${used}, counted ${counted}, ${kills} kills`)
  })

  s.test('redis: the express-rate-limit store', async (t, k) => {
    const l = new RateLimiter(s.client(), k.prefix, { limit: 1, window: 60000 })
    const store = l.store()
    t.equal((await store.increment('ip')).totalHits, 1)
    const over = await store.increment('ip')
    t.equal(over.totalHits, 2, 'refused: more hits than the limit')
    await store.decrement('ip')
    t.equal((await store.get('ip')).totalHits, 0)
    await store.increment('ip')
    await store.resetKey('ip')
    t.equal((await store.get('ip')).totalHits, 0)
  })
})
