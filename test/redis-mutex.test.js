'use strict'
// sabsync/redis Mutex against a real redis-server, several clients in one
// process standing for several machines (test/redis-processes.test.js
// uses real processes; test/redis-faults.test.js stops and pauses servers).
const t = require('tap')
const path = require('path')
const { spawnSync } = require('child_process')
const { redisSuite, tick, until } = require('./fixtures/redis/suite')
const { Mutex, Sema } = require('../lib/redis')
const { direct } = require('../lib/redis/scripts')

const root = path.join(__dirname, '..')

redisSuite(t, async s => {
  const { url, client } = s

  s.test('arguments are checked, and named', async (t, { prefix, opts }) => {
    const r = client()
    t.throws(() => new Mutex(undefined, 'k'), { name: 'TypeError', message: /"redis" argument/ })
    t.throws(() => new Mutex({}, 'k'), { name: 'TypeError', message: /"redis" argument must be an ioredis client/ })
    t.throws(() => new Mutex(r, 5), { name: 'TypeError', message: /"key" argument/ })
    t.throws(() => new Mutex(r, ''), { name: 'RangeError', message: /"key" argument/ })
    t.throws(() => new Mutex(r, 'k', 'x'), { name: 'TypeError', message: /"options" argument/ })
    t.throws(() => new Mutex(r, 'k', { lease: -1 }), { name: 'RangeError', message: /"options.lease"/ })
    t.throws(() => new Mutex(r, 'k', { lease: 1.5 }), { name: 'RangeError', message: /"options.lease"/ })
    t.throws(() => new Mutex(r, 'k', { lease: '10' }), { name: 'TypeError', message: /"options.lease"/ })
    t.throws(() => new Mutex(r, 'k', { heartbeat: 0 }), { name: 'RangeError', message: /"options.heartbeat"/ })
    t.throws(() => new Mutex(r, 'k', { commandTimeout: Infinity }), { name: 'RangeError', message: /"options.commandTimeout"/ })
    t.throws(() => new Mutex(r, 'k', { prefix: 'a{b' }), { name: 'RangeError', message: /"options.prefix"/ })
    const m = new Mutex(r, 'args', opts())
    await t.rejects(m.lockAsync({ timeout: '1' }), { name: 'TypeError', message: /"options.timeout"/ })
    await t.rejects(m.lockAsync({ timeout: NaN }), { name: 'TypeError', message: /"options.timeout"/ })
    await t.rejects(m.lockAsync({ signal: {} }), { name: 'TypeError', message: /"options.signal"/ })
    await t.rejects(m.lockAsync(null), { name: 'TypeError', message: /"options"/ })
    await t.rejects(m.runExclusive(5), { name: 'TypeError', message: /"fn"/ })
    await t.rejects(m.unlock(), { code: 'ERR_SABSYNC_NOT_OWNER' })
    t.equal(await m.nrWaiting(), 0)
  })

  s.test('one holder at a time across clients; fences grow with every grant', async (t, { prefix, opts }) => {
    const key = 'exclusive'
    const locks = [client(), client(), client()].map(c => new Mutex(c, key, opts()))
    let inside = 0
    let overlaps = 0
    const fences = []
    await Promise.all(locks.map(async m => {
      for (let i = 0; i < 25; i++) {
        const fence = await m.lockAsync()
        if (++inside !== 1) overlaps++
        fences.push(fence)
        await tick(Math.random() < 0.5 ? 0 : 1)
        inside--
        t.equal(await m.unlock(), true)
      }
    }))
    t.equal(overlaps, 0, 'no two holders at once')
    t.equal(fences.length, 75)
    t.ok(fences.every((f, i) => Number.isSafeInteger(f) && f > 0 && (i === 0 || f > fences[i - 1])), 'fences grow in grant order')
  })

  s.test('waiters are served in arrival order across clients, and calls on one Mutex in turn', async (t, { prefix, opts }) => {
    const [a, b, c] = [client(), client(), client()]
    const holder = new Mutex(a, 'fifo', opts())
    const mb = new Mutex(b, 'fifo', opts())
    const mc = new Mutex(c, 'fifo', opts())
    const first = await holder.lockAsync()
    const order = []
    const pending = []
    // b, c, b, c, b: each queued before the next arrives.
    const who = [['b', mb], ['c', mc], ['b', mb], ['c', mc], ['b', mb]]
    for (let i = 0; i < who.length; i++) {
      const [name, m] = who[i]
      pending.push(m.lockAsync().then(async fence => {
        order.push({ i, name, fence })
        await tick(1)
        await m.unlock()
      }))
      await until(async () => (await holder.nrWaiting()) === i + 1, 'waiter ' + i + ' to queue')
    }
    t.equal(await holder.unlock(), true)
    await Promise.all(pending)
    t.same(order.map(o => o.i), [0, 1, 2, 3, 4], 'served in arrival order')
    t.ok(order.every((o, i) => o.fence > (i === 0 ? first : order[i - 1].fence)), 'each grant a larger fence')
  })

  s.test('tryLock, timeout and abort leave nothing behind', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'try', opts())
    const mb = new Mutex(b, 'try', opts())
    t.type(await ma.tryLock(), 'number')
    t.equal(await mb.tryLock(), false, 'tryLock of a held lock')
    t.equal(await mb.lockAsync({ timeout: 0 }), false, 'timeout 0 is a try')
    const t0 = performance.now()
    t.equal(await mb.lockAsync({ timeout: 150 }), false, 'a timeout is an answer')
    t.ok(performance.now() - t0 >= 149, 'not before the timeout')
    const ac = new AbortController()
    const p = mb.lockAsync({ signal: ac.signal })
    await until(async () => (await ma.nrWaiting()) === 1, 'the waiter to queue')
    ac.abort(new Error('stop'))
    await t.rejects(p, { message: 'stop' }, 'an abort rejects with signal.reason')
    await t.rejects(mb.lockAsync({ signal: AbortSignal.abort(new Error('already')) }), { message: 'already' })
    await until(async () => (await ma.nrWaiting()) === 0, 'the aborted waiter to leave')
    const next = mb.lockAsync()
    await until(async () => (await ma.nrWaiting()) === 1, 'a new waiter to queue')
    t.equal(await ma.unlock(), true)
    t.type(await next, 'number', 'the live waiter gets it, the gone ones are skipped')
    t.equal(await mb.unlock(), true)
    t.same(await a.keys(`{${prefix}:mutex:try}:*`), [`{${prefix}:mutex:try}:m`], 'an idle lock keeps one key (its fence)')
    t.same(await a.hmget(`{${prefix}:mutex:try}:m`, 'held', 'nw', 'h'), ['0', '0', ''], 'holding nothing, with nobody queued')
    t.ok(await a.pttl(`{${prefix}:mutex:try}:m`) > 0, 'which expires')
  })

  s.test('runExclusive passes { fence, signal } and unlocks', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'run', opts())
    const mb = new Mutex(b, 'run', opts())
    const r = await ma.runExclusive(async ({ fence, signal }) => {
      t.equal(fence, ma.fence)
      t.equal(signal.aborted, false)
      t.equal(await mb.tryLock(), false, 'held inside')
      return 42
    })
    t.equal(r, 42)
    t.equal(ma.fence, undefined, 'released after')
    await t.rejects(ma.runExclusive(() => { throw new Error('boom') }), { message: 'boom' })
    t.type(await mb.tryLock(), 'number', 'released after a throw too')
    const late = ma.lockAsync({ timeout: 1e12 }) // past setTimeout's reach: no limit, not an early answer
    await tick(50)
    t.equal(await mb.unlock(), true)
    t.type(await late, 'number')
    t.equal(await ma.unlock(), true)
    t.type(await mb.tryLock(), 'number')
    await t.rejects(ma.runExclusive(() => 1, { timeout: 50 }), { code: 'ERR_SABSYNC_TIMEOUT' })
    await mb.unlock()
  })

  s.test('a lease the server lost: lost aborts, unlock resolves false, the next waiter proceeds', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    const ma = new Mutex(a, 'lost', opts({ lease: 300 }))
    const mb = new Mutex(b, 'lost', opts({ lease: 300 }))
    t.equal(ma.lost.aborted, false, 'before any grant')
    const f1 = await ma.lockAsync()
    const lost = new Promise(resolve => ma.lost.addEventListener('abort', () => resolve(ma.lost.reason)))
    // What a restart without persistence does to the lock's state.
    await a.del(...await a.keys(`{${prefix}:mutex:lost}:*`))
    const reason = await lost
    t.equal(reason.code, 'ERR_SABSYNC_LEASE_LOST')
    const f2 = await mb.lockAsync({ timeout: 5000 })
    t.ok(f2 > f1, 'the next holder has a larger fence')
    t.equal(await ma.unlock(), false, 'unlock of a lost lease')
    t.equal(await mb.unlock(), true)
  })

  s.test('runExclusive rejects with ERR_SABSYNC_LEASE_LOST when the lease was lost before the unlock', async (t, { prefix, opts }) => {
    const a = client()
    const m = new Mutex(a, 'run-lost', opts({ lease: 300 }))
    let ran = false
    const err = await m.runExclusive(async ({ signal }) => {
      await a.del(...await a.keys(`{${prefix}:mutex:run-lost}:*`))
      await new Promise(resolve => signal.addEventListener('abort', resolve))
      ran = true
      return 'done'
    }).catch(e => e)
    t.equal(ran, true, 'fn ran to its end')
    t.equal(err.code, 'ERR_SABSYNC_LEASE_LOST', 'its result is not passed off as exclusive')
    t.equal(m.isHeld, false)
    await t.rejects(m.runExclusive(async ({ signal }) => {
      await a.del(...await a.keys(`{${prefix}:mutex:run-lost}:*`))
      await new Promise(resolve => signal.addEventListener('abort', resolve))
      throw new Error('fn failed')
    }), { message: 'fn failed' }, 'fn\'s own error wins')
    t.type(await m.tryLock(), 'number', 'the lock is free after both')
    t.equal(await m.unlock(), true)
  })

  s.test('the lease is renewed while the holder lives', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    // Renewed every 333 ms: only a stall of over 667 ms (this process or
    // the server) would lose it, which even a loaded machine should not see.
    const ma = new Mutex(a, 'renew', opts({ lease: 1000 }))
    const mb = new Mutex(b, 'renew', opts({ lease: 1000 }))
    await ma.lockAsync()
    await tick(3500)
    t.equal(ma.lost.aborted, false, 'held past several leases')
    t.equal(await mb.tryLock(), false)
    t.equal(await ma.unlock(), true)
  })

  s.test('a key holding something else: ERR_SABSYNC_REDIS with the cause, nothing written', async (t, { prefix, opts }) => {
    const a = client()
    const tag = `{${prefix}:mutex:wrongtype}`
    await a.set(tag + ':q', 'not a queue')
    const m = new Mutex(a, 'wrongtype', opts())
    // A free lock never reads its queue: taking it works, the key is left.
    const fence = await m.tryLock()
    t.type(fence, 'number', 'a free lock is taken without its queue')
    t.equal(await a.get(tag + ':q'), 'not a queue')
    // A call that would queue reads the queue's type first: it fails, and
    // the holder's state is untouched.
    const before = await a.hgetall(tag + ':m')
    const other = new Mutex(client(), 'wrongtype', opts())
    const e2 = await other.lockAsync({ timeout: 1000 }).catch(e => e)
    t.equal(e2.code, 'ERR_SABSYNC_REDIS', 'a waiter cannot queue')
    t.match(e2.cause.message, /WRONGTYPE/)
    t.match(e2.message, /wrongtype/, 'the message names the object')
    t.same(await a.hgetall(tag + ':m'), before, 'the lock\'s state is as it was')
    t.same((await a.keys(tag + ':*')).sort(), [tag + ':m', tag + ':q'], 'no other key was written')
    t.equal(await other.tryLock(), false, 'a try of the held lock still answers')
    t.equal(await m.unlock(), true)
    t.equal(await a.get(tag + ':q'), 'not a queue')
  })

  s.test('require("sabsync/redis") loads neither ioredis nor the addon; ESM gives the same', async (t, { prefix, opts }) => {
    const cjs = spawnSync(process.execPath, ['-e', `
      const r = require('sabsync/redis')
      const loaded = Object.keys(require.cache)
      console.log(JSON.stringify({ keys: Object.keys(r).sort(), loaded }))`], { cwd: root, encoding: 'utf8' })
    t.equal(cjs.status, 0, cjs.stderr)
    const { keys, loaded } = JSON.parse(cjs.stdout)
    t.same(keys, ['LockManager', 'Mutex', 'RateLimit', 'RateLimiter', 'SabsyncError', 'Sema', 'letGo'])
    t.notOk(loaded.some(f => f.includes('ioredis')), 'no ioredis')
    t.notOk(loaded.some(f => f.endsWith('.node') || f.endsWith(path.join('lib', 'native.js'))), 'no native addon')
    const esm = spawnSync(process.execPath, ['--input-type=module', '-e', `
      import * as r from 'sabsync/redis'
      import d from 'sabsync/redis'
      console.log(JSON.stringify({ keys: Object.keys(r).filter(k => k !== 'default').sort(), same: d.Mutex === r.Mutex }))`],
    { cwd: root, encoding: 'utf8' })
    t.equal(esm.status, 0, esm.stderr)
    t.same(JSON.parse(esm.stdout), { keys, same: true })
  })

  // Reply bounds and renewals share timers (lib/redis/common.js,
  // Deadlines), which stay armed once nothing is pending: they must not
  // hold the process, so it exits at once, not a commandTimeout (5 s) later.
  s.test('a process that waited, was served and quit its client exits, at once', async (t, { prefix, opts }) => {
    const r = spawnSync(process.execPath, ['-e', `
      const Redis = require('ioredis')
      const { Mutex, RateLimit } = require('sabsync/redis')
      const [a, b] = [new Redis(${JSON.stringify(url)}), new Redis(${JSON.stringify(url)})]
      ;(async () => {
        const ma = new Mutex(a, 'exit', { prefix: ${JSON.stringify(prefix)} })
        const mb = new Mutex(b, 'exit', { prefix: ${JSON.stringify(prefix)} })
        await ma.lockAsync()
        const p = mb.lockAsync()
        setTimeout(() => ma.unlock(), 50)
        await p
        await mb.unlock()
        await RateLimit(a, 'exit', 10, { prefix: ${JSON.stringify(prefix)} })()
        await Promise.all([a.quit(), b.quit()])
        console.log('done ' + Date.now())
      })()`], { cwd: root, encoding: 'utf8', timeout: 20000 })
    const exited = Date.now()
    t.equal(r.status, 0, r.stderr)
    const [done, at] = r.stdout.trim().split(' ')
    t.equal(done, 'done')
    t.ok(exited - Number(at) < 2500, `exited ${exited - Number(at)} ms after its last call (< 2500)`)
  })

  // Round trips, as the server sees them: MONITOR shows every command and
  // the connection it came from. Scripts are loaded by a first pass.
  s.test('round trips: lock, unlock, acquire, release are one EVALSHA each on the client\'s own connection; a woken waiter confirms with one more', async (t, { prefix, opts }) => {
    const name = 'rt-' + prefix
    const [a, b] = [client({ connectionName: name + 'a' }), client({ connectionName: name + 'b' })]
    const opt = opts({ heartbeat: 60000 }) // no heartbeat falls inside the counted part
    const [ma, mb] = [new Mutex(a, 'rt', opt), new Mutex(b, 'rt', opt)]
    const sema = new Sema(a, 'rt', 3, opt)
    const handOff = async () => {
      const waiting = mb.lockAsync()
      await until(async () => (await ma.nrWaiting()) === 1, 'b to queue')
      await ma.unlock()
      const fence = await waiting
      await mb.unlock()
      await ma.lockAsync()
      return fence
    }
    await ma.lockAsync()
    await ma.unlock()
    await sema.release(await sema.acquire())
    await ma.lockAsync()
    await handOff() // b's first wait opens its subscriber and beats once
    const addrOf = async c => /addr=(\S+)/.exec(await c.client('INFO'))[1]
    const [addrA, addrB] = [await addrOf(a), await addrOf(b)]
    const monitor = await s.monitor()
    const seen = { [addrA]: [], [addrB]: [] }
    monitor.on('monitor', (time, args, source) => { if (seen[source]) seen[source].push(args[0].toLowerCase() === 'echo' ? 'echo ' + args[1] : args[0].toLowerCase()) })
    // The commands c sent while fn ran, between two ECHOs of its own.
    let mark = 0
    const count = async (c, addr, fn) => {
      const [start, end] = ['echo s' + ++mark, 'echo e' + mark]
      await c.echo(start.slice(5))
      const r = await fn()
      await c.echo(end.slice(5))
      await until(() => seen[addr].includes(end), 'MONITOR to show ' + end)
      const all = seen[addr].splice(0)
      return { r, commands: all.slice(all.indexOf(start) + 1, all.indexOf(end)) }
    }
    await ma.unlock()
    t.same((await count(a, addrA, () => ma.lockAsync())).commands, ['evalsha'], 'a free lock: one EVALSHA')
    t.same((await count(a, addrA, () => ma.unlock())).commands, ['evalsha'], 'unlock: one EVALSHA')
    t.same((await count(a, addrA, () => ma.tryLock())).commands, ['evalsha'], 'tryLock: one EVALSHA')
    const acquired = await count(a, addrA, () => sema.acquire())
    t.same(acquired.commands, ['evalsha'], 'Sema acquire: one EVALSHA')
    const token = acquired.r
    t.same((await count(a, addrA, () => sema.release(token))).commands, ['evalsha'], 'Sema release: one EVALSHA')
    // b waits, a hands over: the wake-up is only a hint, so b's connection
    // carries its take and one beat, whose reply (the server's state) is
    // the grant and its fence.
    seen[addrB].length = 0
    const waiting = mb.lockAsync()
    await until(async () => (await ma.nrWaiting()) === 1, 'b to queue')
    await ma.unlock()
    const fence = await waiting
    t.type(fence, 'number')
    t.equal(mb.fence, fence)
    await b.echo('b-end')
    await until(() => seen[addrB].includes('echo b-end'), 'MONITOR to show b\'s end')
    t.same(seen[addrB], ['evalsha', 'evalsha', 'echo b-end'], 'the woken waiter sent its take, then one beat to confirm')
    await mb.unlock()
    const conns = (await s.admin.client('LIST')).split('\n').filter(l => l.includes(' name=' + name + 'a '))
    t.equal(conns.length, 1, 'a never waited: it has no connection but its own')
    monitor.disconnect()
  })

  // A free lock is taken and given back by one-key scripts (takeFree,
  // leaveFree in lib/redis/scripts.js) that must leave the state the
  // general take and leave leave: checked field by field, before and after
  // the Mutex was once contended (then an idle M keeps its counters with a
  // TTL, and the one-key scripts still serve it in one call each).
  s.test('a free lock\'s one-key scripts keep the state take and leave keep, fresh and after contention', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    // A long lease: the policy, read by the general take alone, is due
    // only every 20 s, so a's takes below are the one-key script's.
    const opt = opts({ heartbeat: 60000, lease: 60000 })
    const [ma, mb] = [new Mutex(a, 'free', opt), new Mutex(b, 'free', opt)]
    const M = `{${prefix}:mutex:free}:m`
    const admin = s.admin
    const f1 = await ma.lockAsync()
    const fresh = await admin.hgetall(M)
    t.same(Object.keys(fresh).sort(), ['ep', 'fz', 'h', 'hf', 'hx', 'nr'], 'a fresh grant writes what take\'s fast path writes')
    t.equal(fresh.hf, String(f1), 'its fence')
    t.equal(fresh.ep, String(f1), 'the epoch is the fence: both the clock\'s')
    t.equal(await admin.pttl(M), -1, 'no TTL while held')
    t.equal(await ma.unlock(), true)
    t.equal(await admin.exists(M), 0, 'nobody waited: M is gone')
    // Contended once: b queues, a hands over, b leaves; M keeps counters.
    const f2 = await ma.lockAsync()
    t.ok(f2 > f1, `fences grow (${f2} > ${f1})`)
    const waiting = mb.lockAsync()
    await until(async () => (await ma.nrWaiting()) === 1, 'b to queue')
    t.equal(await ma.unlock(), true, 'a hands over (leaveFree answers 3, leave follows)')
    const f3 = await waiting
    t.ok(f3 > f2, `the hand-off's fence is larger (${f3} > ${f2})`)
    t.equal(await mb.unlock(), true)
    const trimmed = await admin.hgetall(M)
    t.match(trimmed, { nr: '1', fz: '1', held: '0', nw: '0', h: '', hx: '0', hf: '0', fence: String(f3) }, 'idle: counters kept, holder cleared')
    t.ok(Number(trimmed.seq) > 0, 'its queue\'s tickets are kept')
    t.ok(await admin.pttl(M) > 0, 'an idle M has a TTL')
    // The one-key scripts serve the idle M as take and leave would.
    for (let i = 0; i < 3; i++) {
      const before = await admin.hgetall(M)
      const f = await ma.lockAsync()
      t.ok(f > Number(before.fence), `fence ${f} follows the last one (${before.fence})`)
      const held = await admin.hgetall(M)
      t.match(held, { held: '1', hf: String(f), fence: String(f), seq: before.seq, ep: before.ep, nw: '0' }, 'held: the next fence, the same epoch and tickets')
      t.match(await ma.holder(), { pid: process.pid, fence: f }, 'held by this process, with that fence')
      t.equal(await admin.pttl(M), -1, 'no TTL while held')
      t.equal(await ma.unlock(), true)
      t.match(await admin.hgetall(M), { held: '0', h: '', hx: '0', hf: '0', fence: String(f), seq: before.seq, ep: before.ep }, 'idle again, trimmed')
      t.ok(await admin.pttl(M) > 0, 'with its TTL')
    }
    // a found the lock free last; now b holds it. a's one-key take answers
    // that it is not free, and the general take follows: false for a try,
    // a timeout for a timed lock, within its bound.
    const fb = await mb.lockAsync()
    const began = performance.now()
    t.equal(await ma.lockAsync({ timeout: 300 }), false, 'a timed lock of a held lock times out')
    const took = performance.now() - began
    t.ok(took >= 299 && took < 300 + 1000, `within its timeout and slack for a loaded machine: ${took.toFixed(0)} ms (300 … 1300)`)
    t.equal(await mb.unlock(), true)
    const fa = await ma.tryLock()
    t.ok(fa > fb, `free again: granted, with a larger fence (${fa} > ${fb})`)
    t.equal(await ma.unlock(), true)
    await mb.lockAsync()
    t.equal(await ma.tryLock(), false, 'tryLock of a held lock, by a client that found it free last: false')
    t.equal(await mb.unlock(), true)
    // The one-key take answers the fence alone; a fence another program
    // wrote into the idle M is refused there as the general take refuses
    // it (redis-trust), and the grant is given back.
    t.ok(await ma.lockAsync() > 0, 'granted at once: the one-key path is on again')
    t.equal(await ma.unlock(), true)
    await admin.hset(M, 'fence', '1e300')
    const evalsha = a.evalsha
    let oneKey = 0
    a.evalsha = function (sha, ...args) {
      if (sha === direct.sabsync2TakeFree.sha) oneKey++
      return evalsha.call(this, sha, ...args)
    }
    const err = await ma.lockAsync().catch(e => e)
    a.evalsha = evalsha
    t.equal(oneKey, 1, 'the take went by the one-key script')
    t.equal(err.code, 'ERR_SABSYNC_REDIS', 'a fence that is not a safe positive integer: rejected')
    t.match(err.message, /fence/, 'naming the fence')
    t.equal(ma.isHeld, false)
    t.equal(ma.fence, undefined)
    await until(async () => (await admin.hget(M, 'h')) === '', 'the refused grant to be given back')
  })
})
