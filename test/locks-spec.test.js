'use strict'
// The Web Locks spec's request and query algorithms, step by step, run
// against every tier from one table (as the lot's tests run per memory):
// argument checks, the errors the spec names, grant order per name,
// shared and exclusive, ifAvailable, steal, signal before and after the
// grant, the callback's result and exceptions, query().
const t = require('tap')
const Redis = require('ioredis')
const sabsync = require('..')
const { LockManager: RedisLockManager } = require('../lib/redis')
const { sharedServer } = require('./fixtures/redis/server')

// Each tier: open() -> { locks, close() }; `other` (optional) -> a second
// manager of the same tier that is another agent (another thread, process
// or client), for what one agent cannot show alone.
// nameMax: the longest name the tier takes, in UTF-16 code units.
const tiers = [
  {
    tier: 'threads',
    nameMax: 1024,
    open: async () => ({ locks: sabsync.locks, close: async () => {} })
  },
  {
    // Every client of a real redis-server (SABSYNC_REDIS_URL's, or one
    // started here) using the prefix; its keys are deleted at the end.
    tier: 'redis',
    nameMax: 1024,
    open: async t => {
      const redis = new Redis(await sharedServer(t))
      const prefix = `locks-spec-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
      const locks = new RedisLockManager(redis, prefix, { lease: 10000 })
      return {
        locks,
        close: async () => {
          await locks.close()
          const keys = await redis.keys(`{${prefix}:locks}*`)
          if (keys.length > 0) await redis.del(...keys)
          redis.disconnect()
        }
      }
    }
  }
]
if (process.platform === 'linux') {
  tiers.push({
    tier: 'space',
    nameMax: 128,
    open: async () => {
      const name = `locks-spec-${process.pid}`
      const space = sabsync.openShared(name)
      return { locks: space.locks, close: async () => { space.close(); sabsync.openShared.unlink(name) } }
    }
  })
}

let serial = 0
const unique = (t, tier) => `${tier}:${process.pid}:${serial++}`
const tick = (ms = 0) => new Promise(resolve => setTimeout(resolve, ms))
const deferred = () => {
  let resolve, reject
  const promise = new Promise((_resolve, _reject) => { resolve = _resolve; reject = _reject })
  return { promise, resolve, reject }
}
const rejectsWith = async (t, p, check, msg) => {
  try {
    await p
    t.fail(msg + ': resolved')
  } catch (err) {
    check(err)
  }
}
const isDOM = name => err => err instanceof DOMException && err.name === name
const of = (list, name) => list.filter(i => i.name === name)

for (const { tier, nameMax, open } of tiers) {
  t.test(tier, async t => {
    const { locks, close } = await open(t)
    t.teardown(close)

    t.test('arguments: a name and a callback are required; every bad argument rejects with TypeError, never throws', async t => {
      const n = unique(t, tier)
      for (const args of [[], [n], [n, undefined], [n, null], [n, 123], [n, 'abc'], [n, []], [n, {}], [n, new Promise(() => {})],
        [n, {}, 123], [n, { mode: 'foo' }, () => {}], [n, { mode: null }, () => {}], [n, 123, () => {}], [n, 'abc', () => {}],
        [Symbol('s'), () => {}]]) {
        let p
        t.doesNotThrow(() => { p = locks.request(...args) }, 'no throw')
        t.ok(p instanceof Promise, 'a promise')
        await rejectsWith(t, p, err => t.equal(err.constructor, TypeError, `rejects with TypeError: ${err.message}`), 'bad arguments')
      }
      for (const signal of ['string', 12.34, false, {}, Symbol('x'), () => {}, globalThis]) {
        await rejectsWith(t, locks.request(n, { signal }, () => t.fail('callback ran')), err => t.equal(err.constructor, TypeError), 'bad signal')
      }
      t.equal(await locks.request(n, { mode: 'exclusive' }, l => l.mode), 'exclusive')
      t.equal(await locks.request(n, { mode: 'shared' }, l => l.mode), 'shared')
      t.equal(await locks.request(n, undefined, l => l.mode), 'exclusive', 'options undefined: exclusive')
    })

    t.test('NotSupportedError: names starting with -, steal with ifAvailable or shared, signal with steal or ifAvailable', async t => {
      const n = unique(t, tier)
      const ac = new AbortController()
      for (const [name, options] of [['-', {}], ['-x', {}], [n, { steal: true, ifAvailable: true }], [n, { steal: true, mode: 'shared' }],
        [n, { signal: ac.signal, steal: true }], [n, { signal: ac.signal, ifAvailable: true }]]) {
        await rejectsWith(t, locks.request(name, options, () => t.fail('callback ran')), err => t.ok(isDOM('NotSupportedError')(err), `${name} ${JSON.stringify(Object.keys(options))}: ${err.message}`), 'refused')
      }
      t.equal(await locks.request('x-' + n, () => 'ok'), 'ok', 'a - inside a name is fine')
    })

    t.test('an aborted signal rejects with its reason itself, the callback never runs', async t => {
      const n = unique(t, tier)
      const reason = { mine: true }
      await rejectsWith(t, locks.request(n, { signal: AbortSignal.abort(reason) }, () => t.fail('ran')), err => t.equal(err, reason), 'custom')
      const ac = new AbortController()
      ac.abort()
      await rejectsWith(t, locks.request(n, { signal: ac.signal }, () => t.fail('ran')), err => { t.equal(err, ac.signal.reason); t.ok(isDOM('AbortError')(err)) }, 'default')
    })

    t.test("the callback's result settles the request, after the release", async t => {
      const n = unique(t, tier)
      t.equal(await locks.request(n, () => 123), 123, 'a plain value')
      t.equal(await locks.request(n, async () => 'async'), 'async', 'an async value')
      const err = { name: 'test' }
      const p = locks.request(n, () => { throw err })
      t.equal(Promise.resolve(p), p, 'a native promise')
      await rejectsWith(t, p, e => t.equal(e, err, 'a sync throw rejects with it'), 'throw')
      await rejectsWith(t, locks.request(n, async () => { throw err }), e => t.equal(e, err), 'async throw')
      let thenCalled = false
      const thenable = { then: () => { thenCalled = true } }
      await rejectsWith(t, locks.request(n, async () => { throw thenable }), e => t.equal(e, thenable), 'thenable')
      t.equal(thenCalled, false, 'a thrown thenable is not resolved')

      let called = false
      const q = locks.request(n, () => { called = true })
      t.equal(called, false, 'the callback is not called synchronously')
      await q
      t.equal(called, true)

      const hold = deferred()
      const order = []
      const first = locks.request(n, () => hold.promise)
      first.then(() => order.push('returned'))
      hold.promise.then(() => order.push('holding'))
      const second = locks.request(n, () => order.push('2nd granted'))
      await tick(20)
      t.same(order, [], 'held until the callback settles')
      hold.resolve()
      await Promise.all([first, second])
      t.same(order, ['holding', 'returned', '2nd granted'])

      const fail = deferred()
      // Rejected before its callback runs where a grant takes a round trip.
      fail.promise.catch(() => {})
      const f = locks.request(n, () => fail.promise)
      const after = locks.request(n, () => 'next')
      fail.reject(err)
      await rejectsWith(t, f, e => t.equal(e, err), 'rejected callback promise')
      t.equal(await after, 'next', 'a rejected callback releases too')
    })

    t.test('exclusive requests are granted one at a time, in request order', async t => {
      const n = unique(t, tier)
      const order = []
      let inside = 0
      let most = 0
      const all = []
      for (let i = 0; i < 20; i++) {
        all.push(locks.request(n, async () => {
          inside++
          most = Math.max(most, inside)
          order.push(i)
          await tick(i % 3)
          inside--
        }))
      }
      await Promise.all(all)
      t.same(order, [...Array(20).keys()], 'FIFO')
      t.equal(most, 1, 'never two inside')
    })

    t.test('shared and exclusive: shared together, an exclusive waits for all, later shared wait behind it', async t => {
      const n = unique(t, tier)
      const other = unique(t, tier)
      const granted = []
      const unblock = deferred()
      for (let i = 1; i <= 3; i++) locks.request(n, { mode: 'shared' }, async () => { granted.push('s' + i); await unblock.promise })
      let exclusiveLock
      const ex = locks.request(n, async lock => { granted.push('x'); exclusiveLock = lock })
      const later = deferred()
      const tail = []
      for (let i = 4; i <= 6; i++) tail.push(locks.request(n, { mode: 'shared' }, () => { granted.push('s' + i); return later.promise }))
      await locks.request(other, () => granted.push('other'))
      t.same(granted, ['s1', 's2', 's3', 'other'], 'three shared held at once; another name not blocked')
      let q = await locks.query()
      t.same(of(q.held, n).map(i => i.mode), ['shared', 'shared', 'shared'])
      t.same(of(q.pending, n).map(i => i.mode), ['exclusive', 'shared', 'shared', 'shared'], 'pending in queue order')
      unblock.resolve()
      await ex
      t.equal(exclusiveLock.mode, 'exclusive')
      t.equal(exclusiveLock.name, n)
      await tick(10)
      t.same(granted, ['s1', 's2', 's3', 'other', 'x', 's4', 's5', 's6'], 'the exclusive, then the three shared behind it together')
      q = await locks.query()
      t.same(of(q.held, n).map(i => i.mode), ['shared', 'shared', 'shared'], 'releasing the exclusive granted every shared behind it')
      later.resolve()
      await Promise.all(tail)
    })

    t.test('ifAvailable: granted when grantable now, else the callback gets null', async t => {
      const n = unique(t, tier)
      t.not(await locks.request(n, { ifAvailable: true }, l => l), null, 'free: granted')
      const r = await locks.request(n, async () => {
        const inner = await locks.request(n, { ifAvailable: true }, l => l === null ? 123 : 'granted?')
        await rejectsWith(t, locks.request(n, { ifAvailable: true }, () => { throw new RangeError('x') }), e => t.type(e, RangeError), 'throws')
        return inner
      })
      t.equal(r, 123, 'held: null, and the request resolves with what the callback returned')
      await locks.request(n, { mode: 'shared' }, async () => {
        t.not(await locks.request(n, { mode: 'shared', ifAvailable: true }, l => l), null, 'shared held: a shared one is grantable')
        t.equal(await locks.request(n, { ifAvailable: true }, l => l), null, 'shared held: an exclusive one is not')
      })
      // An exclusive request waiting ahead makes a shared one ungrantable
      // even though only shared locks are held.
      const hold = deferred()
      locks.request(n, { mode: 'shared' }, () => hold.promise)
      const waiting = locks.request(n, () => 'x')
      t.equal(await locks.request(n, { mode: 'shared', ifAvailable: true }, l => l), null, 'a queue ahead: not grantable')
      hold.resolve()
      t.equal(await waiting, 'x')
      t.same(of((await locks.query()).held, n), [], 'nothing left held')
    })

    t.test('steal: every holder loses the lock (AbortError), the thief goes ahead of the queue', async t => {
      const n = unique(t, tier)
      const never = new Promise(() => {})
      const robbed = locks.request(n, () => never)
      // Robbed while the thief's grant and release make round trips (Redis).
      robbed.catch(() => {})
      let waitingGranted = false
      const waiting = locks.request(n, () => { waitingGranted = true })
      await tick(10)
      t.equal(await locks.request(n, { steal: true }, l => { t.equal(waitingGranted, false, 'ahead of the waiting request'); return l.mode }), 'exclusive')
      await rejectsWith(t, robbed, e => t.ok(isDOM('AbortError')(e), 'robbed: AbortError'), 'robbed')
      await waiting
      t.equal(waitingGranted, true, 'the waiting request is granted after the thief')

      const first = locks.request(n, { steal: true }, () => never)
      first.catch(() => {})
      await tick(10)
      await locks.request(n, { steal: true }, () => {})
      await rejectsWith(t, first, e => t.ok(isDOM('AbortError')(e), 'the last caller wins'), 'first thief')
      t.same(of((await locks.query()).held, n), [], 'nothing held after')
    })

    t.test('signal: abort while queued, synchronously after a grantable request, after the grant', async t => {
      const n = unique(t, tier)
      const hold = deferred()
      const holder = locks.request(n, () => hold.promise)
      const ac = new AbortController()
      const queued = locks.request(n, { signal: ac.signal }, () => t.fail('callback of an aborted request ran'))
      let q = await locks.query()
      t.equal(of(q.held, n).length, 1)
      t.equal(of(q.pending, n).length, 1, 'queued')
      ac.abort('changed my mind')
      await rejectsWith(t, queued, e => t.equal(e, 'changed my mind'), 'aborted')
      q = await locks.query()
      t.equal(of(q.pending, n).length, 0, 'out of the queue')
      hold.resolve()
      await holder

      let ran = false
      const ac2 = new AbortController()
      const p = locks.request(n, { signal: ac2.signal }, () => { ran = true })
      ac2.abort()
      await rejectsWith(t, p, e => t.ok(isDOM('AbortError')(e)), 'synchronous abort')
      t.equal(ran, false, 'the callback of a request aborted before it ran never runs')
      t.equal(await locks.request(n, () => 'next'), 'next', 'and the lock was let go')

      const ac3 = new AbortController()
      const granted = deferred()
      const release = deferred()
      const p3 = locks.request(n, { signal: ac3.signal }, () => { granted.resolve(); return release.promise })
      await granted.promise
      ac3.abort()
      release.resolve('kept')
      t.equal(await p3, 'kept', 'an abort after the grant changes nothing')

      const ac4 = new AbortController()
      const first = locks.request(n, { signal: ac4.signal }, () => new Promise(() => {}))
      const next = locks.request(n, () => 'processed')
      ac4.abort()
      await rejectsWith(t, first, e => t.ok(isDOM('AbortError')(e)), 'aborted before its callback ran')
      t.equal(await next, 'processed', 'the next request goes')
    })

    t.test('query(): held in grant order across names, pending in queue order, one clientId per agent', async t => {
      const [a, b, c] = [unique(t, tier), unique(t, tier), unique(t, tier)]
      const hold = deferred()
      const held = []
      for (const [name, mode] of [[a, 'exclusive'], [b, 'shared'], [c, 'exclusive'], [b, 'shared']]) {
        held.push(locks.request(name, { mode }, () => hold.promise))
      }
      const pend = [locks.request(c, { mode: 'shared' }, () => {}), locks.request(a, () => {}), locks.request(c, () => {})]
      await tick(10)
      const q = await locks.query()
      const mine = new Set([a, b, c])
      t.same(q.held.filter(i => mine.has(i.name)).map(i => [i.name, i.mode]), [[a, 'exclusive'], [b, 'shared'], [c, 'exclusive'], [b, 'shared']], 'held in grant order')
      t.same(of(q.pending, c).map(i => i.mode), ['shared', 'exclusive'], 'pending per name in queue order')
      t.same(of(q.pending, a).map(i => i.mode), ['exclusive'])
      for (const i of [...q.held, ...q.pending].filter(i => mine.has(i.name))) {
        t.same(Object.keys(i).sort(), ['clientId', 'mode', 'name'])
        t.equal(typeof i.clientId, 'string')
      }
      t.equal(new Set(q.held.filter(i => mine.has(i.name)).map(i => i.clientId)).size, 1, 'one agent, one clientId')
      hold.resolve()
      await Promise.all([...held, ...pend])
      const after = await locks.query()
      t.same([...after.held, ...after.pending].filter(i => mine.has(i.name)), [], 'nothing left')
    })

    t.test('names: any string, lone surrogates included, is its own lock and comes back unchanged', async t => {
      const base = unique(t, tier)
      for (const s of ['', 'abc\x00def', '\uD800', '\uDC00', '\uDC00\uD800', '\uFFFF']) {
        t.equal(await locks.request(base + s, l => l.name), base + s, JSON.stringify(s))
      }
      await locks.request(base + '\uD800', async () => {
        t.equal(await locks.request(base + '\uFFFD', { ifAvailable: true }, l => l && l.name), base + '\uFFFD', 'U+D800 and U+FFFD are two locks')
        t.equal(await locks.request(base + '\uDBFF', { ifAvailable: true }, l => l && l.name), base + '\uDBFF', 'U+D800 and U+DBFF are two locks')
      })
      await rejectsWith(t, locks.request('x'.repeat(nameMax + 1), () => t.fail('ran')), e => t.type(e, RangeError, `a name past ${nameMax} code units: ${e.message}`), 'long name')
      t.equal(await locks.request('y'.repeat(nameMax), l => l.name.length), nameMax, `${nameMax} code units are fine`)
    })
  })
}
