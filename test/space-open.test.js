'use strict'
// openShared: names, sizes, modes, the directory (kinds and parameters that
// must agree, a full space), versions, close and unlink, and threads of one
// process sharing one mapping.
const t = require('tap')

// Real processes, each starting Node and opening the space: seconds apiece
// on a loaded machine, so past the suite's 120 s for a file there.
t.setTimeout(600000)
const fs = require('fs')
const { openShared, Mutex, wait, notify } = require('..')
const { spaceName, spawn } = require('./space-helpers')
const { exited, fixture } = require('./helpers')

const file = name => `/dev/shm/sabsync.${name}`

t.test('bad names, sizes, modes and keys are refused with clear errors', async t => {
  t.throws(() => openShared(), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' })
  t.throws(() => openShared(42), { name: 'TypeError', message: /"name"/ })
  t.throws(() => openShared(''), { name: 'RangeError', message: /"name"/ })
  t.throws(() => openShared('x'.repeat(201)), { name: 'RangeError' })
  t.throws(() => openShared('a/b'), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' })
  t.throws(() => openShared('..'), { code: 'ERR_INVALID_ARG_VALUE' })
  t.throws(() => openShared('a\nb'), { code: 'ERR_INVALID_ARG_VALUE' })
  const name = spaceName(t)
  t.throws(() => openShared(name, { size: 1024 }), { name: 'RangeError', message: /"options.size"/ })
  t.throws(() => openShared(name, { size: 2 ** 31 }), { name: 'RangeError' })
  t.throws(() => openShared(name, { size: '1mb' }), { name: 'TypeError' })
  t.throws(() => openShared(name, { mode: 0o1777 }), { name: 'RangeError', message: /"options.mode"/ })
  t.throws(() => openShared(name, null), { name: 'TypeError' })
  t.notOk(fs.existsSync(file(name)), 'nothing was made by refused calls')
  const space = openShared(name)
  t.teardown(() => space.close())
  t.throws(() => space.mutex(''), { name: 'RangeError', message: /"key"/ })
  t.throws(() => space.mutex('k'.repeat(81)), { name: 'RangeError' })
  t.throws(() => space.mutex(7), { name: 'TypeError' })
  t.throws(() => space.mutex('a\u0000b'), { code: 'ERR_INVALID_ARG_VALUE' })
  t.throws(() => space.int32Array('cells', 0), { name: 'RangeError', message: /"length"/ })
  t.throws(() => space.latch('l', -1), { name: 'RangeError' })
  t.throws(() => space.barrier('b', 0), { name: 'RangeError' })
})

t.test('the first opener creates the file with the mode; later ones attach', async t => {
  const name = spaceName(t)
  const a = openShared(name, { mode: 0o640 })
  t.ok(a.created)
  const st = fs.statSync(file(name))
  t.equal(st.mode & 0o777, 0o640)
  t.equal(st.size, 1 << 20, 'default size: 1 MiB')
  t.equal(a.size, 1 << 20)
  const b = openShared(name)
  const x = a.int32Array('x', 2)
  const y = b.int32Array('x', 2)
  x[1] = 42
  t.equal(y[1], 42, 'two opens in one thread: one mapping')
  t.throws(() => openShared(name, { size: 2 << 20 }), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  a.close()
  t.equal(b.int32Array('x', 2)[1], 42, 'still open through the other')
  t.throws(() => a.mutex('m'), { code: 'ERR_SABSYNC_SHARED_CLOSED' })
  b.close()
  b.close() // twice: nothing
  const other = spaceName(t)
  const c = openShared(other)
  t.equal(fs.statSync(file(other)).mode & 0o777, 0o600, 'default mode 0o600')
  c.close()
  // Another process attaches and sees what this one wrote.
  const d = openShared(name)
  d.int32Array('x', 2)[0] = 7
  const child = spawn(t, name, `
    if (space.created) throw new Error('the child created it')
    return Array.from(space.int32Array('x', 2))`)
  t.same(await child.done, [7, 42])
  d.close()
})

t.test('a key keeps its kind and parameters', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  space.int32Array('k', 4)
  space.latch('l', 3)
  space.barrier('b', 2)
  space.rwlock('r')
  t.throws(() => space.mutex('k'), { code: 'ERR_SABSYNC_SHARED_MISMATCH', name: 'SabsyncError' })
  t.throws(() => space.int32Array('k', 5), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  t.throws(() => space.bigInt64Array('k', 2), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  t.throws(() => space.latch('l', 4), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  t.equal(space.barrier('b', 3).parties, 3, 'a barrier of other parties: another version (the default)')
  t.throws(() => space.rwlock('r', { readerSlots: 8 }), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  t.equal(space.rwlock('r', { readerSlots: 64 }).buffer, space.rwlock('r').buffer, 'the default is 64 slots')
  t.equal(space.latch('l', 3).count, 3)
  // Another process gets the same answers.
  const child = spawn(t, name, `
    const out = []
    for (const f of [() => space.mutex('k'), () => space.latch('l', 9), () => space.int32Array('k', 4).length]) {
      try { out.push(f()) } catch (err) { out.push(err.code) }
    }
    return out`)
  t.same(await child.done, ['ERR_SABSYNC_SHARED_MISMATCH', 'ERR_SABSYNC_SHARED_MISMATCH', 4])
})

t.test('a full space says so', async t => {
  const name = spaceName(t)
  const space = openShared(name, { size: 512 * 1024 })
  t.teardown(() => space.close())
  let err
  let made = 0
  for (let i = 0; i < 1000 && err === undefined; i++) {
    try {
      space.int32Array('big' + i, 4096)
      made++
    } catch (e) {
      err = e
    }
  }
  t.ok(made > 0, `${made} arrays of 16 KiB fit`)
  t.match(err, { code: 'ERR_SABSYNC_SHARED_FULL', name: 'SabsyncError' })
  t.equal(space.int32Array('big0', 4096).length, 4096, 'what is there stays usable')
  let keys
  for (let i = 0; i < 2000 && keys === undefined; i++) {
    try {
      space.atomicFlag('f' + i)
    } catch (e) {
      keys = e
    }
  }
  t.match(keys, { code: 'ERR_SABSYNC_SHARED_FULL' }, 'the directory or the heap runs out')
})

t.test('a file of another layout version, or not a space, is refused', async t => {
  const name = spaceName(t)
  const header = Buffer.alloc(1 << 20)
  header.writeUInt32LE(0x53425331, 0) // the magic
  header.writeUInt32LE(99, 4) // a version from the future
  header.writeUInt32LE(1, 12) // ready
  fs.writeFileSync(file(name), header, { mode: 0o600 })
  t.throws(() => openShared(name), { code: 'ERR_SABSYNC_SHARED_VERSION', name: 'SabsyncError' })
  const child = spawn(t, '-', `
    try { sabsync.openShared(${JSON.stringify(name)}) } catch (err) { return err.code }`)
  t.equal(await child.done, 'ERR_SABSYNC_SHARED_VERSION', 'in another process too')
  fs.writeFileSync(file(name), Buffer.alloc(1 << 20, 0xAB))
  t.throws(() => openShared(name), { code: 'ERR_SABSYNC_SHARED_VERSION' })
  t.equal(openShared.unlink(name), true)
  t.equal(openShared.unlink(name), false, 'gone already')
})

t.test('close ends this thread\'s owner id (and detaches its objects); unlink leaves open spaces working', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const m = space.mutex('m')
  const cells = space.int32Array('c', 1)
  t.ok(m.lock())
  space.close()
  if (cells.buffer instanceof SharedArrayBuffer) {
    // Node 24.16+ / 26.1+ hands out a SharedArrayBuffer, which cannot be
    // detached: the objects must not be used after close (README).
    t.comment('the space\'s buffer is a SharedArrayBuffer here: nothing to detach')
  } else {
    t.throws(() => m.unlock(), { code: 'ERR_SABSYNC_SHARED_CLOSED', message: new RegExp(`"${name}" was closed.*openShared`) },
      'its memory is no longer reachable here: the error says so, and what to do')
    t.equal(cells.length, 0, 'its arrays are detached')
  }
  const again = openShared(name)
  t.ok(again.mutex('m').tryLock(), 'the closed view\'s holder ended: its lock passed on')
  t.ok(again.mutex('m').ownerDied)
  t.equal(again.unlink(), true)
  t.notOk(fs.existsSync(file(name)))
  const c2 = again.int32Array('c2', 1)
  c2[0] = 5
  t.equal(again.int32Array('c2', 1)[0], 5, 'still usable after unlink')
  const fresh = openShared(name)
  t.equal(fresh.int32Array('c2', 1)[0], 5, 'the same mapping while this thread has it open')
  again.close()
  fresh.close()
})

t.test('threads of one process share one mapping and have their own owner ids', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const cells = space.int32Array('c', 2)
  const m = space.mutex('m')
  t.ok(m.lock())
  const w = fixture('space-open/threads-share-mapping', name)
  const r = wait(cells, 1, 0, 30000)
  t.not(r, 'timed-out')
  t.not(cells[1], space.ownerId, 'another owner id')
  t.equal(cells[0], 0, 'the worker waits for the lock')
  m.unlock()
  await exited(w)
  t.equal(cells[0], 1)
  t.equal(notify(cells, 0), 0)
  t.type(Mutex, 'function')
})
