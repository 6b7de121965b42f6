'use strict'
// sabsync/redis when the server fails: restarted mid-wait, down, paused
// (CLIENT PAUSE, DEBUG SLEEP), connections killed (CLIENT KILL). A
// redis-server of this file's own, so the others' is never disturbed.
const t = require('tap')
const { redisSuite, tick, until, timed } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimit, RateLimiter } = require('../lib/redis')
const { commands, direct } = require('../lib/redis/scripts')
const { RedisLockBackend } = require('../lib/redis/locks')

redisSuite(t, async s => {
  // Refused connections while the server is down are expected: the
  // suite's clients of an own server ignore their 'error' events.
  const { server, client, admin } = s

  s.test('the server restarts mid-wait: the waiter rejects, the holder learns its lease is lost, fences keep growing', async t => {
    // A lease long enough that a holder starved of CPU for a second on a
    // loaded machine keeps it until the restart: with 1000 ms, a full
    // suite run at a load of ~17 once saw the wait resolve instead of
    // rejecting, most likely granted as the lease lapsed before the stop.
    const opts = { lease: 4000, heartbeat: 600 }
    const holder = new Mutex(client(), 'restart', opts)
    const waiter = new Mutex(client(), 'restart', opts)
    const f1 = await holder.lockAsync()
    const lost = new Promise(resolve => holder.lost.addEventListener('abort', resolve))
    const waiting = timed(waiter.lockAsync())
    await until(async () => (await holder.nrWaiting()) === 1, 'the waiter to queue')
    await server.stop()
    await server.start() // empty: no persistence
    const w = await waiting
    t.equal(w.error && w.error.code, 'ERR_SABSYNC_REDIS', 'the wait rejects: ' +
      (w.error ? w.error.message : `it resolved ${w.value} after ${Math.round(w.ms)} ms`))
    await lost
    t.equal(holder.lost.reason.code, 'ERR_SABSYNC_LEASE_LOST')
    t.equal(await holder.unlock(), false, 'unlock of the lost lease')
    const f2 = await waiter.lockAsync({ timeout: 10000 })
    t.ok(f2 > f1, 'a fence after the restart is larger than one before it')
    t.equal(await waiter.unlock(), true)
  })

  s.test('a take left unanswered by a server that dies is not granted by its empty successor', async t => {
    // ioredis sends the commands that a dropped connection left
    // unanswered again once it reconnects (autoResendUnfulfilledCommands,
    // on by default): a take sent to a server that dies before it answers
    // reaches the restarted, empty server, which grants it. The take must
    // not resolve with that grant (another holder may still think it
    // holds, as in the test above): it rejects, and gives the grant up.
    // CLIENT PAUSE holds the take unanswered; its reply means the pause
    // has begun, so this does not depend on timing.
    const c = client()
    // A lease longer than the wait below: a grant not given up would keep
    // the lock held past it.
    const m = new Mutex(c, 'resend', { lease: 60000 })
    // The object's first call (which reads the eviction policy) is done:
    // the take is the command the pause holds.
    await m.tryLock()
    await m.unlock()
    await admin.client('PAUSE', 30000, 'ALL')
    const sentAt = c.commandQueue.length
    const taking = timed(m.lockAsync({ timeout: 20000 }))
    await until(() => c.commandQueue.length > sentAt, 'the take to be sent')
    await server.stop()
    await server.start() // empty: no persistence
    const r = await taking
    t.equal(r.error && r.error.code, 'ERR_SABSYNC_REDIS', 'the take rejects: ' +
      (r.error ? r.error.message : `it resolved ${r.value} after ${Math.round(r.ms)} ms`))
    t.match(r.error && r.error.message, /dropped/, 'and says the connection dropped')
    // The grant the new server made was given up: the lock is free (the
    // guard waits for the clients to reconnect, well within the lease).
    const other = new Mutex(client(), 'resend', { lease: 4000 })
    await until(async () => (await other.tryLock()) !== false, 'the lock to be free', 30000)
    t.equal(await m.nrWaiting(), 0, 'nobody queued')
    t.equal(await other.unlock(), true)
  })

  s.test('the server is down: calls reject with ERR_SABSYNC_REDIS within their timeout', async t => {
    const queued = client()
    const offline = client({ enableOfflineQueue: false, retryStrategy: () => 1000 })
    await until(() => queued.status === 'ready' && offline.status === 'ready', 'the clients to connect')
    const holder = new Mutex(client(), 'down', { lease: 800 })
    await holder.lockAsync()
    const lost = new Promise(resolve => holder.lost.addEventListener('abort', resolve))
    await server.stop()
    await until(() => queued.status !== 'ready' && offline.status !== 'ready', 'the clients to notice')
    const m = new Mutex(queued, 'down', { commandTimeout: 400 })
    // All at once, each timed from its start.
    const calls = {
      'lockAsync({ timeout: 300 })': [timed(m.lockAsync({ timeout: 300 })), 300],
      'tryLock() (commandTimeout 400)': [timed(m.tryLock()), 400],
      'Sema acquire({ timeout: 300 })': [timed(new Sema(queued, 'down', 2).acquire({ timeout: 300 })), 300],
      'RateLimit({ timeout: 300 })': [timed(RateLimit(queued, 'down', 5)({ timeout: 300 })), 300],
      'nrWaiting() (commandTimeout 400)': [timed(m.nrWaiting()), 400]
    }
    for (const [name, [p, ms]] of Object.entries(calls)) {
      const r = await p
      t.equal(r.error && r.error.code, 'ERR_SABSYNC_REDIS', name + ' rejects')
      t.ok(r.ms < ms + 2000, `${name}: within its timeout (${r.ms.toFixed(0)} ms)`)
    }
    const r = await timed(new Mutex(offline, 'down').lockAsync({ timeout: 5000 }))
    t.equal(r.error.code, 'ERR_SABSYNC_REDIS')
    t.match(r.error.cause.message, /enableOfflineQueue/, 'the client\'s own error is the cause')
    t.equal((await lost).type, 'abort', 'a holder that cannot renew learns its lease is lost')
    t.equal(await holder.unlock(), false)
    await server.start()
  })

  s.test('CLIENT PAUSE: a timeout answers in time, and nothing is granted twice', async t => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'pause', { lease: 5000 })
    const mb = new Mutex(b, 'pause', { lease: 5000 })
    await ma.lockAsync()
    // b must be connected before the server stops answering: a client
    // still in its ready check counts as not connected, whose take fails
    // at the deadline instead of timing out (queue.js).
    await until(() => b.status === 'ready', 'the waiter\'s client to connect')
    await admin.client('PAUSE', 1200, 'ALL')
    const r = await timed(mb.lockAsync({ timeout: 300 }))
    t.equal(r.value, false, 'a timeout answers false while the server is paused')
    t.ok(r.ms < 300 + 2000, `in time (${r.ms.toFixed(0)} ms)`)
    t.equal(await ma.unlock(), true, 'the holder\'s unlock waits for the server, then succeeds')
    t.equal(await mb.nrWaiting(), 0, 'the timed-out waiter left the queue')
    const f = await mb.tryLock()
    t.type(f, 'number', 'the lock is free, held by nobody')
    t.equal(await ma.tryLock(), false)
    t.equal(await mb.unlock(), true)
  })

  // An unlock of a lock taken while free is the one-key leaveFree, and, if
  // someone queued meanwhile, leave after it: both under the one bound of
  // commandTimeout, which a paused server must not stretch.
  s.test('CLIENT PAUSE: an unlock of a lock taken while free rejects within commandTimeout', async t => {
    const a = client()
    const ma = new Mutex(a, 'pause-unlock', { lease: 5000, commandTimeout: 300 })
    await ma.lockAsync() // the object's first take reads the policy: the general take
    t.equal(await ma.unlock(), true)
    await ma.lockAsync() // found free last time: the one-key take
    await admin.client('PAUSE', 1500, 'ALL')
    const t0 = performance.now() // before the call: its bound starts inside it
    const err = await ma.unlock().then(v => v, e => e)
    const ms = performance.now() - t0
    t.equal(err.code, 'ERR_SABSYNC_REDIS', 'no reply while paused: ERR_SABSYNC_REDIS')
    t.match(err.message, /no reply from Redis within 300 ms \(release on/, 'naming the bound and the call')
    t.ok(ms >= 299 && ms < 300 + 1000, `within commandTimeout and slack for a loaded machine (${ms.toFixed(0)} ms)`)
    t.equal(ma.isHeld, false, 'nothing is held after the unlock')
    await tick(1500) // the pause ends; the lease runs out on the server
  })

  // A release goes on after its caller's bound: the waiter gets the lock
  // when the server answers, not when the holder's lease runs out.
  s.test('CLIENT PAUSE: an unlock that ran out still hands the lock to the waiter once the server answers', async t => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'pause-handover', { lease: 60000, commandTimeout: 200 })
    const mb = new Mutex(b, 'pause-handover', { lease: 60000 })
    await ma.lockAsync() // the general take
    t.equal(await ma.unlock(), true)
    await ma.lockAsync() // found free last time: the one-key take, whose leave is the one-key leave
    const waiter = timed(mb.lockAsync())
    await until(async () => await ma.nrWaiting() === 1, 'the waiter to queue')
    await admin.client('PAUSE', 600, 'ALL')
    const r = await timed(ma.unlock().then(v => v, e => e))
    t.equal(r.value.code, 'ERR_SABSYNC_REDIS', 'the unlock runs out while the server is paused')
    const w = await waiter
    t.ok(w.value > 0, 'the waiter is granted')
    t.ok(w.ms < 600 + 10000, `once the pause ends, not when the 60 s lease runs out (${w.ms.toFixed(0)} ms after it asked)`)
    t.equal(await mb.unlock(), true)
  })

  // The calls made where nobody waits send their scripts as EVALSHA
  // themselves (lib/redis/scripts.js, sendScript); a server that lost its
  // scripts (SCRIPT FLUSH, a restart, a failover) answers NOSCRIPT, and
  // the call goes again as EVAL.
  s.test('CLIENT PAUSE past a lock manager\'s lease: its renewal, held up by its policy check, is not sent after its leave', async (t, { prefix }) => {
    // The renewal reads the eviction policy first (INFO memory, due every
    // lease/3); the pause holds that up past the lease, the manager loses
    // its lock and sends its leave behind the INFO. When INFO answers, the
    // renewal, whose bound has passed, must not go out: it would follow
    // the leave and put the manager back in T:a, with nobody to take it
    // out. (A stopped and continued holder did so on CI.)
    const lease = 400
    const m = new RedisLockBackend(client(), prefix, { lease })
    t.teardown(() => m.close())
    const stolen = new Promise(resolve => m.watch((ticket, why) => resolve({ ticket, why })))
    const ticket = await m.request('late', true, 0)
    t.ok(ticket > 0, 'granted')
    await admin.client('PAUSE', 1500, 'ALL')
    const s = await stolen
    t.equal(s.ticket, ticket, 'the lock is lost')
    t.match(s.why, /no renewal of the lease \(400 ms\) was confirmed in time/, 'for want of a renewal: ' + s.why)
    // Settled once the pause ended: the leave, then the renewal's INFO.
    const keys = async () => (await admin.keys(`*${prefix}*`)).sort()
    await until(async () => (await keys()).length === 1, 'no key but the counter', 5000).catch(async err => {
      const dump = {}
      for (const k of await keys()) dump[k] = await admin.type(k) === 'zset' ? await admin.zrange(k, 0, -1, 'WITHSCORES') : await admin.type(k)
      throw new Error(err.message + ': ' + JSON.stringify(dump))
    })
    t.same(await keys(), [`{${prefix}:locks}:f`], 'the leave was served: the fence counter alone')
    // The renewal would go out as soon as INFO answered, right after the
    // leave; without the check it was back within milliseconds.
    await new Promise(resolve => setTimeout(resolve, 2 * lease))
    t.same(await keys(), [`{${prefix}:locks}:f`], 'two leases later too: the manager is not back in T:a')
  })

  s.test('SCRIPT FLUSH: a free lock, a RateLimit call and a RateLimiter call send their scripts again, and work', async t => {
    const a = client()
    const m = new Mutex(a, 'flush', { lease: 60000 })
    const limit = RateLimit(a, 'flush', 1000)
    const limiter = new RateLimiter(a, 'flush', { limit: 100, window: 60000 })
    for (let i = 0; i < 2; i++) { // the first take reads the policy (the general take); the second is the one-key take
      await m.lockAsync()
      await m.unlock()
    }
    await limit()
    await limiter.consume('k')
    const names = ['sabsync2TakeFree', 'sabsync2LeaveFree', 'sabsync6Rate', 'sabsync10KeyedRate']
    const shas = names.map(n => direct[n].sha)
    t.same(await admin.script('EXISTS', ...shas), [1, 1, 1, 1], 'the four scripts are known to the server')
    await admin.script('FLUSH')
    t.same(await admin.script('EXISTS', ...shas), [0, 0, 0, 0], 'and forgotten')
    t.ok(await m.lockAsync() > 0, 'a free lock is granted')
    t.equal(await m.unlock(), true, 'and given back')
    t.type(await limit(), 'number', 'a RateLimit call is granted')
    t.equal((await limiter.consume('k')).allowed, true, 'a RateLimiter call is allowed')
    t.same(await admin.script('EXISTS', ...shas), [1, 1, 1, 1], 'each went again as EVAL, which loaded it')
  })

  s.test('a take that gave up is not sent again (NOSCRIPT) after the leave it sent', async t => {
    const a = client()
    const m = new Mutex(a, 'noscript-late', { lease: 60000 })
    for (let i = 0; i < 2; i++) { // as above: the next take is the one-key take
      await m.lockAsync()
      await m.unlock()
    }
    await admin.script('FLUSH')
    // The leave's script is known, the take's is not: the server answers
    // the take NOSCRIPT, then runs the leave. A take sent again after that
    // would hold the lock for its lease, for a caller that has gone.
    await admin.script('LOAD', commands.sabsync5Leave.lua)
    await admin.client('PAUSE', 600, 'ALL')
    const r = await timed(m.lockAsync({ timeout: 100 }))
    t.equal(r.value, false, 'the timed lock gives up while the server is paused')
    await until(async () => (await admin.script('EXISTS', direct.sabsync2TakeFree.sha))[0] === 0 &&
      (await admin.ping()) === 'PONG', 'the pause to end')
    await tick(200) // a take sent again would reach the server by now
    const other = new Mutex(client(), 'noscript-late', { lease: 60000 })
    t.type(await other.tryLock(), 'number', 'the lock is free: nobody holds it for the caller that gave up')
    t.equal(await other.unlock(), true)
    t.same(await admin.script('EXISTS', direct.sabsync2TakeFree.sha), [0], 'the take was not sent again as EVAL')
  })

  s.test('a RateLimit call aborted and a RateLimiter call that ran out are not sent again (NOSCRIPT) once they gave up', async t => {
    const a = client()
    const limit = RateLimit(a, 'noscript-gone', 1000)
    const limiter = new RateLimiter(a, 'noscript-gone', { limit: 2, window: 60000, commandTimeout: 100 }) // a consume adds 30 s
    await limit() // the first calls read the policy: the next are the scripts alone
    await limiter.consume('k')
    const [log] = await admin.keys('*rate:noscript-gone}:log')
    const [zset] = await admin.keys('{noscript-gone}:rlz')
    const grants = await admin.zcard(log)
    const tat = await admin.zscore(zset, 'k')
    await admin.script('FLUSH')
    await admin.client('PAUSE', 600, 'ALL')
    const ac = new AbortController()
    setTimeout(() => ac.abort(new Error('gave up')), 100)
    await t.rejects(limit({ signal: ac.signal }), /gave up/, 'the RateLimit call is aborted while the server is paused')
    await t.rejects(limiter.consume('k'), { code: 'ERR_SABSYNC_REDIS', message: /no reply from Redis within 100 ms/ },
      'the RateLimiter call runs out of its commandTimeout')
    const shas = [direct.sabsync6Rate.sha, direct.sabsync10KeyedRate.sha]
    await until(async () => (await admin.ping()) === 'PONG', 'the pause to end')
    await tick(200) // a call sent again as EVAL would have run by now
    t.same(await admin.script('EXISTS', ...shas), [0, 0], 'neither was sent again as EVAL')
    t.equal(await admin.zcard(log), grants, 'the RateLimit log holds no grant for the call that gave up')
    t.equal(await admin.zscore(zset, 'k'), tat, 'the RateLimiter bucket is as the last answered call left it')
  })

  s.test('a call that gives up on the eviction check does not pass its short bound to a call that shares it', async (t, { opts }) => {
    // The check (INFO memory) is one per client, shared by the calls made
    // while it runs. Its first asker here gives up after 20 ms while the
    // server is paused; the calls with no timeout that joined it must wait
    // out the pause and be served, not fail with the first call's 20 ms.
    const c = client()
    await until(() => c.status === 'ready', 'the client to connect')
    const [sema, limit] = [new Sema(c, 'evict-bound', 2, opts()), new RateLimit(c, 'evict-bound', 10, opts())]
    await admin.client('PAUSE', 300, 'ALL')
    const short = sema.acquire({ timeout: 20 })
    const long = [sema.acquire(), limit()]
    t.equal(await short, undefined, 'a timeout while the check is unanswered')
    const [token, at] = await Promise.all(long)
    t.equal(token, 0, 'the Sema call with no timeout is served once the pause ends')
    t.type(at, 'number', 'and so is the RateLimit\'s')
    await sema.release(token)
  })

  s.test('DEBUG SLEEP: a timeout answers in time; without one, commandTimeout bounds the call', async t => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'sleep', { lease: 5000 })
    const mb = new Mutex(b, 'sleep', { lease: 5000, commandTimeout: 300 })
    await ma.lockAsync()
    await until(() => b.status === 'ready', 'the waiter\'s client to connect') // as in CLIENT PAUSE
    admin.debug('SLEEP', 1.2).catch(() => {})
    await tick(50)
    const r = await timed(mb.lockAsync({ timeout: 200 }))
    t.equal(r.value, false)
    t.ok(r.ms < 200 + 2000, `in time (${r.ms.toFixed(0)} ms)`)
    const r2 = await timed(mb.tryLock())
    t.equal(r2.error && r2.error.code, 'ERR_SABSYNC_REDIS', 'no reply within commandTimeout')
    t.ok(r2.ms < 300 + 2000, `in time (${r2.ms.toFixed(0)} ms)`)
    t.equal(await ma.unlock(), true)
    t.equal(ma.lost.aborted, false, 'the holder never lost its lease')
    await until(async () => (await mb.tryLock()) !== false, 'the lock to be free')
    t.equal(await mb.unlock(), true)
  })

  s.test('CLIENT KILL of a waiter\'s wake connection: the grant still reaches it', async t => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'kill-sub')
    const mb = new Mutex(b, 'kill-sub', { heartbeat: 1500 })
    const f1 = await ma.lockAsync()
    const waiting = mb.lockAsync({ timeout: 20000 })
    await until(async () => (await admin.client('LIST', 'TYPE', 'pubsub')).trim() !== '', 'the wake connection')
    await until(async () => (await ma.nrWaiting()) === 1, 'the waiter to queue')
    t.ok(await admin.client('KILL', 'TYPE', 'pubsub') >= 1, 'killed')
    t.equal(await ma.unlock(), true) // published to nobody
    const f2 = await waiting
    t.ok(f2 > f1, 'granted all the same')
    t.equal(await mb.unlock(), true)
  })

  s.test('CLIENT KILL of a holder\'s and a waiter\'s connections: they reconnect, the lease holds, the waiter is served', async t => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'kill-main', { lease: 1000 })
    const mb = new Mutex(b, 'kill-main', { lease: 1000 })
    await ma.lockAsync()
    const waiting = mb.lockAsync({ timeout: 20000 })
    await until(async () => (await ma.nrWaiting()) === 1, 'the waiter to queue')
    const [ida, idb] = [await a.client('ID'), await b.client('ID')]
    await admin.client('KILL', 'ID', ida)
    await admin.client('KILL', 'ID', idb)
    await tick(2500) // past two leases: renewals go on over the new connection
    t.equal(ma.lost.aborted, false, 'the holder kept its lease')
    t.equal(await ma.unlock(), true)
    t.type(await waiting, 'number', 'the waiter is served')
    t.equal(await mb.unlock(), true)
  })

  s.test('one script that hands 250 tokens over at once grants each once', async (t, { opts }) => {
    const [a, b] = [client(), client()]
    const nr = 250
    const sa = new Sema(a, 'sweep', nr, opts({ lease: 4000 }))
    const sb = new Sema(b, 'sweep', nr, opts({ lease: 10000, heartbeat: 60000 }))
    for (let i = 0; i < nr; i++) await sa.acquire()
    const waits = []
    for (let i = 0; i < nr; i++) waits.push(sb.acquire({ timeout: 120000 }))
    await until(async () => (await sb.nrWaiting()) === nr, 'all to queue')
    // a's leases are no longer renewed, and no script runs until they
    // have all run out: the first one after the pause grants all 250.
    a.disconnect()
    await admin.client('PAUSE', 5000, 'WRITE')
    const got = await Promise.all(waits)
    t.equal(got.filter(x => typeof x === 'number').length, nr, 'every waiter got a token')
    t.same([...got].sort((x, y) => x - y), [...Array(nr).keys()], 'the tokens 0 ... nr-1, each once')
    for (const token of got) await sb.release(token)
    t.equal(await sb.nrWaiting(), 0)
  })
}, { own: true })
