'use strict'
// nrWaiting() on every primitive, and Mutex.holder, with real waiters:
// worker threads parked on the object, forked processes in a space, a
// holder killed with SIGKILL, and a space whose slots a co-tenant
// scribbled (the holder's pid and thread id are claims: reading them never
// crashes, and a claim that does not check out is reported unknown).
const t = require('tap')
const { Worker } = require('worker_threads')
const path = require('path')
const sabsync = require('..')
const { spaceName, spawn, LAYOUT, pwrite, liveIds } = require('./space-helpers')

const root = path.join(__dirname, '..')

// Polls fn() until it answers `want` (up to 10 s): waiters take a moment
// to start and park.
async function until (t, fn, want, what) {
  const end = Date.now() + 10000
  let got
  while ((got = fn()) !== want && Date.now() < end) await new Promise(resolve => setTimeout(resolve, 5))
  t.equal(got, want, what)
}

// A worker running `body` with sabsync, `o` (the object, from its handle)
// and workerData in scope.
function worker (Class, handle, body) {
  const code = `
    const { parentPort, workerData } = require('worker_threads')
    const sabsync = require(${JSON.stringify(root)})
    const o = sabsync[${JSON.stringify(Class)}].from(workerData.handle)
    ;(async () => { ${body} })().then(v => parentPort.postMessage({ done: v ?? null }), e => parentPort.postMessage({ error: e.stack }))
  `
  const w = new Worker(code, { eval: true, workerData: { handle } })
  w.done = new Promise((resolve, reject) => {
    w.on('message', m => m.error ? reject(new Error(m.error)) : resolve(m.done))
    w.on('error', reject)
  })
  return w
}

const handleOf = o => ({ buffer: o.buffer, byteOffset: o.byteOffset, byteLength: o.byteLength })

t.test('Mutex: nrWaiting counts blocked workers and this thread\'s queued lockAsync calls; holder names the holding thread', async t => {
  const m = new sabsync.Mutex()
  t.equal(m.holder, null, 'free: no holder')
  t.equal(m.nrWaiting(), 0)
  const flag = new Int32Array(new SharedArrayBuffer(4))
  const w = new Worker(`
    const { parentPort, workerData } = require('worker_threads')
    const sabsync = require(${JSON.stringify(root)})
    const o = sabsync.Mutex.from(workerData.handle)
    const flag = new Int32Array(workerData.flag)
    o.lock()
    Atomics.store(flag, 0, 1)
    while (Atomics.load(flag, 0) === 1) sabsync.wait(flag, 0, 1)
    o.unlock()
    parentPort.postMessage('unlocked')
  `, { eval: true, workerData: { handle: handleOf(m), flag: flag.buffer } })
  await until(t, () => Atomics.load(flag, 0), 1, 'the worker holds it')
  t.same(m.holder, { pid: process.pid, threadId: w.threadId }, 'holder: this process, the worker\'s threadId')
  t.ok(m.isLocked)

  const waiters = [1, 2].map(() => worker('Mutex', handleOf(m), 'o.lock(); o.unlock()'))
  await until(t, () => m.nrWaiting(), 2, 'two workers blocked in lock()')
  const mine = [m.lockAsync(), m.lockAsync(), m.lockAsync()]
  await until(t, () => m.nrWaiting(), 5, 'and three lockAsync calls of this thread (one parked, two queued behind it)')

  Atomics.store(flag, 0, 2)
  sabsync.notify(flag, 0)
  // This thread's calls may be handed the lock before the workers get it:
  // each unlocks as soon as it holds it.
  const drained = (async () => {
    for (const p of mine) {
      t.equal(await p, true)
      t.same(m.holder, { pid: process.pid, threadId: 0 }, 'this thread holds it')
      m.unlock()
    }
  })()
  await Promise.all([...waiters.map(x => x.done), drained])
  t.equal(m.nrWaiting(), 0, 'nobody waits at the end')
  t.equal(m.holder, null)
  await w.terminate()
})

t.test('Mutex.holder: a worker terminated while holding is no holder', async t => {
  const m = new sabsync.Mutex()
  const w = worker('Mutex', handleOf(m), 'o.lock(); setInterval(() => {}, 1e6); await new Promise(() => {})')
  await until(t, () => m.isLocked, true, 'the worker holds it')
  t.equal(m.holder?.threadId, w.threadId)
  await w.terminate()
  t.equal(m.holder, null, 'its holder died: nobody holds it until a taker comes')
  t.ok(m.tryLock(), 'taken over')
  t.ok(m.ownerDied)
  t.same(m.holder, { pid: process.pid, threadId: 0 })
  m.unlock()
})

