'use strict'
// sabsync/redis Sema against a real redis-server: never more than nr
// holders across clients, arrival order, tokens, leases.
const t = require('tap')
const { redisSuite, tick, until } = require('./fixtures/redis/suite')
const { Sema } = require('../lib/redis')

redisSuite(t, async suite => {
  const { client } = suite

  suite.test('arguments are checked, and named', async (t, { opts }) => {
    const r = client()
    t.throws(() => new Sema(r, 'k'), { name: 'TypeError', message: /"nr" argument/ })
    t.throws(() => new Sema(r, 'k', 0), { name: 'RangeError', message: /"nr" argument/ })
    t.throws(() => new Sema(r, 'k', 2.5), { name: 'RangeError', message: /"nr" argument/ })
    t.throws(() => new Sema(null, 'k', 2), { name: 'TypeError', message: /"redis" argument/ })
    t.throws(() => new Sema(r, 'k', 2, { lease: 5 }), { name: 'RangeError', message: /"options.lease"/ })
    const s = new Sema(r, 'args', 2, opts())
    await t.rejects(s.acquire({ timeout: {} }), { name: 'TypeError', message: /"options.timeout"/ })
    await t.rejects(s.release(), { code: 'ERR_SABSYNC_BAD_TOKEN' }, 'release() holding nothing')
    await t.rejects(s.release(0), { code: 'ERR_SABSYNC_BAD_TOKEN' }, 'release of a token not held here')
    await t.rejects(s.release('0'), { name: 'TypeError', message: /"token"/ })
    t.throws(() => s.lost(0), { code: 'ERR_SABSYNC_BAD_TOKEN' })
    t.throws(() => s.lost(Symbol('t')), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /"token".*a symbol/ })
    t.throws(() => s.lost('0'), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' })
  })

  suite.test('tokens are the slots 0 … nr-1; release() gives back the latest; tryAcquire does not wait', async (t, { opts }) => {
    const s = new Sema(client(), 'tokens', 3, opts())
    const got = [await s.acquire(), await s.acquire(), await s.tryAcquire()]
    t.same([...got].sort(), [0, 1, 2])
    t.equal(await s.tryAcquire(), undefined, 'none left')
    t.equal(await s.acquire({ timeout: 50 }), undefined, 'a timeout is undefined')
    t.equal(s.lost(got[1]).aborted, false)
    t.equal(await s.release(), undefined, 'the latest; release resolves nothing (API.md: Promise<void>)')
    t.equal(await s.tryAcquire(), got[2], 'that one is free again')
    await s.release(got[0])
    t.equal(await s.tryAcquire(), got[0], 'a released token is free at once')
    await s.release(got[0])
    const signal = s.lost(got[1])
    t.equal(await s.release(got[1]), undefined)
    t.equal(signal.aborted, false, 'a release of a live lease loses nothing')
    await s.release()
    await t.rejects(s.release(), { code: 'ERR_SABSYNC_BAD_TOKEN' })
  })

  suite.test('never more than nr holders across clients, with timeouts and aborts mixed in', async (t, { opts }) => {
    const nr = 3
    const conns = [client(), client(), client(), client()]
    // Connected first: a late reply from a client still connecting is an
    // error, from a connected one a timeout (tiny timeouts follow).
    await Promise.all(conns.map(c => c.ping()))
    const semas = conns.map(c => new Sema(c, 'bound', nr, opts()))
    let inside = 0
    let most = 0
    let served = 0
    const held = new Set()
    await Promise.all(semas.map(async (s, k) => {
      for (let i = 0; i < 30; i++) {
        const ac = new AbortController()
        const r = Math.random()
        if (r < 0.1) setTimeout(() => ac.abort(new Error('abort')), Math.random() * 3)
        let token
        try {
          token = await s.acquire({ signal: ac.signal, timeout: r > 0.9 ? Math.random() * 3 : undefined })
        } catch (err) {
          t.equal(err.message, 'abort')
          continue
        }
        if (token === undefined) continue
        t.notOk(held.has(token), 'a token is out once')
        held.add(token)
        most = Math.max(most, ++inside)
        served++
        await tick(Math.random() < 0.5 ? 0 : 1)
        inside--
        held.delete(token)
        t.equal(await s.release(token), undefined)
      }
    }))
    t.ok(most <= nr, `at most ${nr} at once (saw ${most})`)
    t.ok(served > 60, 'most calls were served')
    t.equal(await semas[0].nrWaiting(), 0, 'nobody left waiting')
  })

  suite.test('waiters are served in arrival order across clients', async (t, { opts }) => {
    const [a, b, c] = [client(), client(), client()]
    const sa = new Sema(a, 'fifo', 2, opts())
    const sb = new Sema(b, 'fifo', 2, opts())
    const sc = new Sema(c, 'fifo', 2, opts())
    const held = [[sa, await sa.acquire()], [sa, await sa.acquire()]]
    const order = []
    const who = [sb, sc, sc, sb, sc, sb]
    for (let i = 0; i < who.length; i++) {
      const s = who[i]
      s.acquire().then(token => { order.push(i); held.push([s, token]) })
      await until(async () => (await sa.nrWaiting()) === i + 1, 'waiter ' + i + ' to queue')
    }
    // One token back at a time, so that one grant at a time is in flight:
    // each goes to the next waiter in arrival order.
    for (let i = 0; i < who.length; i++) {
      const [s, token] = held.shift()
      await s.release(token)
      await until(() => order.length === i + 1, 'grant ' + i)
      t.equal(order[i], i, `grant ${i} went to waiter ${i}`)
    }
    for (const [s, token] of held) await s.release(token)
  })

  suite.test('a Sema\'s nr is its caller\'s: a take is granted while fewer than its nr hold', async (t, { opts }) => {
    const [a, b] = [client(), client()]
    const s2 = new Sema(a, 'nr-change', 2, opts())
    const s3 = new Sema(b, 'nr-change', 3, opts())
    const held = [await s2.acquire(), await s2.acquire()]
    t.equal(await s2.tryAcquire(), undefined, 'nr = 2: two held, no third')
    const third = await s3.tryAcquire()
    t.equal(third, 2, 'nr = 3: the third slot')
    t.equal(await s3.tryAcquire(), undefined, 'and no fourth')
    await s2.release(held[0])
    t.equal(await s2.tryAcquire(), undefined, 'nr = 2 while three hold: none')
    t.equal(await s3.tryAcquire(), held[0], 'nr = 3 while two hold: the freed slot')
    for (const tok of [held[1]]) await s2.release(tok)
    await s3.release(third)
    await s3.release(held[0])
    // 1 and more than 1 are two layouts: changed only when idle.
    const s1 = new Sema(a, 'nr-change', 1, opts())
    const tok = await s3.acquire()
    await t.rejects(s1.tryAcquire(), {
      code: 'ERR_SABSYNC_SHARED_MISMATCH',
      message: /nr = 3 is in use \(1 held, 0 waiting\), this call asked for nr = 1\. .*only once it is idle/
    })
    await s3.release(tok)
    t.equal(await s1.tryAcquire(), 0, 'once the key is idle, it can be made again with nr = 1')
    await s1.release()
  })

  suite.test('a dead holder\'s token comes back when its lease runs out', async (t, { opts }) => {
    const [a, b] = [client(), client()]
    const sa = new Sema(a, 'lease', 1, opts({ lease: 300 }))
    const sb = new Sema(b, 'lease', 1, opts({ lease: 300 }))
    await sa.acquire()
    // A holder that stops renewing: its client is gone.
    a.disconnect()
    const t0 = performance.now()
    const token = await sb.acquire({ timeout: 10000 })
    t.equal(token, 0)
    t.ok(performance.now() - t0 >= 100, 'not before the lease could run out')
    await sb.release()
  })

  suite.test('nr = 3: a dead holder\'s token, and only it, goes to the first waiter', async (t, { opts }) => {
    const [a, b, c] = [client(), client(), client()]
    const sa = new Sema(a, 'dead3', 3, opts({ lease: 300 }))
    // The live holders' leases are long: only a's runs out.
    const sb = new Sema(b, 'dead3', 3, opts({ lease: 10000 }))
    const sc = new Sema(c, 'dead3', 3, opts({ lease: 10000 }))
    const tb = [await sb.acquire(), await sb.acquire()]
    const ta = await sa.acquire()
    t.same([...tb, ta].sort(), [0, 1, 2], 'three tokens out')
    const first = sc.acquire({ timeout: 20000 })
    await until(async () => (await sb.nrWaiting()) === 1, 'the first waiter to queue')
    const second = sc.acquire({ timeout: 1500 })
    await until(async () => (await sb.nrWaiting()) === 2, 'the second waiter to queue')
    a.disconnect() // the holder of ta stops renewing
    t.equal(await first, ta, 'the first waiter gets the dead holder\'s token')
    t.equal(await second, undefined, 'the second gets nothing: the live holders keep theirs')
    t.equal(sb.lost(tb[0]).aborted || sb.lost(tb[1]).aborted, false, 'no live lease was lost')
    for (const token of tb) await sb.release(token)
    await sc.release(ta)
    t.equal(await sb.nrWaiting(), 0)
  })

  suite.test('a lease the server lost: lost(token) aborts, release() still resolves, the token is free', async (t, { opts, prefix }) => {
    const [a, b] = [client(), client()]
    const sa = new Sema(a, 'lost', 1, opts({ lease: 300 }))
    const sb = new Sema(b, 'lost', 1, opts({ lease: 300 }))
    const token = await sa.acquire()
    const signal = sa.lost(token)
    const lost = new Promise(resolve => signal.addEventListener('abort', () => resolve(signal.reason)))
    // What a restart without persistence does to the Sema's state.
    const keys = await a.keys(`{${prefix}:sema:lost}:*`)
    t.ok(keys.length > 0, 'the Sema has keys while held')
    await a.del(...keys)
    t.equal((await lost).code, 'ERR_SABSYNC_LEASE_LOST', 'the renewal finds it gone')
    t.equal(await sb.acquire({ timeout: 5000 }), 0, 'the token is free for another client')
    t.equal(await sa.release(token), undefined, 'release of the lost lease resolves, as any release')
    await t.rejects(sa.release(token), { code: 'ERR_SABSYNC_BAD_TOKEN' }, 'and it is no longer held here')
    t.equal(await sb.nrWaiting(), 0)
    await sb.release()
  })
})
