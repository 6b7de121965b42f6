'use strict'
// Locks in a shared space between processes: mutual exclusion across
// processes and their threads, owner checks, and recovery when a process
// is killed with SIGKILL while it holds a Mutex, a read lock, a running Once
// or a place in a Barrier round, or while it waits for the Mutex.
const t = require('tap')

// Real processes, each starting Node and opening the space: seconds apiece
// on a loaded machine, so past the suite's 120 s for a file there.
t.setTimeout(600000)
const { openShared, waiters } = require('..')
const { spaceName, spawn } = require('./space-helpers')
const { until, fixtureSource } = require('./helpers')

// Queued waiters of a mutex: on its lock word or its starving waiter's
// word (Int32 1 and 2 of its memory, after the kind tag: lib/mutex.js).
function queued (m) {
  const view = new Int32Array(m.buffer, m.byteOffset, 3)
  return waiters(view, 1) + waiters(view, 2)
}

const hold = `
  const m = space.mutex('m')
  m.lock()
  send('locked')
  await new Promise(() => setInterval(() => {}, 1000))`

t.test('a counter under a space Mutex equals the sum of increments (3 processes x 2 threads)', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const cells = space.int32Array('cells', 4)
  const K = 300
  const body = `
    const cells = space.int32Array('cells', 4)
    const m = space.mutex('m')
    // One read-modify-write that is not atomic, with a check that nobody
    // else is inside.
    const step = () => {
      if (Atomics.add(cells, 1, 1) !== 0) Atomics.add(cells, 2, 1)
      const v = cells[0]
      for (let i = 0; i < 200; i++);
      cells[0] = v + 1
      Atomics.sub(cells, 1, 1)
    }
    const w = new Worker(${JSON.stringify(fixtureSource('space-locks/counter'))}, { eval: true, workerData: { root, name: space.name, K: ${K} } })
    const exited = new Promise(resolve => w.once('exit', resolve))
    for (let i = 0; i < ${K}; i++) {
      if (i % 2 === 0) {
        await m.lockAsync()
        step()
        m.unlock()
      } else {
        await m.runExclusive(step)
      }
    }
    await exited`
  const kids = [spawn(t, name, body), spawn(t, name, body), spawn(t, name, body)]
  await Promise.all(kids.map(k => k.done))
  t.equal(cells[0], 3 * 2 * K, 'every increment counted')
  t.equal(cells[2], 0, 'never two inside at once')
})

t.test('unlock by another process throws; isLocked sees the other process', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const m = space.mutex('m')
  const kid = spawn(t, name, hold)
  await kid.message(x => x === 'locked')
  t.ok(m.isLocked)
  t.notOk(m.tryLock())
  t.throws(() => m.unlock(), { code: 'ERR_SABSYNC_NOT_OWNER' })
  t.equal(await m.lockAsync({ timeout: 20 }), false, 'a timeout is an answer')
  kid.kill('SIGKILL')
  await kid.exited
  t.equal(await m.lockAsync({ timeout: 60000 }), true)
  t.ok(m.ownerDied)
  m.unlock()
  t.notOk(m.ownerDied)
})

t.test('a holder killed with SIGKILL: the next waiter, in any process, takes over with ownerDied', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const m = space.mutex('m')
  for (let round = 0; round < 2; round++) {
    const holder = spawn(t, name, hold)
    // A blocking waiter in another process, and an async one here.
    const waiter = spawn(t, name, `
      const m = space.mutex('m')
      await next()
      const got = m.lock(60000)
      const died = m.ownerDied
      m.unlock()
      return [got, died]`)
    await holder.message(x => x === 'locked')
    waiter.send('go')
    await until(() => queued(m) === 1, 60000, 'the other process waits')
    const mine = m.lockAsync({ timeout: 60000 }).then(got => {
      const died = m.ownerDied
      m.unlock()
      return [got, died]
    })
    holder.kill('SIGKILL')
    const [theirs, ours] = await Promise.all([waiter.done, mine])
    t.same([theirs[0], ours[0]], [true, true], 'both got it in turn')
    t.equal(theirs[1] + ours[1], 1, 'the first of them, only, was told the owner died')
  }
  t.ok(m.tryLock(), 'free, and sane, afterwards')
  t.notOk(m.ownerDied)
  m.unlock()
})

t.test('a waiter killed with SIGKILL: the unlock reaches the next live waiter', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const m = space.mutex('m')
  const body = `
    const m = space.mutex('m')
    await next()
    const got = m.lock(60000)
    m.unlock()
    return got`
  for (let round = 0; round < 2; round++) {
    t.ok(m.lock())
    const doomed = spawn(t, name, body)
    const survivor = spawn(t, name, body)
    doomed.send('go')
    await until(() => queued(m) === 1, 60000, 'first waiter')
    survivor.send('go')
    await until(() => queued(m) === 2, 60000, 'second waiter')
    doomed.kill('SIGKILL')
    await doomed.exited
    m.unlock()
    t.equal(await survivor.done, true)
  }
})

t.test('a killed reader, a killed Once runner, a killed Barrier party', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const rw = space.rwlock('rw', { readerSlots: 4 })
  const once = space.once('once')
  const barrier = space.barrier('barrier', 3)
  const kid = spawn(t, name, `
    space.rwlock('rw', { readerSlots: 4 }).readLock()
    space.once('once').runAsync(() => new Promise(() => {})) // never finishes
    space.barrier('barrier', 3).waitAsync().catch(() => {})
    send('ready')
    await new Promise(() => setInterval(() => {}, 1000))`)
  await kid.message(x => x === 'ready')
  t.equal(rw.tryWriteLock(), false, 'a live reader in another process')
  t.notOk(once.done)
  const arrived = barrier.waitAsync().then(() => 'completed', err => err.code)
  t.equal(await once.runAsync(async () => {}, { timeout: 30 }), undefined, 'the runner lives: a timeout')
  kid.kill('SIGKILL')
  await kid.exited
  t.equal(rw.writeLock(60000), true, 'the dead reader\'s slot came back')
  rw.writeUnlock()
  let ran = false
  t.equal(once.run(() => { ran = true }, 60000), true, 'Once runs again here')
  t.ok(ran && once.done)
  t.equal(await arrived, 'ERR_SABSYNC_BARRIER_BROKEN', 'the round broke')
})
