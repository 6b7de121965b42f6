'use strict'
// Seeing inside sabsync/redis objects, against a real redis-server:
// nrWaiting() (Mutex, Sema and RateLimit count their queued waiters; a
// RateLimiter, whose consume() never waits, answers 0), and their waits on
// the TracingChannels (a contended lockAsync on sabsync:lock, a Sema
// acquire and a RateLimit call that sleeps on sabsync:acquire, with tier
// 'redis', the key, waitedMs and the result or error; nothing for a call
// that did not wait); and Mutex.holder(): this client, another process
// (after its first renewal), nobody once its lease ran out, and what
// another program wrote in the key's place.
const t = require('tap')
const os = require('os')
const path = require('path')
const { spawn } = require('child_process')
const dc = require('diagnostics_channel')
const { redisSuite } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimit, RateLimiter } = require('../lib/redis')

// What `name`'s TracingChannel published while it was listened to: one
// entry per span, { context, events } in order.
function listen (t, name) {
  const spans = new Map()
  const handlers = {}
  for (const ev of ['start', 'end', 'asyncStart', 'asyncEnd', 'error']) {
    handlers[ev] = ctx => {
      if (!spans.has(ctx)) spans.set(ctx, [])
      spans.get(ctx).push(ev === 'asyncStart' || ev === 'asyncEnd' ? `${ev}@${ctx.waitedMs > 0 ? 'waited' : 'none'}` : ev)
    }
  }
  const c = dc.tracingChannel(name)
  c.subscribe(handlers)
  t.teardown(() => c.unsubscribe(handlers))
  return () => [...spans].map(([context, events]) => ({ context, events }))
}

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

  s.test('waits are traced: a contended lockAsync, a Sema acquire, a sleeping RateLimit call; not a free lock', async (t, { opts, prefix }) => {
    if (typeof dc.tracingChannel !== 'function') return t.fail('this Node has no TracingChannel')
    const locks = listen(t, 'sabsync:lock')
    const acquires = listen(t, 'sabsync:acquire')
    const [a, b] = [new Mutex(client(), 'traced', opts()), new Mutex(client(), 'traced', opts())]
    const f1 = await a.lockAsync()
    t.same(locks(), [], 'a free lock: nothing published')
    const t0 = performance.now()
    const waiting = b.lockAsync({ timeout: 10000 })
    await until(t, () => a.nrWaiting(), 1, 'b queued')
    await new Promise(resolve => setTimeout(resolve, 30))
    await a.unlock()
    const f2 = await waiting
    const waited = performance.now() - t0
    t.ok(f2 > f1, 'b got it, with a later fence')
    const [span] = locks()
    t.same(span.events, ['start', 'end', 'asyncStart@waited', 'asyncEnd@waited'], 'one span, settled as a promise')
    t.match(span.context, { tier: 'redis', kind: 'Mutex', key: 'traced', async: true, result: f2 })
    t.ok(span.context.waitedMs >= 30 && span.context.waitedMs <= waited, `waitedMs ${span.context.waitedMs.toFixed(1)}: since the call, at least the 30 ms it was held`)
    // A wait that times out resolves false; one that is aborted errors.
    const timedOut = a.lockAsync({ timeout: 100 })
    t.equal(await timedOut, false)
    const ac = new AbortController()
    const aborted = a.lockAsync({ signal: ac.signal })
    await until(t, () => a.nrWaiting(), 1, 'a queued again')
    ac.abort(new Error('gave up'))
    await t.rejects(aborted, /gave up/)
    await b.unlock()
    const later = locks().slice(1)
    t.same(later.map(x => x.context.result), [false, undefined], 'the timeout: result false')
    t.same(later[1].events, ['start', 'end', 'error', 'asyncStart@waited', 'asyncEnd@waited'], 'the abort: error (then the span ends)')
    t.match(later[1].context.error, /gave up/)

    const sema = new Sema(client(), 'pool', 1, opts())
    const tok = await sema.acquire()
    const next = sema.acquire({ timeout: 10000 })
    await until(t, () => sema.nrWaiting(), 1, 'an acquire queued')
    await sema.release(tok)
    const tok2 = await next
    await sema.release(tok2)
    t.match(acquires().map(x => x.context), [{ tier: 'redis', kind: 'Sema', key: 'pool', result: tok2 }], 'the acquire that waited, with its token')

    const limit = RateLimit(client(), 'rl', 1, { prefix, timeUnit: 200 })
    await limit()
    t.equal(acquires().length, 1, 'a RateLimit call with room: nothing')
    await limit()
    const [, rl] = acquires()
    t.match(rl.context, { tier: 'redis', kind: 'RateLimit', key: 'rl' })
    t.ok(rl.context.waitedMs > 50, `the call that slept was traced (waited ${rl.context.waitedMs.toFixed(1)} ms)`)
  })

  s.test('Mutex.holder(): this client, another process once it renewed, nobody after its lease, forged fields', async (t, { opts, prefix }) => {
    const m = new Mutex(client(), 'held', opts({ lease: 3000 }))
    t.equal(await m.holder(), null, 'free: null')
    const fence = await m.lockAsync()
    const mine = await m.holder()
    t.match(mine, { host: os.hostname(), pid: process.pid, threadId: 0, fence })
    t.ok(mine.leaseLeftMs > 0 && mine.leaseLeftMs <= 3000, `leaseLeftMs ${mine.leaseLeftMs}`)
    await m.unlock()
    t.equal(await m.holder(), null, 'unlocked: null')

    const child = spawn(process.execPath, ['-e', `
      const Redis = require('ioredis')
      const { Mutex } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'redis'))})
      const m = new Mutex(new Redis(${JSON.stringify(s.url)}), 'held', { prefix: ${JSON.stringify(prefix)}, lease: 3000 })
      m.lockAsync().then(f => console.log(f))
    `], { cwd: path.join(__dirname, '..'), stdio: ['ignore', 'pipe', 'inherit'] })
    t.teardown(() => child.kill('SIGKILL'))
    const childFence = Number(await new Promise(resolve => child.stdout.once('data', d => resolve(String(d).trim()))))
    let h
    await s.until(async () => (h = await m.holder()) !== null && h.pid !== null, 'the child\'s first renewal', 10000)
    t.same({ ...h, leaseLeftMs: 0 }, { host: os.hostname(), pid: child.pid, threadId: 0, fence: childFence, leaseLeftMs: 0 }, 'the child, as its renewals said')

    // What another program writes there: believed for its shape only.
    child.kill('SIGSTOP')
    const M = `{${prefix}:mutex:held}:m`
    const wid = await s.admin.hget(M, 'h')
    await s.admin.hset(M, 'i', 'ffff:1 elsewhere 1 2')
    t.match(await m.holder(), { host: null, pid: null, threadId: null, fence: childFence }, 'a claim for another holder id: not believed')
    await s.admin.hset(M, 'i', wid + ' host notapid 2')
    t.match(await m.holder(), { host: null, pid: null }, 'a pid that is no number: not believed')
    child.kill('SIGKILL')
    await s.until(async () => (await m.holder()) === null, 'the lease to run out', 10000)
    t.pass('a holder whose lease ran out: null')

    await s.admin.hset(M, 'h', 'not a holder id', 'hx', Date.now() + 60000)
    await t.rejects(m.holder(), { code: 'ERR_SABSYNC_REDIS', message: /another program wrote its keys/ }, 'a holder id of another shape: an error naming why')
    await s.admin.set(M, 'x')
    await t.rejects(m.holder(), { code: 'ERR_SABSYNC_REDIS' }, 'a key of another type')
    await s.admin.del(M)
  })
})
