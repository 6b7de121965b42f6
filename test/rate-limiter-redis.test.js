'use strict'
// sabsync/redis RateLimiter against a real redis-server: the table of checks
// every tier passes (test/fixtures/rate-limiter/checks.js) with three
// processes hammering one key (test/fixtures/rate-limiter/hammer.js), and
// what only Redis has: no key with a TTL, idle entries taken off by the
// writer's timer or, when it died, by later calls, parameters that disagree, replies that are checked, SIGKILL
// mid-consume (test/fixtures/rate-limiter/killed-redis.js). Eviction:
// test/rate-limiter-redis-evict.test.js.
const t = require('tap')
const path = require('path')
const { fork, spawnSync } = require('child_process')
const { redisSuite, until } = require('./fixtures/redis/suite')
const { RateLimiter } = require('../lib/redis')
const { checks, sleep } = require('./fixtures/rate-limiter/checks')

// The keys of a limiter made with `prefix` (lib/redis/rate-limiter.js).
const keysOf = prefix => ({ params: `{${prefix}}:rlp`, zset: `{${prefix}}:rlz` })

// Every key whose name contains `part`, with its PTTL.
async function ttls (admin, part) {
  const out = {}
  let cursor = '0'
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `*${part}*`, 'COUNT', 1000)
    for (const key of keys) out[key] = await admin.pttl(key)
    cursor = next
  } while (cursor !== '0')
  return out
}

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
    hammer: (limiter, opts, key, n = 3) => Array.from({ length: n }, () => {
      const p = child(t, 'hammer.js', [JSON.stringify({ tier: 'redis', url: s.url, prefix: made.get(limiter), opts, key })])
      const ready = new Promise(resolve => p.once('message', resolve))
      const done = new Promise((resolve, reject) => {
        p.on('message', m => {
          if (m.error) reject(new Error(m.error))
          else if (m.grants) resolve(m)
        })
      })
      return { ready, go: (until, from) => { p.send({ go: until, from }); return done } }
    }),
    async count (limiter) {
      const { params, zset } = keysOf(made.get(limiter))
      if (await s.admin.exists(params)) throw new Error('a parameters key was written')
      return s.admin.zcard(zset)
    }
  })

  s.test('redis: no key has a TTL; idle entries go by the writer\'s timer, or by later calls when it died', async (t, k) => {
    const l = new RateLimiter(s.client(), k.prefix, { limit: 2, window: 400 })
    const { params, zset } = keysOf(k.prefix)
    // `wrote`: before the last write is sent, so that the server's write
    // (and the 400 ms that count from it) is after it, whatever the
    // round trip.
    let wrote
    for (let i = 0; i < 20; i++) {
      wrote = performance.now()
      await l.consume('idle-' + i, 2)
    }
    const held = await ttls(s.admin, k.prefix)
    t.same(Object.keys(held), [zset], 'one key: the sorted set (the parameters are each client\'s)')
    t.same(Object.values(held), [-1], 'PTTL -1: no TTL')
    t.equal(await s.admin.zcard(zset), 20, 'one entry per client key')
    const score = Number(await s.admin.zscore(zset, 'idle-3'))
    const [sec, us] = await s.admin.time()
    const now = Number(sec) * 1e6 + Number(us)
    t.ok(score > now && score <= now + 400000, 'its score: the moment its bucket is full again (µs, the server\'s clock)')
    // What an older version kept beside it goes with it.
    await s.admin.set(params, '200000:400000')
    // No call from here on: the limiter's own timer sweeps once every
    // bucket is full again (400 ms after the last write).
    await until(async () => (await s.admin.exists(params, zset)) === 0, 'the idle sweep', 10000)
    const ms = performance.now() - wrote
    t.ok(ms >= 400, `with no call, every entry and the parameters went ${Math.round(ms)} ms after the last write`)
    for (let i = 0; i < 100; i++) await l.peek('busy')
    t.equal(await s.admin.exists(params, zset), 0, 'peek writes nothing')
    t.equal((await l.peek('idle-1')).remaining, 2, 'a key taken off is a full bucket')

    // Entries of a process that died (no timer left to sweep them) go by
    // later calls: one in 8 (by the server clock's µs) takes off up to 24
    // whose time has passed (200 calls with no sweep among them: (7/8)^200,
    // about 2.6e-12).
    const dead = spawnSync(process.execPath, ['-e', `
      const Redis = require('ioredis')
      const { RateLimiter } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'redis'))})
      const r = new Redis(${JSON.stringify(s.url)})
      const l = new RateLimiter(r, ${JSON.stringify(k.prefix)}, { limit: 2, window: 400 })
      ;(async () => { for (let i = 0; i < 20; i++) await l.consume('gone-' + i, 2); process.exit(0) })()`],
    { cwd: path.join(__dirname, '..'), encoding: 'utf8' })
    t.equal(dead.status, 0, dead.stderr)
    t.equal(await s.admin.zcard(zset), 20, 'a process wrote 20 entries and exited')
    await sleep(450) // every bucket is full again
    let calls = 0
    const other = new RateLimiter(s.client(), k.prefix, { limit: 2, window: 400 })
    while (calls < 200 && await s.admin.zcard(zset) > 1) { await other.consume('busy'); calls++ }
    t.equal(await s.admin.zcard(zset), 1, `the 20 idle entries taken off (in ${calls} calls), busy kept`)
    t.same(await s.admin.zrange(zset, 0, -1), ['busy'])
    t.same(Object.values(await ttls(s.admin, k.prefix)), [-1], 'still no TTL')
    await other.reset('busy')
    t.equal(await s.admin.exists(params, zset), 0, 'the last entry gone: the limiter keeps no key')
  })

  s.test('redis: other parameters on the same prefix share the buckets; foreign values are refused', async (t, k) => {
    const a = new RateLimiter(s.client(), k.prefix, { limit: 2, window: 1000 })
    const b = new RateLimiter(s.client(), k.prefix, { limit: 4, window: 1000 })
    const { zset } = keysOf(k.prefix)
    await a.consume('m', 2)
    const r = await b.consume('m')
    t.equal(r.allowed, false, 'what a took (its whole second), b sees: one bucket')
    t.ok(r.retryAfter > 0 && r.retryAfter <= 250, `retryAfter ${r.retryAfter} ms: one point at b's rate`)
    t.equal((await b.consume('other')).allowed, true, 'and b works on its own keys')
    // A deeper bucket's time (an old deploy's burst of an hour) is obeyed as
    // written, never lowered: refused, and retryAfter says when it comes
    // within this caller's bucket.
    const [sec, us] = await s.admin.time()
    const deep = Number(sec) * 1e6 + Number(us) + 3600e6
    await s.admin.zadd(zset, String(deep), 'deep')
    const d = await a.consume('deep')
    t.equal(d.allowed, false)
    t.ok(d.retryAfter > 3590e3 && d.retryAfter <= 3600e3, `refused until the hour has passed, less a's bucket (${d.retryAfter} ms)`)
    t.equal(d.remaining, 0)
    t.equal(Number(await s.admin.zscore(zset, 'deep')), deep, 'its time is as it was')
    await s.admin.zadd(zset, '+inf', 'junk')
    await t.rejects(a.consume('junk'), { code: 'ERR_SABSYNC_SHARED_MISMATCH', message: /not a RateLimiter time/ })
    await s.admin.zrem(zset, 'junk')
    await s.admin.zadd(zset, String(2 ** 52), 'far')
    await t.rejects(a.consume('far'), { code: 'ERR_SABSYNC_REDIS', message: /unexpected reply/ }, 'a tat beyond any bucket is not believed')
    const c = new RateLimiter(s.client(), k.prefix + 'x', { limit: 2, window: 1000 })
    await s.admin.set(keysOf(k.prefix + 'x').zset, 'a string')
    await t.rejects(c.consume('m'), { code: 'ERR_SABSYNC_REDIS', message: /WRONGTYPE/ }, 'a key of another type')
    t.equal(await s.admin.exists(keysOf(k.prefix + 'x').params), 0, 'and nothing was written')
    t.equal(await s.admin.zcard(zset), 4, 'the refused calls wrote nothing (m, other, deep and far)')
    t.throws(() => new RateLimiter({}, 'p', { limit: 1, window: 1 }), { name: 'TypeError', message: /"redis"/ })
    t.throws(() => new RateLimiter(s.client(), '', { limit: 1, window: 1 }), { name: 'RangeError', message: /"prefix"/ })
  })

  s.test('redis: an allowed consume answers in one integer, or a pair past 2^53; both read exactly', async (t, k) => {
    const { direct } = require('../lib/redis/scripts')
    const { zset } = keysOf(k.prefix)
    // The script itself (scripts.js, keyedRate), as the client sends it:
    // the operation (a consume of n points, no policy check), T and tau in
    // µs, the client key.
    const raw = (T, tau, n, key) => s.admin.evalsha(direct.sabsync10KeyedRate.sha, 1, zset, n === 1 ? 'c' : 'c' + n, T, tau, key)
    const small = new RateLimiter(s.client(), k.prefix, { limit: 10, window: 1000 }) // T 100,000 µs, burst 10
    const a = await small.consume('a', 3)
    t.same(a, { allowed: true, remaining: 7, retryAfter: 0, resetAfter: 300, limit: 10 }, 'a fresh key: 7 left, full again in 3 T')
    const one = await raw(100000, 1000000, 2, 'a2')
    t.equal(one, 200000 * 11 + 8, 'the script answered resetAfter µs × (burst + 1) + remaining')
    // A bucket of a billion points over ~24.8 days: T is 2,148 µs, and half
    // the bucket's reset in µs times (burst + 1) is past 2^53.
    const big = new RateLimiter(s.client(), k.prefix, { limit: 1e9, window: 0x7FFFFFFF })
    const b = await big.consume('b', 5e8)
    t.same(b, { allowed: true, remaining: 5e8, retryAfter: 0, resetAfter: 5e8 * 2148 / 1000, limit: 1e9 }, 'the pair, read as exactly')
    t.same(await raw(2148, 1e9 * 2148, 5e8, 'b2'), [5e8, 5e8 * 2148], 'which the script answered as {remaining, resetAfter µs}')
    const [sec, us] = await s.admin.time()
    const score = Number(await s.admin.zscore(zset, 'b'))
    const now = Number(sec) * 1e6 + Number(us)
    t.ok(score > now && score <= now + 5e8 * 2148, 'its time is now + resetAfter')
    const refused = await small.consume('a', 8)
    t.equal(refused.allowed, false, 'a refusal is a triple')
    t.equal(refused.remaining, 7)
    t.ok(refused.retryAfter > 0 && refused.retryAfter <= 100, `one point short: retryAfter ${refused.retryAfter} ms, within a T`)
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
    const l = new RateLimiter(s.client(), k.prefix, { limit: 1, window: 60000, exact: true })
    t.equal(l.mostIn(60000), 1, 'exact, 1 a minute: at most 1 in any minute')
    const store = l.store()
    t.throws(() => new RateLimiter(s.client(), k.prefix, { limit: 1, window: 60000 }).store().init({ limit: 1, windowMs: 60000 }),
      { name: 'RangeError', message: /at least 2/ }, 'the default bucket would make q=1;w=60 a lie')
    store.init({ limit: 1, windowMs: 60000 })
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
