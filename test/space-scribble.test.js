'use strict'
// A process that writes random bytes over every byte of a shared space that
// JS can reach (the death epoch, the waiter counters, and every object) while
// two other processes use a Mutex, a Sema, a RateLimit and raw cells in it:
// the users get answers, errors with a code, or timeouts, and never crash
// (under ASan too: scripts/test-flavour.sh runs this file against the
// sanitized build). Then the space is still usable by a fresh key.
const t = require('tap')

// Real processes, each starting Node and opening the space: seconds apiece
// on a loaded machine, so past the suite's 120 s for a file there.
t.setTimeout(600000)
const { openShared } = require('..')
const { spaceName, spawn } = require('./space-helpers')

const MS = Number(process.env.SCRIBBLE_MS) || 1500

const user = `
  const m = space.mutex('m')
  const pool = space.sema('pool', 2)
  const limit = space.rateLimit('rate', 50, { timeUnit: 100 })
  const cells = space.int32Array('cells', 8)
  send('ready')
  await next() // the scribbler runs from here on
  const codes = {}
  let ops = 0
  const note = err => {
    const ok = err && (typeof err.code === 'string' || err instanceof TypeError || err instanceof RangeError)
    const code = ok ? (err.code || err.name) : 'UNEXPECTED ' + (err && err.stack)
    codes[code] = (codes[code] || 0) + 1
  }
  const end = Date.now() + ${MS}
  while (Date.now() < end) {
    const tries = [
      () => { if (m.lock(5)) m.unlock() },
      async () => { if (await m.lockAsync({ timeout: 5 })) m.unlock() },
      () => { const tok = pool.acquireSync(5); if (tok !== undefined) pool.release(tok) },
      async () => { const tok = await pool.acquire({ timeout: 5 }); if (tok !== undefined) pool.release(tok) },
      () => limit.sync(5),
      () => sabsync.wait(cells, ops & 7, cells[ops & 7], 2),
      async () => { const r = sabsync.waitAsync(cells, ops & 7, cells[ops & 7], 2); if (r.async) await r.value },
      () => sabsync.notify(cells, ops & 7, 1) + sabsync.waiters(cells, ops & 7)
    ]
    try { await tries[ops % tries.length]() } catch (err) { note(err) }
    ops++
  }
  return { ops, codes }`

t.test('scribbled memory earns errors, wrong answers or timeouts, never a crash', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  // Make the objects before anyone scribbles.
  space.mutex('m')
  space.sema('pool', 2)
  space.rateLimit('rate', 50, { timeUnit: 100 })
  space.int32Array('cells', 8)
  const users = [spawn(t, name, user), spawn(t, name, user)]
  await Promise.all(users.map(u => u.message(m => m === 'ready')))
  const scribbler = spawn(t, name, `
    const cells = space.int32Array('cells', 8)
    const bytes = new Uint8Array(cells.buffer)
    // The epoch, the counters and every object lie below the end of the
    // last object made (the cells); the rest is the empty heap.
    const hot = cells.byteOffset + cells.byteLength
    for (;;) {
      for (let i = 0; i < 200; i++) bytes[(Math.random() * hot) | 0] = (Math.random() * 256) | 0
      for (let i = 0; i < 20; i++) bytes[(Math.random() * bytes.length) | 0] = (Math.random() * 256) | 0
      await new Promise(resolve => setImmediate(resolve))
    }`)
  for (const u of users) u.send('go')
  const results = await Promise.all(users.map(u => u.done))
  scribbler.kill('SIGKILL')
  await scribbler.exited
  for (const r of results) {
    t.ok(r.ops > 0, `${r.ops} operations; errors: ${JSON.stringify(r.codes)}`)
    t.same(Object.keys(r.codes).filter(c => c.startsWith('UNEXPECTED')), [], 'only errors with a code')
  }
  // A fresh object works after all that.
  const m = space.mutex('after')
  t.ok(m.tryLock())
  m.unlock()
  const cells = space.int32Array('after-cells', 1)
  t.equal(require('..').wait(cells, 0, 0, 1), 'timed-out')
})
