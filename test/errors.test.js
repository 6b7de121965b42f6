'use strict'
// Errors that say what to do: each mistake a user makes with a shared
// space or a primitive's memory gets a coded error naming the thing and the
// way out.
const t = require('tap')
const { Worker } = require('worker_threads')
const path = require('path')
const sabsync = require('..')
const { openShared, Barrier, Mutex } = sabsync
const { spaceName } = require('./space-helpers')

const root = path.join(__dirname, '..')
const platform = process.platform === 'linux' ? {} : { skip: 'shared spaces need Linux' }

t.test('every object of a closed space throws ERR_SABSYNC_SHARED_CLOSED, methods and getters', platform, async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const objects = {
    mutex: space.mutex('m'),
    atomicFlag: space.atomicFlag('f'),
    once: space.once('o'),
    latch: space.latch('l', 1),
    condVar: space.condVar('c'),
    rwlock: space.rwlock('r'),
    barrier: space.barrier('b', 2),
    sema: space.sema('s', 2),
    rateLimiter: space.rateLimiter('rl', { limit: 2, window: 1000 })
  }
  t.ok(objects.mutex instanceof Mutex, 'a space object is still an instance of its class')
  space.close()
  if (!(space.size > 0) || objects.mutex.buffer.byteLength !== 0) {
    t.comment('the space\'s buffer is not detached by close() on this Node')
    return
  }
  const closed = { code: 'ERR_SABSYNC_SHARED_CLOSED', message: new RegExp(`"${name}" was closed in this thread.*openShared\\(`) }
  const calls = {
    mutex: [m => m.lock(), m => m.tryLock(), m => m.unlock(), m => m.isLocked, m => m.lockAsync()],
    atomicFlag: [f => f.testAndSet(), f => f.clear()],
    once: [o => o.run(() => 1)],
    latch: [l => l.countDown(), l => l.wait(0)],
    condVar: [c => c.notifyOne()],
    rwlock: [r => r.readLock(), r => r.tryWriteLock()],
    barrier: [b => b.wait(0), b => b.reset()],
    sema: [s => s.tryAcquire(), s => s.acquireSync(0)],
    rateLimiter: [r => r.consume('client'), r => r.peek('client')]
  }
  for (const [kind, fns] of Object.entries(calls)) {
    for (const fn of fns) t.throws(() => fn(objects[kind]), closed, `${kind}: ${fn}`)
  }
})

t.test('a mismatch says which parameter, the value in use, the value asked, and what to do', platform, async t => {
  const name = spaceName(t)
  const space = openShared(name, { versioned: false })
  space.sema('pool', 2)
  space.rateLimit('rate', 5, { timeUnit: 1000 })
  const file = `/dev/shm/sabsync.${name}`
  const esc = s => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  t.throws(() => space.sema('pool', 3), {
    code: 'ERR_SABSYNC_SHARED_MISMATCH',
    message: new RegExp(`sema\\("pool"\\) of the space "${esc(name)}": nr: 2 is in use, this call asked for 3\\. ` +
      '.*ask with nr: 2 to share the object in use, use another key for the new object \\(say "pool-v2"\\).*versioned: true')
  })
  t.throws(() => space.mutex('pool'), {
    code: 'ERR_SABSYNC_SHARED_MISMATCH',
    message: new RegExp(`the key "pool" of the space "${esc(name)}" \\(${esc(file)}\\) holds a sema with nr 2, and this call asked for a mutex`)
  })
  t.throws(() => space.rateLimit('rate', 5, { timeUnit: 60000 }), {
    code: 'ERR_SABSYNC_SHARED_MISMATCH',
    message: /rateLimit\("rate"\).*timeUnit: 1000 is in use, this call asked for 60000\. .*ask with timeUnit: 1000/
  })
  t.throws(() => space.int32Array('pool', 4), { message: /holds a sema with nr 2, and this call asked for an int32Array with length 4/ })
  // The default versions a Sema's key: no mismatch at all.
  const byDefault = openShared(name)
  t.equal(byDefault.sema('pool', 2).nr, 2)
  t.equal(byDefault.sema('pool', 3).nr, 3)
  byDefault.close()
  space.close()
})

t.test('a space\'s object posted to a worker: the error says to open the space in that thread', platform, async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const m = space.mutex('m')
  const err = await new Promise((resolve, reject) => {
    const w = new Worker(`
      const { workerData, parentPort } = require('worker_threads')
      const { Mutex } = require(${JSON.stringify(root)})
      try { Mutex.from(workerData); parentPort.postMessage(null) } catch (e) { parentPort.postMessage({ code: e.code, message: e.message }) }
    `, { eval: true, workerData: m })
    w.once('message', resolve)
    w.once('error', reject)
  })
  if (err === null) {
    t.comment('this Node posts a space\'s buffer as shared memory')
  } else {
    t.equal(err.code, 'ERR_INVALID_ARG_TYPE')
    t.match(err.message, /Mutex of a shared space.*Open the space in that thread.*openShared\(name\)\.mutex\(key/)
    t.notMatch(err.message, /Pass the Mutex itself/)
  }
  space.close()
})

