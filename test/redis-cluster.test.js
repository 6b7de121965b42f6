'use strict'
// sabsync/redis on a Redis Cluster of three masters, through ioredis
// Cluster clients standing for several machines: each object's keys share
// one slot (no CROSSSLOT), wake-ups reach waiters on other clients, and
// exclusion, token counts, fences and the rate hold. The cluster is this
// file's own (test/fixtures/redis/cluster.js); without redis-server and
// redis-cli the file is skipped with the reason, except under CI.
const t = require('tap')
const Redis = require('ioredis')
const { spawnSync } = require('child_process')
const { tick, until } = require('./fixtures/redis/suite')
const { startCluster, haveCli } = require('./fixtures/redis/cluster')
const { Mutex, Sema, RateLimit, RateLimiter, LockManager } = require('../lib/redis')

const haveServer = spawnSync('redis-server', ['--version']).status === 0
if (!(haveServer && haveCli()) && !process.env.CI) {
  t.skip('redis-server and redis-cli are needed to start a cluster (Debian: apt-get install -y redis-server)')
} else {
  main()
}

function main () {
  let nodes
  const clients = []
  const client = () => {
    const c = new Redis.Cluster(nodes)
    clients.push(c)
    return c
  }
  t.before(async () => { nodes = (await startCluster(t)).nodes })
  t.teardown(() => { for (const c of clients) c.disconnect() })
  const prefix = `cl-${process.pid}`

  // One key whose Mutex lives on each master: CLUSTER KEYSLOT of its tag,
  // and CLUSTER SLOTS for the master that serves that slot.
  async function keysOnEveryMaster () {
    const admin = new Redis(nodes[0].port, nodes[0].host)
    try {
      const ranges = await admin.cluster('SLOTS')
      const masterOf = slot => { const r = ranges.find(([lo, hi]) => slot >= lo && slot <= hi); return r[2][1] }
      const found = new Map()
      for (let i = 0; found.size < nodes.length && i < 1000; i++) {
        const key = 'k' + i
        const port = masterOf(await admin.cluster('KEYSLOT', `{${prefix}:mutex:${key}}:m`))
        if (!found.has(port)) found.set(port, key)
      }
      return [...found.values()]
    } finally {
      admin.disconnect()
    }
  }

  t.test('Mutex: one holder at a time across Cluster clients, on every master; fences grow', async t => {
    const keys = await keysOnEveryMaster()
    t.equal(keys.length, 3, 'a key on each of the three masters')
    for (const key of keys) {
      const locks = [client(), client(), client()].map(c => new Mutex(c, key, { prefix }))
      let inside = 0
      let overlaps = 0
      const fences = []
      await Promise.all(locks.map(async m => {
        for (let i = 0; i < 10; i++) {
          const fence = await m.lockAsync()
          if (++inside !== 1) overlaps++
          fences.push(fence)
          await tick(Math.random() < 0.5 ? 0 : 1)
          inside--
          t.equal(await m.unlock(), true)
        }
      }))
      t.equal(overlaps, 0, `${key}: no two holders at once`)
      t.ok(fences.every((f, i) => i === 0 || f > fences[i - 1]), `${key}: fences grow in grant order`)
    }
  })

  t.test('Mutex: a waiter on another client is served in arrival order', async t => {
    const [a, b, c] = [client(), client(), client()]
    const holder = new Mutex(a, 'fifo', { prefix })
    const mb = new Mutex(b, 'fifo', { prefix })
    const mc = new Mutex(c, 'fifo', { prefix })
    await holder.lockAsync()
    const order = []
    const pb = mb.lockAsync().then(async f => { order.push('b'); await tick(1); await mb.unlock(); return f })
    await until(async () => (await holder.nrWaiting()) === 1, 'b to queue')
    const pc = mc.lockAsync().then(async f => { order.push('c'); await mc.unlock(); return f })
    await until(async () => (await holder.nrWaiting()) === 2, 'c to queue')
    await holder.unlock()
    const [fb, fc] = await Promise.all([pb, pc])
    t.same(order, ['b', 'c'], 'in arrival order')
    t.ok(fc > fb, 'fences grow')
  })

  t.test('Sema: never more than nr holders across Cluster clients', async t => {
    const semas = [client(), client(), client()].map(c => new Sema(c, 'pool', 2, { prefix }))
    let inside = 0
    let most = 0
    await Promise.all(semas.map(async s => {
      for (let i = 0; i < 10; i++) {
        const token = await s.acquire()
        most = Math.max(most, ++inside)
        t.ok(token === 0 || token === 1, 'a token in 0 … nr-1')
        await tick(1)
        inside--
        await s.release(token)
      }
    }))
    t.ok(most <= 2, `at most 2 held at once (saw ${most})`)
  })

  t.test('RateLimit: the window and try() across Cluster clients', async t => {
    const [la, lb] = [client(), client()].map(c => RateLimit(c, 'api', 3, { prefix, timeUnit: 60000 }))
    const got = [await la.try(), await lb.try(), await la({ timeout: 0 }), await lb.try(), await la({ timeout: 0 })]
    t.same(got.map(x => typeof x), ['number', 'number', 'number', 'undefined', 'undefined'], 'three grants, then none')
  })

  t.test('prefixes and names in a cluster: braces refused before any call, odd names in one slot', async t => {
    const c = client()
    // A prefix starting with '}' leaves an empty hash tag: the keys of one
    // limiter would hash apart (CROSSSLOT at call time). Refused at once.
    t.throws(() => new RateLimiter(c, '}' + prefix, { limit: 5, window: 1000 }), { name: 'RangeError', message: /"prefix"/ })
    t.throws(() => new Mutex(c, 'k', { prefix: '}' + prefix }), { name: 'RangeError', message: /"options.prefix"/ })
    const limiter = new RateLimiter(c, prefix + ':names', { limit: 2, window: 60000 })
    t.equal((await limiter.consume('\uD800')).allowed, true, 'a RateLimiter works')
    t.equal((await limiter.consume('\uDBFF')).allowed, true)
    t.equal((await limiter.consume('\uD800')).remaining, 0, 'one bucket per lone surrogate')
    for (const key of ['a}b', '{x}', '\uD800', 'x\uDFFFy']) {
      const m = new Mutex(c, key, { prefix })
      const other = new Mutex(client(), key, { prefix })
      t.type(await m.lockAsync(), 'number', `Mutex ${JSON.stringify(key)}: granted, no CROSSSLOT`)
      const waiting = other.lockAsync()
      await until(async () => (await m.nrWaiting()) === 1, 'a waiter on another client')
      t.equal(await m.unlock(), true)
      t.type(await waiting, 'number', 'handed over')
      t.equal(await other.unlock(), true)
    }
  })

  t.test('LockManager: a prefix in one slot (names built in the scripts), hand-off, steal and query across Cluster clients', async t => {
    const lp = prefix + '-locks'
    const [a, b] = [new LockManager(client(), lp), new LockManager(client(), lp)]
    t.teardown(() => Promise.all([a.close(), b.close()]))
    const names = ['order:1', 'a}b', '{x}', '\uD800', 'x\uDFFFy']
    for (const name of names) {
      const hold = []
      let release
      const held = new Promise(resolve => { release = resolve })
      const first = a.request(name, async lock => { hold.push(lock.fence); await held })
      await until(async () => (await a.query()).held.some(h => h.name === name), 'the first grant')
      const second = b.request(name, lock => { hold.push(lock.fence) })
      await until(async () => (await b.query()).pending.some(p => p.name === name), 'the request on the other client to queue')
      release()
      await Promise.all([first, second])
      t.ok(hold.length === 2 && hold[1] > hold[0], `${JSON.stringify(name)}: handed over, fences grow, no CROSSSLOT`)
    }
    let started
    const running = new Promise(resolve => { started = resolve })
    const robbed = a.request('steal', () => { started(); return new Promise(() => {}) })
    robbed.catch(() => {})
    await running
    t.equal(await b.request('steal', { steal: true }, lock => lock.mode), 'exclusive', 'the steal is granted')
    const err = await robbed.catch(e => e)
    t.ok(err instanceof DOMException && err.name === 'AbortError', 'the robbed request on the other client rejects with AbortError')
    t.same(await a.query(), { held: [], pending: [] })
    const admin = new Redis(nodes[0].port, nodes[0].host)
    const slot = await admin.cluster('KEYSLOT', `{${lp}:locks}:f`)
    admin.disconnect()
    const keys = []
    const c = client()
    await c.ping() // connects, and lists the masters
    for (const node of c.nodes('master')) keys.push(...await node.keys(`*${lp}*`))
    t.same(keys, [`{${lp}:locks}:f`], 'only the fence counter at rest, on the master of slot ' + slot)
  })

  t.test('an allkeys-* policy on any master is refused', async t => {
    const admins = nodes.map(n => new Redis(n.port, n.host))
    t.teardown(async () => {
      for (const a of admins) { await a.config('SET', 'maxmemory-policy', 'noeviction'); a.disconnect() }
    })
    await admins[2].config('SET', 'maxmemory-policy', 'allkeys-lfu')
    const err = await new Mutex(client(), 'evict', { prefix }).lockAsync().catch(e => e)
    t.equal(err.code, 'ERR_SABSYNC_REDIS')
    t.match(err.message, /allkeys-lfu/)
  })
}