t.test('every primitive answers nrWaiting(), counting real waiters', async t => {
  const cases = [
    ['AtomicFlag', () => new sabsync.AtomicFlag(), 'o.wait(false)', o => { o.testAndSet(); o.notifyAll() }],
    ['Latch', () => new sabsync.Latch(1), 'o.wait()', o => o.countDown()],
    ['Once', () => new sabsync.Once(), 'o.run(() => {})', null],
    ['CondVar', () => new sabsync.CondVar(), null, null],
    ['Barrier', () => new sabsync.Barrier(3), 'o.wait()', o => o.wait()],
    ['RWLock', () => new sabsync.RWLock(), 'o.readLock(); o.readUnlock()', o => o.writeUnlock()],
    ['Sema', () => new sabsync.Sema(1), 'const tok = o.acquireSync(); o.release(tok)', null]
  ]
  for (const [name, make, body, free] of cases) {
    const o = make()
    t.equal(o.nrWaiting(), 0, `${name}: 0 at first`)
    if (body === null) continue
    let release = free
    if (name === 'Once') {
      // This thread runs fn (async) while two workers wait in run().
      let finish
      const running = o.runAsync(() => new Promise(resolve => { finish = resolve }))
      release = () => finish()
      const ws = [1, 2].map(() => worker(name, handleOf(o), body))
      await until(t, () => o.nrWaiting(), 2, `${name}: two waiters`)
      release()
      await running
      await Promise.all(ws.map(x => x.done))
    } else {
      if (name === 'RWLock') o.writeLock()
      let tok
      if (name === 'Sema') {
        tok = o.tryAcquire()
        release = () => o.release(tok)
      }
      const ws = [1, 2].map(() => worker(name, handleOf(o), body))
      await until(t, () => o.nrWaiting(), 2, `${name}: two waiters`)
      release(o)
      await Promise.all(ws.map(x => x.done))
    }
    t.equal(o.nrWaiting(), 0, `${name}: 0 once they are through`)
  }
  const cv = new sabsync.CondVar()
  const m = new sabsync.Mutex()
  m.lock()
  const waited = cv.waitAsync(m)
  t.equal(cv.nrWaiting(), 1, 'CondVar: a waitAsync is queued')
  cv.notifyAll()
  t.equal(await waited, true)
  m.unlock()
  t.equal(new sabsync.RateLimiter({ limit: 1, window: 1000 }).nrWaiting(), 0, 'RateLimiter: nobody ever waits')
  t.equal(sabsync.RateLimit(1).nrWaiting(), 0)
})

t.test('a space: holder and nrWaiting across processes; a SIGKILLed holder is no holder', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const m = space.mutex('m')
  const holder = spawn(t, name, `
    const m = space.mutex('m')
    m.lock()
    send('locked')
    await new Promise(() => {})
  `)
  await holder.message(x => x === 'locked')
  t.same(m.holder, { pid: holder.pid, threadId: 0 }, 'the child process\'s main thread holds it')
  const waiter = spawn(t, name, `
    const m = space.mutex('m')
    const got = m.lock()
    const died = m.ownerDied
    m.unlock()
    return { got, died }
  `)
  await until(t, () => m.nrWaiting(), 1, 'the other child is queued')
  const mine = m.lockAsync()
  await until(t, () => m.nrWaiting(), 2, 'and this thread\'s lockAsync')
  // Either may get it first; each unlocks once it holds it, and exactly
  // one of them took it over from the dead holder.
  const mineDone = mine.then(got => {
    const r = { got, died: m.ownerDied, holder: m.holder }
    m.unlock()
    return r
  })
  holder.kill('SIGKILL')
  await holder.exited
  const [theirs, ours] = await Promise.all([waiter.done, mineDone])
  t.equal(theirs.got, true, 'the other child got it')
  t.equal(ours.got, true, 'this thread got it')
  t.same(ours.holder, { pid: process.pid, threadId: 0 }, 'holder: this thread, while it held it')
  t.equal(Number(theirs.died) + Number(ours.died), 1, 'one of them took it over from the dead holder')
  t.equal(m.nrWaiting(), 0)
  t.equal(m.holder, null)

  const sema = space.sema('s', 1)
  const tok = sema.tryAcquire()
  const sw = spawn(t, name, 'const s = space.sema(\'s\', 1); const tok = await s.acquire(); s.release(tok)')
  await until(t, () => sema.nrWaiting(), 1, 'a space Sema counts a waiting process')
  sema.release(tok)
  await sw.done
  const latch = space.latch('l', 1)
  const lw = spawn(t, name, 'space.latch(\'l\', 1).wait()')
  await until(t, () => latch.nrWaiting(), 1, 'a space Latch counts a waiting process')
  latch.countDown()
  await lw.done
})

t.test('a scribbled space: a forged holder id or forged slot claims give null or unknown, never a crash', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const m = space.mutex('m')
  const i32 = new Int32Array(m.buffer, m.byteOffset, 4)
  // Ids no live owner has: fixed ones, less any a live slot holds now (a
  // fresh space's first tenant may well be 512, slot 0 of generation 1),
  // and this thread's slot of another generation.
  const live = liveIds(name)
  t.ok(live.includes(space.ownerId), 'this thread\'s id reads live')
  const forgeries = [0x3FFFFFFF, 1, 512, (7 << 9) | 3].filter(id => !live.includes(id))
  for (const forged of [...forgeries, space.ownerId ^ (1 << 9)]) {
    Atomics.store(i32, 1, forged)
    t.equal(m.holder, null, `word ${forged}: no live owner has that id`)
  }
  Atomics.store(i32, 1, space.ownerId)
  t.same(m.holder, { pid: process.pid, threadId: 0 }, 'this thread')
  // A co-tenant rewrites every slot's pid and thread claim.
  const slot = space.ownerId & 511
  const claims = Buffer.alloc(12)
  claims.writeUInt32LE(0xFFFFFFF0, 0) // pid: out of range
  claims.writeUInt32LE(12345, 4) // thread id ...
  claims.writeUInt32LE(space.ownerId + (1 << 9), 8) // ... of another id
  pwrite(name, LAYOUT.SLOTS_OFF + slot * 128 + 4, claims.subarray(0, 4))
  pwrite(name, LAYOUT.SLOTS_OFF + slot * 128 + 32, claims.subarray(4, 12))
  t.same(m.holder, { pid: null, threadId: null }, 'claims that do not check out are unknown; the holder lives')
  t.ok(m.isLocked)
  Atomics.store(i32, 1, 0)
})
