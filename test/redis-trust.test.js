'use strict'
// sabsync/redis against what may reach it besides its own scripts: a grant
// forged by a client that can only PUBLISH, a grant that reaches a process
// stalled past its lease, values written into an object's state by another
// program, a server that evicts, a limit asked for room now. A server of
// this file's own (CONFIG SET, CLIENT PAUSE).
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { redisSuite, tick, until } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimit, RateLimiter } = require('../lib/redis')

redisSuite(t, async s => {
  const { url, client, admin } = s

  // MONITOR shows an attacker the take of every waiter: its id and its
  // client's id, which names the wake channel (PSUBSCRIBE sabsync:wake:*
  // shows the messages). It forges a grant on that channel, in the form a
  // granting script publishes and in the form that once carried the fence.
  async function forge (t, call, check) {
    const monitor = await s.monitor()
    const takes = []
    monitor.on('monitor', (time, args) => {
      // EVALSHA sha 5 M Q B L F <check> <waiter id> <client id> …
      if (/^eval(sha)?$/i.test(args[0]) && args.length >= 14 && /^[0-9a-f]+:[0-9a-z]+$/.test(args[9])) takes.push(args.slice(9, 11))
    })
    const waiting = call()
    let settled = false
    waiting.then(() => { settled = true }, () => { settled = true })
    await until(() => takes.length > 0, 'MONITOR to show the take')
    const [wid, hubId] = takes[0]
    const beats = () => monitorBeats
    let monitorBeats = 0
    monitor.on('monitor', (time, args) => { if (/^eval(sha)?$/i.test(args[0]) && args[9] === hubId) monitorBeats++ })
    await check()
    await until(async () => Number((await admin.pubsub('NUMSUB', 'sabsync:wake:' + hubId))[1]) === 1, 'the waiter\'s client to subscribe')
    // The attacker may publish on wake channels and do nothing else: no
    // key, no other command (an ACL user of its own).
    await admin.acl('SETUSER', 'wake-forger', 'reset', 'on', 'nopass', 'resetchannels', '&sabsync:wake:*', '+publish')
    const publisher = client({ username: 'wake-forger', password: 'x', enableReadyCheck: false })
    await t.rejects(publisher.get('anything'), /NOPERM/, 'the attacker cannot read or write a key')
    for (const message of [wid, `${wid} 0 ${Date.now() * 1000 + 1e9} 5000`, `${wid} 1 1 5000`]) {
      const before = beats()
      t.equal(await publisher.publish('sabsync:wake:' + hubId, message), 1, 'the waiter\'s client hears the forged grant')
      // The waiter asks the server (a beat) and believes its answer.
      await until(() => beats() > before, 'the waiter to ask the server')
      await tick(20)
      t.notOk(settled, `the waiter did not take "${message.slice(0, 40)}" for a grant`)
    }
    monitor.disconnect()
    return { waiting } // not the promise itself: an async function would wait for it
  }

  s.test('a forged wake-up grants nothing: the waiter asks the server', async (t, { opts }) => {
    const [a, b] = [client(), client()]
    const holder = new Mutex(a, 'forged', opts())
    const waiter = new Mutex(b, 'forged', opts())
    const fence = await holder.lockAsync()
    const { waiting } = await forge(t, () => waiter.lockAsync(), async () => {
      await until(async () => (await holder.nrWaiting()) === 1, 'the waiter to queue')
    })
    t.equal(holder.isHeld, true, 'the holder still holds')
    t.equal(waiter.isHeld, false, 'the waiter does not believe it holds')
    t.equal(await holder.unlock(), true)
    const got = await waiting
    t.ok(got > fence, 'the real grant comes with the server\'s fence, larger than the holder\'s')
    t.ok(got < fence + 1e9, 'not the forged one')
    t.equal(await waiter.unlock(), true)
  })

  s.test('a forged wake-up gives no Sema token', async (t, { opts }) => {
    const [a, b] = [client(), client()]
    const sa = new Sema(a, 'forged', 1, opts())
    const sb = new Sema(b, 'forged', 1, opts())
    const token = await sa.acquire()
    const { waiting } = await forge(t, () => sb.acquire(), async () => {
      await until(async () => (await sa.nrWaiting()) === 1, 'the waiter to queue')
    })
    await sa.release(token)
    t.equal(await waiting, 0, 'the real grant')
    await sb.release()
  })

  s.test('a grant that reaches a process stalled past its lease is not believed', async (t, { prefix, opts }) => {
    const key = 'stalled'
    const holder = new Mutex(client(), key, opts({ lease: 60000 }))
    const next = new Mutex(client(), key, opts({ lease: 60000, heartbeat: 1000 }))
    await holder.lockAsync()
    const child = fork(path.join(__dirname, 'fixtures', 'redis', 'stalled-waiter.js'), [url, key, prefix],
      { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
    t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
    const box = []
    child.on('message', m => {
      if (m && m.op === 'error') t.fail('the child failed: ' + m.message)
      box.push(m)
    })
    const got = what => until(() => box.some(what), 'the child to say ' + what, 30000).then(() => box.find(what))
    await got(m => m === 'queued')
    await until(async () => (await holder.nrWaiting()) === 1, 'the child to queue')
    // Its wake channel is subscribed, so the hint reaches it (a lapsed
    // grant whose hint was lost reads as a lost place: ERR_SABSYNC_REDIS).
    await until(async () => (await admin.pubsub('CHANNELS', 'sabsync:wake:*')).length === 1, 'the child to subscribe')
    const nextWaiting = next.lockAsync()
    await until(async () => (await holder.nrWaiting()) === 2, 'the second waiter to queue')
    child.send('block')
    await got(m => m === 'blocking')
    // The child is granted now, with a lease of 600 ms it cannot see
    // until it wakes at 1500 ms; its lease lapses and the next is granted.
    t.equal(await holder.unlock(), true)
    const fence = await nextWaiting
    t.equal(next.isHeld, true)
    await got(m => m === 'awake')
    // The child asks, learns its grant lapsed, and queues again.
    await until(async () => box.some(m => m.op === 'granted') || (await next.nrWaiting()) === 1, 'the child to queue again')
    t.notOk(box.some(m => m.op === 'granted'), 'the child did not take the lapsed grant for its own')
    t.equal(next.isHeld, true, 'one holder')
    t.equal(await next.unlock(), true)
    const granted = await got(m => m.op === 'granted')
    t.ok(granted.fence > fence, 'the child holds only after the next holder left, with a larger fence')
    t.equal(granted.held, true)
    child.send('unlock')
    t.same(await got(m => m.op === 'unlocked'), { op: 'unlocked', ok: true })
  })

  s.test('values another program wrote into the state: a coded error, no token, no fence', async (t, { prefix, opts }) => {
    const r = client()
    const m = `{${prefix}:sema:bad}:m`
    for (const fl of ['7', '-3', 'x']) {
      // One slot held, one given back: the next grant pops the free list.
      await admin.hset(m, 'nr', 2, 'fz', 0, 'held', 1, 'nw', 0, 'seq', 0, 'top', 2)
      await admin.rpush(`{${prefix}:sema:bad}:f`, fl)
      const sema = new Sema(r, 'bad', 2, opts())
      const err = await sema.acquire({ timeout: 1000 }).catch(e => e)
      t.equal(err.code, 'ERR_SABSYNC_REDIS', `slot "${fl}" written for nr = 2: rejected`)
      t.match(err.message, /slot/, 'the message says what was wrong')
      await t.rejects(sema.release(), { code: 'ERR_SABSYNC_BAD_TOKEN' }, 'no token was handed out')
      await admin.del(m, `{${prefix}:sema:bad}:f`, `{${prefix}:sema:bad}:l`)
    }
    const mm = `{${prefix}:mutex:bad}:m`
    await admin.hset(mm, 'nr', 1, 'fz', 1, 'fence', '1e300', 'held', 0, 'nw', 0, 'seq', 0, 'h', '', 'hx', 0, 'hf', 0)
    const lock = new Mutex(r, 'bad', opts())
    const err = await lock.lockAsync().catch(e => e)
    t.equal(err.code, 'ERR_SABSYNC_REDIS', 'a fence that is not a safe positive integer: rejected')
    t.match(err.message, /fence/)
    t.equal(lock.isHeld, false)
    t.equal(lock.fence, undefined)
  })

  s.test('a reply that does not parse (a fence that is not a number) makes no holder', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    const holder = new Mutex(a, 'garbled', opts())
    const waiter = new Mutex(b, 'garbled', opts())
    await holder.lockAsync()
    const monitor = await s.monitor()
    let take = null
    monitor.on('monitor', (time, args) => {
      if (take === null && /^eval(sha)?$/i.test(args[0]) && args.length >= 14 && /^[0-9a-f]+:[0-9a-z]+$/.test(args[9])) take = args.slice(9, 11)
    })
    const waiting = waiter.lockAsync().catch(e => e)
    await until(() => take !== null, 'MONITOR to show the take')
    monitor.disconnect()
    const [wid, hubId] = take
    await until(async () => Number((await admin.pubsub('NUMSUB', 'sabsync:wake:' + hubId))[1]) === 1, 'the waiter to subscribe')
    // Another program makes the waiter the holder, with a fence that is
    // not a number, and wakes it.
    const m = `{${prefix}:mutex:garbled}:m`
    await admin.hset(m, 'h', wid, 'hx', Date.now() + 60000, 'hf', 'not-a-fence', 'nw', 0)
    await admin.del(`{${prefix}:mutex:garbled}:q`, `{${prefix}:mutex:garbled}:b`)
    await admin.publish('sabsync:wake:' + hubId, wid)
    const err = await waiting
    t.equal(err.code, 'ERR_SABSYNC_REDIS', 'the waiter rejects')
    t.match(err.message, /answered|granted/, 'saying what the server answered')
    t.equal(waiter.isHeld, false, 'and holds nothing')
    t.equal(waiter.fence, undefined)
  })

  s.test('no TTL on a key while its object is in use (a RateLimit\'s, never); an idle lock expires', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    const tag = `{${prefix}:sema:ttl}`
    const sa = new Sema(a, 'ttl', 2, opts())
    const sb = new Sema(b, 'ttl', 2, opts())
    await sa.acquire()
    await sa.acquire()
    const waiting = sb.acquire()
    await until(async () => (await sa.nrWaiting()) === 1, 'b to queue')
    for (const k of ['m', 'q', 'b', 'l']) t.equal(await admin.pttl(`${tag}:${k}`), -1, `${k}: no TTL while in use`)
    await sa.release()
    await sa.release()
    await sb.release(await waiting)
    t.ok(await admin.pttl(`${tag}:m`) > 0, 'the idle object keeps its counters, with a TTL')
    t.equal(await admin.exists(`${tag}:q`, `${tag}:b`, `${tag}:l`), 0, 'and nothing else')
    const lock = new Mutex(a, 'ttl', opts())
    await lock.lockAsync()
    t.equal(await admin.pttl(`{${prefix}:mutex:ttl}:m`), -1, 'a held Mutex: no TTL')
    await lock.unlock()
    t.equal(await admin.exists(`{${prefix}:mutex:ttl}:m`), 0, 'released, never waited for: no key left')
    // A RateLimit's log counts for a window after every grant: no TTL at all.
    const limit = RateLimit(a, 'ttl', 3, opts({ timeUnit: 200 }))
    await limit()
    await limit()
    t.equal(await admin.pttl(`{${prefix}:rate:ttl}:log`), -1, 'RateLimit log: no TTL')
    t.equal(await admin.exists(`{${prefix}:rate:ttl}:m`), 0, 'and no other key (its parameters are each caller\'s)')
    await new Promise(resolve => setTimeout(resolve, 250))
    await limit()
    t.equal(await admin.zcard(`{${prefix}:rate:ttl}:log`), 1, 'the log is trimmed to one window at every call')
  })

  s.test('an allkeys-* policy is refused, naming it, unless the risk is accepted', async (t, { opts }) => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru')
    t.teardown(() => admin.config('SET', 'maxmemory-policy', 'noeviction'))
    const r = client() // a new client: the policy is read once per client
    for (const [name, call] of [
      ['Mutex', () => new Mutex(r, 'evict', opts()).lockAsync()],
      ['Sema', () => new Sema(r, 'evict', 2, opts()).tryAcquire()],
      ['RateLimit', () => RateLimit(r, 'evict', 5, opts())()],
      ['RateLimiter', () => new RateLimiter(r, opts().prefix + ':evict-rl', { limit: 5, window: 1000 }).consume('k')]
    ]) {
      const err = await call().catch(e => e)
      t.equal(err.code, 'ERR_SABSYNC_REDIS', name + ': the first call rejects')
      t.match(err.message, /allkeys-lru/, 'naming the policy')
      t.match(err.message, /noeviction|volatile/, 'and what to do')
    }
    const m = new Mutex(r, 'evict', opts({ unsafeAllowEviction: true }))
    t.type(await m.lockAsync(), 'number', 'unsafeAllowEviction: true accepts the risk')
    await m.unlock()
    t.throws(() => new Mutex(r, 'evict', { unsafeAllowEviction: 1 }), { name: 'TypeError', message: /"options.unsafeAllowEviction"/ })
    await admin.config('SET', 'maxmemory-policy', 'volatile-lru')
    const r2 = client()
    const ok = new Mutex(r2, 'evict', opts())
    t.type(await ok.lockAsync(), 'number', 'volatile-lru: keys in use have no TTL, so it is accepted')
    await ok.unlock()
  })

  // A server that evicts: maxmemory just above what it uses, volatile-lru,
  // and a flood of keys with a TTL (an application's cache). A lock held
  // through the flood is never evicted: no second client gets it.
  s.test('a client that may not run INFO: the policy cannot be read, and the first call says so', async (t, { opts }) => {
    await admin.acl('SETUSER', 'no-info', 'reset', 'on', 'nopass', '~*', '&*', '+@all', '-info')
    const r = client({ username: 'no-info', password: 'x', enableReadyCheck: false })
    const err = await new Mutex(r, 'no-info', opts()).lockAsync().catch(e => e)
    t.equal(err.code, 'ERR_SABSYNC_REDIS')
    t.match(err.message, /could not read maxmemory_policy/)
    t.match(err.message, /unsafeAllowEviction/, 'and names the way out')
    const m = new Mutex(r, 'no-info', opts({ unsafeAllowEviction: true }))
    t.type(await m.lockAsync(), 'number', 'which works')
    await m.unlock()
  })

  s.test('volatile-lru under memory pressure: a held lock and token are never evicted', async (t, { prefix, opts }) => {
    const [a, b, flood] = [client(), client(), client()]
    const ma = new Mutex(a, 'pressure', opts())
    const mb = new Mutex(b, 'pressure', opts())
    const sa = new Sema(a, 'pressure', 1, opts())
    const sb = new Sema(b, 'pressure', 1, opts())
    await ma.lockAsync()
    await sa.acquire()
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))[1])
    await admin.config('SET', 'maxmemory', String(used + 2 * 1024 * 1024))
    await admin.config('SET', 'maxmemory-policy', 'volatile-lru')
    t.teardown(async () => {
      await admin.config('SET', 'maxmemory', '0')
      await admin.config('SET', 'maxmemory-policy', 'noeviction')
    })
    const value = 'x'.repeat(10000)
    let overlaps = 0
    for (let round = 0; round < 10; round++) {
      const p = flood.pipeline()
      for (let i = 0; i < 100; i++) p.set(`${prefix}-cache-${round}-${i}`, value, 'EX', 600)
      await p.exec()
      if (await mb.tryLock() !== false) overlaps++
      if (await sb.tryAcquire() !== undefined) overlaps++
    }
    const evicted = Number(/evicted_keys:(\d+)/.exec(await admin.info('stats'))[1])
    t.ok(evicted > 0, `the server evicted (${evicted} keys)`)
    t.equal(overlaps, 0, 'no second holder')
    t.equal(ma.isHeld, true)
    t.equal(await ma.unlock(), true, 'the lease survived')
    await sa.release()
  })

  // API.md, "RateLimit": timeout 0 grants exactly when the limit has room
  // now, whatever the round trip costs: here 100 ms of CLIENT PAUSE.
  s.test('RateLimit timeout 0 and try(): room now, however slow the round trip', async (t, { opts }) => {
    const r = client()
    const limit = RateLimit(r, 'slow', 2, opts({ timeUnit: 60000 }))
    await limit.nrWaiting()
    t.type(await limit({ timeout: 0 }), 'number', 'warm: the first call reads the policy')
    await admin.client('PAUSE', 100, 'WRITE')
    const t0 = performance.now()
    const got = await limit.try()
    t.ok(performance.now() - t0 >= 90, 'the round trip took the pause')
    t.type(got, 'number', 'an idle limiter with room: granted anyway')
    await admin.client('PAUSE', 100, 'WRITE')
    t.equal(await limit({ timeout: 0 }), undefined, 'a full limiter: undefined')
    t.equal(await limit.nrWaiting(), 0, 'nothing recorded for it')
  })
}, { own: true })
