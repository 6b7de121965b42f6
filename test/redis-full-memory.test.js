'use strict'
// sabsync/redis on a server that is full (maxmemory reached, policy
// noeviction: Redis refuses any command that may grow memory, OOM, and a
// script is refused at its first such write unless it wrote already), and
// what an idle object leaves behind. docs/redis.md, "Full memory" and
// "Idle state", says what each call answers and what each idle object
// keeps; this file holds them to it. A server of this file's own (CONFIG
// SET maxmemory).
const t = require('tap')
const { redisSuite, until } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimit, RateLimiter } = require('../lib/redis')

const infoField = (info, name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)[1])

redisSuite(t, async s => {
  const { client, admin } = s

  // A full server: 2 MB of plain keys of the test's own, then maxmemory
  // 1 MB below what the server uses (so that memory freed by the calls
  // below cannot make room again).
  async function fill (t, prefix) {
    const value = 'x'.repeat(10000)
    const p = admin.pipeline()
    for (let i = 0; i < 200; i++) p.set(`${prefix}-fill-${i}`, value)
    await p.exec()
    const used = infoField(await admin.info('memory'), 'used_memory')
    await admin.config('SET', 'maxmemory', String(used - 1024 * 1024))
    await t.rejects(admin.set(`${prefix}-one-more`, 'x'), /OOM/, 'the server is full')
  }
  const unfill = () => admin.config('SET', 'maxmemory', '0')

  s.test('noeviction, full: grants are refused (OOM), releases and answers that write nothing get through', async (t, { prefix, opts }) => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction')
    const [a, b] = [client(), client()]
    const lease = 900
    const kept = new Mutex(a, 'kept', opts({ lease: 60000 }))
    const renewing = new Mutex(a, 'renewing', opts({ lease }))
    const queued = new Mutex(b, 'kept', opts({ heartbeat: 300 }))
    const pool = new Sema(a, 'pool', 2, opts({ lease: 60000 }))
    const limit = RateLimit(a, 'limit', 100, opts({ timeUnit: 60000 }))
    const limiter = new RateLimiter(a, prefix + ':rl', { limit: 1, window: 60000 })
    await kept.lockAsync()
    await renewing.lockAsync()
    const token = await pool.acquire()
    t.type(await limit(), 'number')
    t.equal((await limiter.consume('used')).allowed, true)
    const waiting = queued.lockAsync().catch(e => e)
    await until(async () => (await kept.nrWaiting()) === 1, 'a waiter to queue')
    const lost = new Promise(resolve => renewing.lost.addEventListener('abort', resolve))
    const t0 = performance.now()
    await fill(t, prefix)
    t.teardown(unfill)

    const oom = { code: 'ERR_SABSYNC_REDIS', message: /OOM/ }
    await t.rejects(new Mutex(b, 'free', opts()).tryLock(), oom, 'a free Mutex: take refused')
    await t.rejects(new Sema(b, 'free', 2, opts()).acquire(), oom, 'a free Sema: acquire refused')
    await t.rejects(pool.tryAcquire(), oom, 'a Sema with a token left: refused')
    t.equal(await new Mutex(b, 'kept', opts()).tryLock(), false, 'a try of a held lock answers false (it writes nothing)')
    await t.rejects(new Mutex(b, 'renewing', opts()).lockAsync({ timeout: 5000 }), oom, 'queueing is refused')
    await t.rejects(limit(), oom, 'RateLimit with room: refused')
    await t.rejects(limit.try(), oom, 'and its try()')
    await t.rejects(limiter.consume('new'), oom, 'RateLimiter: a consume that would grant is refused')
    const refused = await limiter.consume('used')
    t.equal(refused.allowed, false, 'one the limit refuses answers as always (it writes nothing)')
    t.equal((await limiter.peek('used')).remaining, 0, 'peek answers')

    const err = await waiting
    t.equal(err.code, 'ERR_SABSYNC_REDIS', 'a waiter fails once its heartbeats are refused for a heartbeat')
    t.match(err.message, /OOM/)
    await lost
    const ms = performance.now() - t0
    t.ok(ms >= lease / 3, `a holder whose renewals are refused loses its lease at its end (${Math.round(ms)} ms)`)
    t.match(renewing.lost.reason.message, /OOM/, 'lost says why')
    t.equal(await renewing.unlock(), false)

    t.equal(await kept.unlock(), true, 'a holder releases: true')
    await pool.release(token)
    t.equal(await admin.exists(`{${prefix}:sema:pool}:l`), 0, 'the Sema\'s release got through')
    await limiter.reset('used')
    t.equal((await limiter.peek('used')).remaining, 1, 'a RateLimiter reset gets through')

    await unfill()
    t.type(await new Mutex(b, 'free', opts()).tryLock(), 'number', 'room again: granted')
    t.type(await limit(), 'number')
  })

  s.test('idle state: what each idle object keeps, reclaimed without later calls', async (t, { prefix, opts }) => {
    const r = client()
    const count = async () => (await admin.keys(`*${prefix}*`)).length

    // A Mutex or Sema nobody ever waited for keeps nothing once free.
    for (let i = 0; i < 200; i++) {
      const m = new Mutex(r, 'm' + i, opts())
      await m.lockAsync()
      await m.unlock()
      const sema = new Sema(r, 's' + i, 3, opts())
      await sema.acquire()
      await sema.release()
    }
    t.equal(await count(), 0, '200 Mutexes and 200 Semas taken and given back: no key left')
    // One that had a waiter keeps its counters (its epoch tells a waiter
    // stalled past a grant what happened), with a TTL.
    const [a, b] = [new Mutex(r, 'waited', opts()), new Mutex(client(), 'waited', opts())]
    await a.lockAsync()
    const w = b.lockAsync()
    await until(async () => (await a.nrWaiting()) === 1, 'the waiter to queue')
    await a.unlock()
    await w
    await b.unlock()
    const m = `{${prefix}:mutex:waited}:m`
    const ttl = await admin.pttl(m)
    const bytes = await admin.memory('USAGE', m)
    t.ok(ttl > 0 && ttl <= 86400000, `a Mutex that had a waiter keeps one hash, expiring within a day (${bytes} bytes)`)
    t.ok(bytes < 400, 'of a few hundred bytes at most')
    await admin.del(m)

    // 1000 RateLimits, each called once: the log of each (its one key: the
    // parameters are each caller's) goes once the grant stops counting, by
    // the client's own timer, with no later call.
    const limits = []
    for (let i = 0; i < 1000; i++) limits.push(RateLimit(r, 'l' + i, 5, opts({ timeUnit: 3000 })))
    await Promise.all(limits.map(l => l()))
    const perLimit = await admin.memory('USAGE', `{${prefix}:rate:l0}:log`)
    t.equal(await count(), 1000, `1000 RateLimits called once: 1 key each (${perLimit} bytes for one limit)`)
    const t0 = performance.now()
    await until(async () => (await count()) === 0, 'the RateLimits\' keys to go', 20000)
    const ms = performance.now() - t0
    t.ok(ms < 3000 + 5000, `gone ${Math.round(ms)} ms later, with no call (the unit is 3000 ms)`)

    // 10,000 RateLimiter clients: one sorted set of an entry each (until
    // its bucket is full again: 3 s), which the limiter's timer sweeps
    // (SWEEP_IDLE a call) once their buckets are full again.
    const limiter = new RateLimiter(r, prefix + ':many', { limit: 1, window: 3000 })
    const p = []
    for (let i = 0; i < 10000; i++) p.push(limiter.consume('client-' + i))
    await Promise.all(p)
    const z = `{${prefix}:many}:rlz`
    // Entries may go already (the sweep) on a slow machine: the size per
    // entry is what is measured.
    const zbytes = await admin.memory('USAGE', z, 'SAMPLES', '0')
    const n = await admin.zcard(z)
    t.ok(n > 0, `10,000 idle clients: ${n} entries left, ${zbytes} bytes, ${Math.round(zbytes / n)} per client key`)
    await until(async () => (await count()) === 0, 'the RateLimiter\'s entries to go', 20000)
    t.pass('all swept, and the parameters deleted, with no call')
  })
}, { own: true })
