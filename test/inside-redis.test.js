'use strict'
// nrWaiting() on every sabsync/redis object, against a real redis-server:
// Mutex, Sema and RateLimit count their queued waiters; a RateLimiter,
// whose consume() never waits, answers 0.
const t = require('tap')
const { redisSuite } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimiter } = require('../lib/redis')

async function until (t, fn, want, what) {
  const end = Date.now() + 10000
  let got
  while ((got = await fn()) !== want && Date.now() < end) await new Promise(resolve => setTimeout(resolve, 10))
  t.equal(got, want, what)
}

redisSuite(t, async s => {
  const { client } = s

  s.test('every object answers nrWaiting()', async (t, { opts, key }) => {
    const m = new Mutex(client(), 'm', opts())
    t.equal(await m.nrWaiting(), 0)
    t.ok(await m.lockAsync())
    const other = new Mutex(client(), 'm', opts())
    const waiting = other.lockAsync({ timeout: 10000 })
    await until(t, () => m.nrWaiting(), 1, 'a Mutex: one waiter')
    await m.unlock()
    t.ok(await waiting)
    await other.unlock()
    t.equal(await m.nrWaiting(), 0)

    const sema = new Sema(client(), 's', 1, opts())
    const tok = await sema.acquire()
    const next = sema.acquire({ timeout: 10000 })
    await until(t, () => sema.nrWaiting(), 1, 'a Sema: one waiter')
    await sema.release(tok)
    await sema.release(await next)

    const limiter = new RateLimiter(client(), key('l'), { limit: 1, window: 60000 })
    t.equal(await limiter.nrWaiting(), 0, 'a RateLimiter: nobody ever waits')
  })
})
