'use strict'
// space.inspect() (lib/inspect.js, src/core/space_inspect.c) against real
// processes: a mutex held by another process, a Sema with a waiting
// process, a limiter with keys, a holder SIGKILLed; a directory lock held
// by a stopped process (inspect takes no lock, so it answers); and a space
// whose private part a co-tenant scribbled (a snapshot that says what it
// could not read, never a crash).
const t = require('tap')
const crypto = require('crypto')
const sabsync = require('..')
const { spaceName, spawn, LAYOUT, pwrite, seen } = require('./space-helpers')

const objectOf = (snap, key, kind) => snap.objects.find(o => o.key === key && (kind === undefined || o.kind === kind))

t.test('a mutex held by another process, a Sema with a waiting process, a limiter with keys', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const holder = spawn(t, name, `
    space.mutex('jobs').lock()
    const pool = space.sema('pool', 2)
    pool.tryAcquire(); pool.tryAcquire()
    send('holding')
    await new Promise(() => {})
  `)
  await holder.message(m => m === 'holding')
  const waiter = spawn(t, name, `
    const pool = space.sema('pool', 2)
    send('asking')
    const tok = await pool.acquire()
    pool.release(tok)
  `)
  await waiter.message(m => m === 'asking')
  const limiter = space.rateLimiter('api', { limit: 10, window: 60000, keys: 64 })
  for (const k of ['a', 'b', 'c']) limiter.consume(k)

  const snap = await seen(t, () => {
    const s = space.inspect()
    return objectOf(s, 'pool')?.waiting === 1 ? s : null
  }, 'the waiting process is seen')
  t.same(JSON.parse(JSON.stringify(snap)), snap, 'plain and JSON-serialisable')
  t.equal(snap.name, name)
  const jobs = objectOf(snap, 'jobs')
  t.equal(jobs.kind, 'mutex')
  t.same(jobs.holder, { pid: holder.pid, threadId: 0 }, 'the holder: the other process\'s main thread')
  const pool = objectOf(snap, 'pool')
  t.same(pool.parameters, { nr: 2 })
  t.equal(pool.available, 0)
  t.same(pool.holders, [{ pid: holder.pid, threadId: 0, tokens: 2 }])
  t.same(pool.waiters, [{ pid: waiter.pid, threadId: 0 }], 'the waiter named')
  const api = objectOf(snap, 'api')
  t.equal(api.kind, 'rateLimiter')
  t.same(api.table, { keys: 64, used: 3, claiming: 0, full: false })
  const pids = snap.processes.map(p => p.pid).sort()
  t.same(pids, [process.pid, holder.pid, waiter.pid].sort(), 'the processes attached')
  t.same(snap.unreadable, [])

  holder.kill('SIGKILL')
  await holder.exited
  await waiter.done // it got a token back from the dead holder
  const after = await seen(t, () => {
    const s = space.inspect()
    return s.processes.length === 1 ? s : null
  }, 'the dead and the finished processes are gone')
  t.ok(after.deaths >= 1, `deaths: ${after.deaths}`)
  t.same(objectOf(after, 'jobs').holder, { pid: null, threadId: null, dead: true }, 'held by a dead owner, not taken over yet')
  const m = space.mutex('jobs')
  t.ok(m.tryLock())
  t.same(objectOf(space.inspect(), 'jobs'), { ...objectOf(space.inspect(), 'jobs'), holder: { pid: process.pid, threadId: 0 }, ownerDied: true })
  m.unlock()
})

t.test('a directory lock held by a stopped process: inspect() takes no lock and answers', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  space.mutex('m')
  const child = spawn(t, name, 'send(space.ownerId); await new Promise(() => {})')
  const id = await child.message(m => typeof m === 'number')
  const lockWord = Buffer.alloc(4)
  lockWord.writeUInt32LE(id)
  pwrite(name, LAYOUT.DIR_LOCK, lockWord)
  child.kill('SIGSTOP')
  t.teardown(() => child.kill('SIGCONT'))
  const snap = space.inspect()
  t.ok(objectOf(snap, 'm'), 'the objects are listed')
  t.ok(snap.processes.some(p => p.pid === child.pid), 'the stopped process is attached (it lives)')
})

t.test('a scribbled private part: a snapshot that says what it could not read, never a crash', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const m = space.mutex('m')
  m.lock()
  space.sema('s', 3)
  space.rateLimiter('r', { limit: 1, window: 1000, keys: 8 })
  space.rwlock('rw', { readerSlots: 4 })
  const DIR_BYTES = 128
  // Entry 0's state, then its offset, then its key length, forged.
  const forge = (index, at, value) => {
    const b = Buffer.alloc(4)
    b.writeUInt32LE(value >>> 0)
    pwrite(name, LAYOUT.DIR_OFF + index * DIR_BYTES + at, b)
  }
  forge(0, 0, 9) // a state no entry has
  forge(1, 8, 0xFFFFFF00) // an offset past the space
  forge(2, 32, 5000) // a key longer than a key can be
  const snap = space.inspect()
  t.same(JSON.parse(JSON.stringify(snap)), snap)
  t.match(snap.unreadable.join('\n'), /entry 0: state 9/)
  t.match(snap.unreadable.join('\n'), /entry 1: its place/)
  t.match(snap.unreadable.join('\n'), /entry 2: its key/)

  // Then random bytes over the slots, the records and the directory, many
  // times: every snapshot is made.
  const regions = [
    [LAYOUT.SLOTS_OFF, LAYOUT.NSLOTS * 128],
    [LAYOUT.BUCKETS_OFF + LAYOUT.NBUCKETS * 64, 2048 * 64],
    [LAYOUT.DIR_OFF, 512 * 128],
    [LAYOUT.USERS_OFF, 512 * 64]
  ]
  let made = 0
  for (let round = 0; round < 30; round++) {
    for (const [off, len] of regions) {
      const at = off + crypto.randomInt(0, len - 64)
      pwrite(name, at, crypto.randomBytes(64))
    }
    const s = space.inspect()
    JSON.stringify(s)
    made++
  }
  t.equal(made, 30, 'thirty snapshots of a scribbled space')
  // The public part too: the objects' own words.
  pwrite(name, LAYOUT.PUBLIC_OFF, crypto.randomBytes(4096))
  t.ok(Array.isArray(space.inspect().objects))
})
