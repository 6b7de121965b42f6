'use strict'
// sabsync/redis when an operator changes maxmemory-policy at run time: the
// policy is read again before a grant on an object whose last reading is a
// renewal period old (lease/3; RateLimit and RateLimiter: a second), so a
// switch to allkeys-* makes holders' `lost` fire within a renewal and every
// call refuse, naming the policy, also on a client that had checked it
// before. A server of this file's own (CONFIG SET).
const t = require('tap')
const { redisSuite, until } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimit, RateLimiter, LockManager } = require('../lib/redis')

redisSuite(t, async s => {
  const { client, admin } = s
  const setPolicy = p => admin.config('SET', 'maxmemory-policy', p)

  s.test('allkeys-lru set while a lock is held: lost fires within a renewal, new and old objects refuse', async (t, { opts }) => {
    // Three seconds: the renewal a period (1 s) after the grant reads the
    // policy and loses the lease; the lease's end is two seconds later, so
    // a loss at a renewal is told from one at the deadline (below) even on
    // a loaded machine.
    const lease = 3000
    const r = client()
    const holder = new Mutex(r, 'switch', opts({ lease }))
    const pool = new Sema(r, 'switch', 2, opts({ lease }))
    await holder.lockAsync()
    const token = await pool.acquire()
    t.equal(holder.isHeld, true)
    const mutexLost = new Promise(resolve => holder.lost.addEventListener('abort', resolve))
    const semaLost = new Promise(resolve => pool.lost(token).addEventListener('abort', resolve))
    const t0 = performance.now()
    await setPolicy('allkeys-lru')
    t.teardown(() => setPolicy('noeviction'))
    await mutexLost
    const ms = performance.now() - t0
    // A renewal period (lease/3) and a round trip, with a period of slack
    // for a loaded machine: before the lease's end, so lost at a renewal
    // that met the refusal, not at the deadline.
    t.ok(ms < lease, `the holder's lost fired ${Math.round(ms)} ms after the switch, before the lease's end`)
    t.notMatch(holder.lost.reason.message, /ran out/, 'lost to the refusal, not the deadline')
    t.equal(holder.lost.reason.code, 'ERR_SABSYNC_LEASE_LOST')
    t.match(holder.lost.reason.message, /allkeys-lru/, 'naming the policy')
    t.equal(holder.lost.reason.cause.code, 'ERR_SABSYNC_REDIS')
    t.equal(holder.isHeld, false, 'isHeld follows')
    await semaLost
    t.match(pool.lost(token).reason.message, /allkeys-lru/, 'a Sema holder too')
    t.equal(await holder.unlock(), false, 'unlock of the lost lease answers false')
    await pool.release(token)

    // The two holders: a new object on a client that had checked
    // the policy (the hub's reading is a client's, not an object's).
    const fresh = new Mutex(r, 'switch', opts({ lease }))
    const err = await fresh.lockAsync().catch(e => e)
    t.equal(err.code, 'ERR_SABSYNC_REDIS', 'a new Mutex on a client that checked before refuses')
    t.match(err.message, /allkeys-lru/)
    t.match(err.message, /noeviction|volatile/, 'and says what to do')
    t.equal(fresh.isHeld, false)
    const again = await holder.tryLock().catch(e => e)
    t.equal(again.code, 'ERR_SABSYNC_REDIS', 'the old object refuses too')
    t.match(again.message, /allkeys-lru/)
    await t.rejects(pool.tryAcquire(), { code: 'ERR_SABSYNC_REDIS', message: /allkeys-lru/ }, 'and the Sema')

    await setPolicy('volatile-lru')
    t.type(await fresh.lockAsync(), 'number', 'a safe policy again: granted')
    t.equal(await fresh.unlock(), true)
  })

  s.test('a waiter fails when the policy turns unsafe; unsafeAllowEviction objects go on', async (t, { opts }) => {
    const lease = 600
    const [a, b] = [client(), client()]
    const holder = new Mutex(a, 'waiter', opts({ lease, unsafeAllowEviction: true }))
    const waiter = new Mutex(b, 'waiter', opts({ lease, heartbeat: 300 }))
    await holder.lockAsync()
    const waiting = waiter.lockAsync().catch(e => e)
    await until(async () => (await holder.nrWaiting()) === 1, 'the waiter to queue')
    await setPolicy('allkeys-lfu')
    t.teardown(() => setPolicy('noeviction'))
    const err = await waiting
    t.equal(err.code, 'ERR_SABSYNC_REDIS', 'the waiter rejects at a heartbeat')
    t.match(err.message, /allkeys-lfu/)
    await s.tick(lease)
    t.equal(holder.isHeld, true, 'a holder that accepted the risk keeps its lease')
    t.equal(await holder.unlock(), true)
  })

  s.test('LockManager: allkeys-lru set while a lock is held: the holder loses it within a renewal, requests refuse', async (t, { prefix, opts }) => {
    const lease = 3000 // as above: a loss at a renewal is told from one at the lease's end
    const r = client()
    const locks = new LockManager(r, prefix + 'locks', opts({ lease }))
    t.teardown(() => locks.close())
    let holding
    const held = new Promise(resolve => { holding = resolve })
    const request = locks.request('switch', () => { holding(); return new Promise(() => {}) })
    await held
    const t0 = performance.now()
    await setPolicy('allkeys-lru')
    t.teardown(() => setPolicy('noeviction'))
    const err = await request.catch(e => e)
    const ms = performance.now() - t0
    t.equal(err.name, 'AbortError', 'the holder\'s request rejects with an AbortError')
    t.match(err.message, /allkeys-lru/, 'naming the policy')
    // At the renewal a period after the grant: its policy reading refuses.
    // (It once did not count as a refusal: the renewal went again until
    // the lease ran out, 2 s after the switch with a 2 s lease.)
    t.ok(ms < lease, `${Math.round(ms)} ms after the switch: a renewal period and a round trip, before the lease's end`)
    t.notMatch(err.message, /confirmed in time/, 'lost to the refusal, not the deadline')
    const refused = await locks.request('other', () => 'granted?').catch(e => e)
    t.equal(refused.code, 'ERR_SABSYNC_REDIS', 'a new request on the same client refuses')
    t.match(refused.message, /allkeys-lru/)
    await setPolicy('volatile-lru')
    await s.tick(lease / 3 + 50)
    t.equal(await locks.request('other', () => 'granted'), 'granted', 'a safe policy again: granted')
  })

  s.test('RateLimit and RateLimiter read the policy again at most a second later', async (t, { prefix, opts }) => {
    const r = client()
    const limit = RateLimit(r, 'rl', 1000, opts())
    const limiter = new RateLimiter(r, prefix + ':rl', { limit: 1000, window: 1000 })
    t.type(await limit(), 'number')
    t.equal((await limiter.consume('k')).allowed, true)
    await setPolicy('allkeys-random')
    t.teardown(() => setPolicy('noeviction'))
    const t0 = performance.now()
    let limitErr = null
    let limiterErr = null
    await until(async () => {
      if (limitErr === null) await limit().catch(e => { limitErr = e })
      if (limiterErr === null) await limiter.consume('k').catch(e => { limiterErr = e })
      return limitErr !== null && limiterErr !== null
    }, 'both to refuse', 10000)
    const ms = performance.now() - t0
    t.ok(ms < 1000 + 2000, `both refused ${Math.round(ms)} ms after the switch`)
    t.equal(limitErr.code, 'ERR_SABSYNC_REDIS')
    t.match(limitErr.message, /allkeys-random/)
    t.equal(limiterErr.code, 'ERR_SABSYNC_REDIS')
    t.match(limiterErr.message, /allkeys-random/)
    await setPolicy('noeviction')
    t.type(await limit(), 'number', 'a safe policy again: granted')
    t.equal((await limiter.consume('k')).allowed, true)
  })

  s.test('INFO taken away from a client mid-life: its scripts cannot read the policy, and calls say so', async (t, { opts }) => {
    await admin.acl('SETUSER', 'loses-info', 'reset', 'on', 'nopass', '~*', '&*', '+@all')
    const r = client({ username: 'loses-info', password: 'x', enableReadyCheck: false })
    const limit = RateLimit(r, 'noinfo', 1000, opts())
    t.type(await limit(), 'number', 'checked while INFO was allowed')
    await admin.acl('SETUSER', 'loses-info', '-info')
    let err = null
    await until(async () => { await limit().catch(e => { err = e }); return err !== null }, 'a call to refuse', 10000)
    t.equal(err.code, 'ERR_SABSYNC_REDIS')
    t.match(err.message, /could not read maxmemory_policy/)
    t.match(err.message, /unsafeAllowEviction/, 'naming the way out')
    const ok = RateLimit(r, 'noinfo2', 5, opts({ unsafeAllowEviction: true }))
    t.type(await ok(), 'number', 'unsafeAllowEviction skips every reading')
  })
}, { own: true })
