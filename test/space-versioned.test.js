'use strict'
// openShared(name, { versioned: true }): keys derived from the kind and
// parameters, so that a rolling deploy can change a Sema's nr or a limit's
// rate while processes of the old deploy still use the old object. Real
// processes: the parent plays an old process that keeps running, children
// the old and the new deploy.
const t = require('tap')
const { openShared } = require('..')
const { spaceName, spawn } = require('./space-helpers')

if (process.platform !== 'linux') {
  t.plan(0, 'shared spaces need Linux')
  process.exit(0)
}

t.test('a Sema whose nr changes across a deploy: old processes keep the old one, new ones share a new one', async t => {
  const name = spaceName(t)
  const old = openShared(name, { versioned: true })
  t.equal(old.versioned, true)
  const pool = old.sema('pool', 2)
  const held = [pool.tryAcquire(), pool.tryAcquire()]
  t.same(held.sort(), [0, 1], 'the old deploy holds both tokens of its Sema')

  const open = `const s = sabsync.openShared(${JSON.stringify(name)}, { versioned: true })`
  // Another process of the old deploy: the same object (no token free).
  const sameDeploy = spawn(t, '-', `${open}; const p = s.sema('pool', 2); return [p.nr, p.tryAcquire() === undefined]`)
  t.same(await sameDeploy.done, [2, true], 'an old process shares the old Sema')

  // A process of the new deploy: no mismatch, a Sema of its own nr, shared
  // by the new processes.
  const body = `${open}; const p = s.sema('pool', 3); const tok = p.tryAcquire(); send({ tok }); await next(); p.release(tok); return p.nr`
  const a = spawn(t, '-', body)
  const b = spawn(t, '-', body)
  const [ma, mb] = await Promise.all([a.message(m => 'tok' in m), b.message(m => 'tok' in m)])
  t.not(ma.tok, undefined, 'new process 1 got a token of the new Sema')
  t.not(mb.tok, undefined, 'new process 2 too')
  t.not(ma.tok, mb.tok, 'different tokens of one Sema')
  // This process joins the new deploy too: one token of the three is left.
  const fresh = openShared(name, { versioned: true }).sema('pool', 3)
  const third = fresh.tryAcquire()
  t.not(third, undefined, 'the third token of the new Sema')
  t.equal(fresh.tryAcquire(), undefined, 'and no fourth: the new processes share one Sema of 3')
  fresh.release(third)
  a.send('go')
  b.send('go')
  t.same(await Promise.all([a.done, b.done]), [3, 3])

  // The old object is untouched: what the old deploy holds it gives back.
  pool.release(held[0])
  t.equal(pool.tryAcquire(), held[0], 'the old Sema still works for the old deploy')
  pool.release(held[0])
  pool.release(held[1])

  // The default versions a Sema's key too; versioned: false keeps one
  // object per key, and a new nr is a mismatch.
  const plain = spawn(t, '-', `
    const s = sabsync.openShared(${JSON.stringify(name)})
    s.sema('byDefault', 2)
    const nr = s.sema('byDefault', 3).nr
    const strict = sabsync.openShared(${JSON.stringify(name)}, { versioned: false })
    strict.sema('unversioned', 2)
    try { strict.sema('unversioned', 3) } catch (e) { return [nr, e.code] }`)
  t.same(await plain.done, [3, 'ERR_SABSYNC_SHARED_MISMATCH'])
  old.close()
})

t.test('a rate limit and a RateLimiter changed across a deploy', async t => {
  const name = spaceName(t)
  const space = openShared(name, { versioned: true })
  const limiter = space.rateLimiter('api', { limit: 1, window: 60000 })
  t.equal(limiter.consume('client').allowed, true)
  t.equal(limiter.consume('client').allowed, false, 'the old limit (1 a minute) is spent')
  const child = spawn(t, '-', `
    const s = sabsync.openShared(${JSON.stringify(name)}, { versioned: true })
    const old = s.rateLimiter('api', { limit: 1, window: 60000 })
    const next = s.rateLimiter('api', { limit: 5, window: 60000 })
    const rl = s.rateLimit('rps', 7)
    const r = next.consume('client')
    return [old.consume('client').allowed, r.allowed, r.retryAfter > 0 && r.retryAfter <= 12000, next.consume('other').allowed, typeof rl.sync]`)
  // A RateLimiter's limit is the caller's: old and new share one table, and
  // the client that spent the old minute waits at most one point of the
  // new rate (12 s, less the child's start), not for the old one (60 s).
  t.same(await child.done, [false, false, true, true, 'function'], 'one table for both limits, each applying its own')
  t.equal(typeof space.rateLimit('rps', 8).sync, 'function', 'a RateLimit of another rps beside it')
  space.close()
})

t.test('by default a RateLimit of another rps or unit is a new version beside the old: no mismatch', async t => {
  // The README's space.rateLimit('github', 100) across a release that
  // raises it: the default versions a RateLimit's key, as a Sema's.
  const name = spaceName(t)
  const space = openShared(name)
  const old = space.rateLimit('github', 5)
  const next = space.rateLimit('github', 8)
  const slower = space.rateLimit('github', 8, { timeUnit: 2000 })
  t.same([old.rps, next.rps, slower.rps], [5, 8, 8])
  t.equal(space.usage().retired, 2, 'each newer version retires the older ones, until their users are gone')
  t.equal(typeof (await next()), 'number', 'the new version grants')
  space.close()
})

t.test('versioned keys: arguments and limits', async t => {
  const name = spaceName(t)
  t.throws(() => openShared(name, { versioned: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE', message: /"options.versioned"/ })
  const space = openShared(name, { versioned: true })
  t.throws(() => space.mutex('a\u0002b'), { code: 'ERR_INVALID_ARG_VALUE', message: /U\+0002/ })
  t.throws(() => space.sema('k'.repeat(80), 2), { code: 'ERR_OUT_OF_RANGE', message: /in a versioned space/ })
  const plain = openShared(name, { versioned: false })
  t.equal(plain.versioned, false)
  t.equal(openShared(name).versioned, 'state', 'the default versions the kinds whose parameters are state')
  t.not(plain.mutex('m').byteOffset, space.mutex('m').byteOffset, 'a versioned key is never a plain one')
  space.close()
  plain.close()
})
