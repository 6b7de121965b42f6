'use strict'
// A closed or unreachable Redis is said as such, before any check of the
// server's eviction policy (issue 31): the first call on a closed client,
// on a client whose server does not answer, and a RateLimiter's consume.
// A RateLimiter given another library's options names ours.
const t = require('tap')
const net = require('net')
const Redis = require('ioredis')
const { redisSuite } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimiter } = require('../lib/redis')

function deadPort () {
  return new Promise(resolve => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

redisSuite(t, async s => {
  s.test('a closed client: the connection is closed, not the policy', async (t, k) => {
    const r = new Redis(s.url)
    await r.ping()
    await r.quit()
    const calls = {
      'mutex.lockAsync()': () => new Mutex(r, 'closed', k.opts()).lockAsync(),
      'sema.acquire()': () => new Sema(r, 'closed', 2, k.opts()).acquire({ timeout: 5000 }),
      'rateLimiter.consume()': () => new RateLimiter(r, k.prefix + 'rl', { limit: 5, window: 1000 }).consume('a')
    }
    for (const [what, call] of Object.entries(calls)) {
      const err = await call().then(() => null, e => e)
      t.match(err, { code: 'ERR_SABSYNC_REDIS', message: /^sabsync: cannot reach Redis \(.*\): the client's connection is closed/ }, what)
      t.notMatch(err.message, /maxmemory|unsafeAllowEviction|Allow INFO/i, `${what}: no word of the eviction policy`)
    }
  })

  // After a first call, a take goes without the policy check, on the
  // free path (takeFree) or the general one (take): each says the same.
  s.test('a client closed after its first calls: the connection is closed', async (t, k) => {
    const r = new Redis(s.url)
    const mutex = new Mutex(r, 'later', k.opts())
    const busy = new Mutex(r, 'later-busy', k.opts())
    const sema = new Sema(r, 'later', 2, k.opts())
    t.ok(await mutex.lockAsync(), 'granted while connected')
    await mutex.unlock()
    t.ok(await busy.lockAsync(), 'granted while connected')
    t.equal(await busy.tryLock(), false, 'busy: its next take is the general one')
    t.equal(await sema.acquire(), 0)
    await sema.release()
    t.equal(await busy.unlock(), true, 'released while connected')
    await r.quit()
    const calls = {
      'mutex.lockAsync() on the free path': () => mutex.lockAsync(),
      'mutex.tryLock() on the general path': () => busy.tryLock(),
      'sema.acquire()': () => sema.acquire({ timeout: 5000 })
    }
    for (const [what, call] of Object.entries(calls)) {
      const err = await call().then(() => null, e => e)
      t.match(err, { code: 'ERR_SABSYNC_REDIS', message: /^sabsync: cannot reach Redis \(take on .*\): the client's connection is closed/ }, what)
    }
  })

  s.test('a server that does not answer: says the client cannot reach it', async (t, k) => {
    const r = new Redis({ port: await deadPort(), host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => 50 })
    r.on('error', () => {})
    t.teardown(() => r.disconnect())
    const err = await new Mutex(r, 'down', k.opts()).lockAsync({ timeout: 10000 }).then(() => null, e => e)
    t.match(err, { code: 'ERR_SABSYNC_REDIS', message: /^sabsync: cannot reach Redis \(.*\): the client is (connecting|reconnecting)/ })
    t.notMatch(err.message, /maxmemory|unsafeAllowEviction|Allow INFO/i, 'no word of the eviction policy')
  })

  s.test('a number where options go names { timeout }', async (t, k) => {
    const r = s.client()
    await t.rejects(new Mutex(r, 'n', k.opts()).lockAsync(100), { code: 'ERR_INVALID_ARG_TYPE', message: /\{ timeout: 100 \}, not as a bare number/ })
    await t.rejects(new Sema(r, 'n', 2, k.opts()).acquire(1000), { code: 'ERR_INVALID_ARG_TYPE', message: /\{ timeout: 1000 \}, not as a bare number/ })
  })

  s.test('express-rate-limit\'s options name ours', async (t, k) => {
    t.throws(() => new RateLimiter(s.client(), k.prefix, { windowMs: 60000, max: 100 }), {
      code: 'ERR_INVALID_ARG_VALUE', message: /windowMs \(express-rate-limit's\) is window here: window: 60000 \(ms\); max \(express-rate-limit's\) is limit here: limit: 100/
    })
  })
})