t.test('Barrier.wait over overwritten memory: ERR_SABSYNC_BAD_MEMORY, not a RangeError', async t => {
  for (const value of [5, 1000, 0x7FFFFFFF]) {
    const b = new Barrier(2)
    new Int32Array(b.buffer, b.byteOffset, 2)[1] = value // WORD: ARRIVED beyond the parties
    t.throws(() => b.wait(0), { code: 'ERR_SABSYNC_BAD_MEMORY', message: /arrived, of 2: something else wrote over/ }, `ARRIVED ${value}`)
    await t.rejects(b.waitAsync({ timeout: 0 }), { code: 'ERR_SABSYNC_BAD_MEMORY' }, `waitAsync, ARRIVED ${value}`)
  }
})

t.test('a resized space file: the version error names the file and says it may have been resized', platform, async t => {
  const fs = require('fs')
  const name = spaceName(t)
  const { execFileSync } = require('child_process')
  execFileSync(process.execPath, ['-e', `require(${JSON.stringify(root)}).openShared(${JSON.stringify(name)}).close()`])
  fs.truncateSync(`/dev/shm/sabsync.${name}`, 3 << 20)
  t.throws(() => openShared(name), { code: 'ERR_SABSYNC_SHARED_VERSION', message: new RegExp(`^openShared: /dev/shm/sabsync\\.${name}: .*resized`) })
})

t.test('a number where a promise call takes options names { timeout: n }', async t => {
  const { Sema, RWLock, Latch, CondVar, AtomicFlag, Once, RateLimit } = sabsync
  const m = new Mutex()
  const calls = {
    'sema.acquire(1000)': () => new Sema(2).acquire(1000),
    'mutex.lockAsync(100)': () => m.lockAsync(100),
    'mutex.runExclusive(fn, 100)': () => m.runExclusive(() => {}, 100),
    'rwlock.readLockAsync(100)': () => new RWLock().readLockAsync(100),
    'rwlock.writeLockAsync(100)': () => new RWLock().writeLockAsync(100),
    'latch.waitAsync(100)': () => new Latch(1).waitAsync(100),
    'barrier.waitAsync(100)': () => new Barrier(2).waitAsync(100),
    'atomicFlag.waitAsync(false, 100)': () => new AtomicFlag().waitAsync(false, 100),
    'once.runAsync(fn, 100)': () => new Once().runAsync(() => {}, 100),
    'rateLimit(100)': () => RateLimit(5)(100)
  }
  for (const [what, call] of Object.entries(calls)) {
    let err
    try { await call() } catch (e) { err = e }
    t.match(err, { code: 'ERR_INVALID_ARG_TYPE', message: /"options" argument must be an object: a promise call takes its timeout as \{ timeout: 100?0? \}, not as a bare number/ }, what)
  }
  const cv = new CondVar()
  await m.lockAsync()
  let err
  try { await cv.waitAsync(m, 100) } catch (e) { err = e }
  t.match(err, { message: /\{ timeout: 100 \}/ }, 'condVar.waitAsync(mutex, 100)')
  m.unlock()
})

t.test('unlock() after a lockAsync() that was not awaited says the lock is not acquired yet', async t => {
  const m = new Mutex()
  // Another holder (a worker; in a one-thread app, an earlier request of
  // this thread whose lockAsync was served first).
  const w = new Worker(`
    const { workerData, parentPort } = require('worker_threads')
    const m = require(${JSON.stringify(root)}).Mutex.from(workerData)
    m.lock()
    parentPort.postMessage('held')
    parentPort.once('message', () => { m.unlock(); parentPort.close() })`, { eval: true, workerData: m })
  const exited = new Promise(resolve => w.once('exit', resolve))
  await new Promise(resolve => w.once('message', resolve))
  t.throws(() => m.unlock(), { code: 'ERR_SABSYNC_NOT_OWNER', message: /^unlock\(\): another thread \(or, in a shared space, another process\) holds it/ })
  const pending = m.lockAsync() // the await forgotten
  t.throws(() => m.unlock(), {
    code: 'ERR_SABSYNC_NOT_OWNER',
    message: /^unlock\(\): this thread does not hold it yet: a lockAsync\(\) call of this thread is still waiting for it\. Await lockAsync\(\) before the code it guards \(or use runExclusive\(\)\), then unlock\(\)/
  })
  w.postMessage('unlock')
  t.equal(await pending, true, 'the waiting call gets the lock')
  m.unlock()
  t.throws(() => m.unlock(), { code: 'ERR_SABSYNC_NOT_OWNER', message: /^unlock\(\): the mutex is not locked: it was unlocked already \(twice\?\)/ })
  await exited
})

t.test('a RateLimiter given another library\'s options names ours', async t => {
  const { RateLimiter } = sabsync
  t.throws(() => new RateLimiter({ windowMs: 60000, max: 100 }), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /windowMs \(express-rate-limit's\) is window here: window: 60000 \(ms\); max \(express-rate-limit's\) is limit here: limit: 100\. .*limiter\.store\(\)/
  })
  t.throws(() => new RateLimiter({ limit: 10, windowMs: 1000 }), { message: /windowMs \(express-rate-limit's\) is window here/ })
  t.throws(() => new RateLimiter({ points: 5, duration: 1 }), { message: /points \(rate-limiter-flexible's\) is limit here: limit: 5; duration .* window: 1000/ })
  t.doesNotThrow(() => new RateLimiter({ limit: 10, window: 1000, max: 3 }), 'ours given: theirs are not read')
})
