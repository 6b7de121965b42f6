'use strict'
// sabsync/redis Mutex between real processes (child_process.fork) through
// one real redis-server: exclusion, fences, arrival order, and holders
// killed with SIGKILL or stopped with SIGSTOP past their lease.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { redisSuite, until } = require('./fixtures/redis/suite')
const { forkWithMailbox } = require('./fixtures/redis/mailbox')
const { Mutex } = require('../lib/redis')

// Forked processes on a loaded 2-core machine take seconds to start and
// to be scheduled: a 10-minute limit, as the other multi-process files have.
t.setTimeout(600000)
// Leases and heartbeats of the order and exclusion tests: long enough that
// no process is taken for dead because the machine left it without a CPU.
const SLOW = { lease: 30000, heartbeat: 20000 }

// A forked contender (test/fixtures/redis/contender.js) with a mailbox:
// next(op) resolves with its next message of that op.
function contender (t, url) {
  return forkWithMailbox(t, 'contender.js', [url], 'contender')
}

redisSuite(t, async s => {
  const { url, client } = s

  s.test('4 processes, one Mutex: critical sections never overlap, fences strictly increase', async (t, { key: keyOf }) => {
    const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-redis-log-')), 'log')
    t.teardown(() => fs.rmSync(path.dirname(log), { recursive: true, force: true }))
    const procs = [0, 1, 2, 3].map(() => contender(t, url))
    await Promise.all(procs.map(p => p.next('ready')))
    const n = 20
    for (const p of procs) p.send({ op: 'loop', key: keyOf('loop'), n, ...SLOW, log })
    await Promise.all(procs.map(p => p.next('done')))
    for (const p of procs) p.send({ op: 'exit' })
    const events = fs.readFileSync(log, 'utf8').trim().split('\n').map(line => {
      const [kind, pid, fence, at] = line.split(' ')
      return { kind, pid, fence: Number(fence), at: BigInt(at) }
    }).sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
    t.equal(events.length, 2 * 4 * n)
    let inside = null
    let overlaps = 0
    const fences = []
    for (const e of events) {
      if (e.kind === 'enter') {
        if (inside !== null) overlaps++
        inside = e
        fences.push(e.fence)
      } else {
        if (inside === null || inside.pid !== e.pid || inside.fence !== e.fence) overlaps++
        inside = null
      }
    }
    t.equal(overlaps, 0, 'no two processes inside at once')
    t.ok(fences.every((f, i) => i === 0 || f > fences[i - 1]), 'fences strictly increase in the order of entry')
    await Promise.all(procs.map(p => p.exited))
  })

  s.test('waiters in 4 processes are served in the order they arrived', async (t, { key: keyOf }) => {
    const key = keyOf('order')
    const holder = new Mutex(client(), key, SLOW)
    const procs = [0, 1, 2, 3].map(() => contender(t, url))
    await Promise.all(procs.map(p => p.next('ready')))
    // Grants from any process, in the order they reach this one.
    const grants = []
    procs.forEach(p => p.proc.on('message', m => { if (m.op === 'granted') grants.push({ m, p }) }))
    const nextGrant = async () => {
      await until(() => grants.length > 0, 'a grant')
      return grants.shift()
    }
    for (const round of [[0, 1, 2, 3], [2, 0, 3, 1], [3, 2, 1, 0]]) {
      let last = await holder.lockAsync()
      for (let i = 0; i < round.length; i++) {
        procs[round[i]].send({ op: 'lock', key, ...SLOW, id: round[i] })
        await until(async () => (await holder.nrWaiting()) === i + 1, 'process ' + round[i] + ' to queue')
      }
      t.equal(await holder.unlock(), true)
      const served = []
      for (let i = 0; i < round.length; i++) {
        const g = await nextGrant()
        served.push(g.m.id)
        t.ok(g.m.fence > last, 'a larger fence')
        last = g.m.fence
        g.p.send({ op: 'unlock' })
        t.equal((await g.p.next('unlocked')).ok, true)
      }
      t.same(served, round, 'served in arrival order')
    }
    for (const p of procs) p.send({ op: 'exit' })
    await Promise.all(procs.map(p => p.exited))
  })

  s.test('SIGKILL a holder: the next waiter gets the lock once the lease runs out', async (t, { key: keyOf }) => {
    const key = keyOf('kill')
    const lease = 1000
    const p = contender(t, url)
    await p.next('ready')
    p.send({ op: 'lock', key, lease, id: 1 })
    const { fence: f1 } = await p.next('granted')
    const waiter = new Mutex(client(), key, { lease })
    const got = waiter.lockAsync({ timeout: 30000 })
    await until(async () => (await waiter.nrWaiting()) === 1, 'the waiter to queue')
    const killedAt = performance.now()
    p.proc.kill('SIGKILL')
    const f2 = await got
    const ms = performance.now() - killedAt
    t.ok(f2 > f1, 'granted, with a larger fence')
    t.ok(ms < lease + 5000, `within the lease plus a margin (${ms.toFixed(0)} ms)`)
    t.equal(await waiter.unlock(), true)
  })

  s.test('SIGSTOP a holder past its lease: the next holder proceeds, the stale holder\'s write is refused by the fence', async (t, { key: keyOf }) => {
    const key = keyOf('stop')
    const resource = keyOf('resource')
    const lease = 600
    const p = contender(t, url)
    await p.next('ready')
    p.send({ op: 'hold', key, lease, resource })
    const { fence: f1 } = await p.next('granted')
    t.equal((await p.next('wrote')).ok, true, 'the holder writes with its fence')
    const r = client()
    r.defineCommand('fencedWrite', {
      numberOfKeys: 1,
      lua: `local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
            if tonumber(ARGV[1]) < seen then return 0 end
            redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
            return 1`
    })
    const next = new Mutex(r, key, { lease })
    p.proc.kill('SIGSTOP')
    const f2 = await next.lockAsync({ timeout: 30000 })
    t.ok(f2 > f1, 'the next holder has a larger fence')
    t.equal(await r.fencedWrite(resource, f2, 'from the next holder'), 1, 'and its write is accepted')
    p.proc.kill('SIGCONT')
    // The stale holder goes on writing with its old fence: refused.
    let w
    do w = await p.next('wrote'); while (w.ok)
    t.equal(w.fence, f1)
    t.equal(w.ok, false, 'the stale holder\'s write is refused')
    t.equal((await p.next('lost')).code, 'ERR_SABSYNC_LEASE_LOST', 'and it learns its lease was lost')
    t.equal((await p.next('unlocked')).ok, false, 'its unlock() resolves false')
    t.equal(await r.hget(resource, 'value'), 'from the next holder')
    t.equal(await next.unlock(), true)
    p.send({ op: 'exit' })
    await p.exited
  })
})
