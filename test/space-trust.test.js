'use strict'
// A shared space against a hostile or broken co-tenant: another user who
// squats the name, and another process that writes the space's file. What
// must hold: the squatted file is refused (naming it), a space in use is
// never initialised again, two names never share a file, and whatever the
// private part holds (holder ids of live threads, pointer-like values),
// every timed call returns within its timeout plus slack, and close() and
// exit stay clean: no signal, no hang.
const t = require('tap')
const fs = require('fs')
const { execFileSync, spawnSync } = require('child_process')
const path = require('path')
const sabsync = require('..')
const { spaceName, spawn, LAYOUT, file, pwrite, liveIds } = require('./space-helpers')

const { openShared } = sabsync
const root = path.join(__dirname, '..')
const { BUCKETS_OFF, NBUCKETS, DIR_LOCK, PUBLIC_OFF } = LAYOUT

// A user other than this one, to squat as: `runuser -u nobody` when the
// tests run as root and nobody can run this checkout's node.
// (Through `env -i`: the test runner adds hooks to every child's
// environment, and they write where nobody may not.)
function otherUser () {
  if (process.getuid() !== 0) return { skip: 'needs root to act as a second user (runuser -u nobody)' }
  const argv = code => ['-u', 'nobody', '--', 'env', '-i', 'PATH=' + process.env.PATH, process.execPath, '-e', code]
  const probe = spawnSync('runuser', argv(`require(${JSON.stringify(root)})`), { encoding: 'utf8' })
  if (probe.error || probe.status !== 0) return { skip: 'runuser -u nobody cannot run node here: ' + (probe.error ? probe.error.message : probe.stderr.split('\n')[0]) }
  return { run: code => execFileSync('runuser', argv(code), { encoding: 'utf8' }) }
}

const other = otherUser()

t.test('a name squatted by another user is refused, and the error names the file', { skip: other.skip }, async t => {
  for (const mode of [0o666, 0o600]) {
    const name = spaceName(t)
    other.run(`require('fs').writeFileSync(${JSON.stringify(file(name))}, Buffer.alloc(1 << 20)); require('fs').chmodSync(${JSON.stringify(file(name))}, ${mode})`)
    t.equal(fs.statSync(file(name)).uid !== process.getuid(), true, 'the file is the other user\'s')
    t.throws(() => openShared(name, { mode: 0o600 }), { code: 'ERR_SABSYNC_SHARED_FOREIGN', message: new RegExp(file(name).replace(/[.]/g, '\\.')) },
      `mode ${mode.toString(8)}: refused`)
    // Not touched: still the squatter's, with its mode.
    const st = fs.statSync(file(name))
    t.equal(st.mode & 0o777, mode)
    t.equal(st.size, 1 << 20)
  }
})

t.test('another user reaches a space only through the mode asked', { skip: other.skip }, async t => {
  const name = spaceName(t)
  const space = openShared(name, { mode: 0o600 })
  t.equal(fs.statSync(file(name)).mode & 0o777, 0o600, 'exactly the mode asked')
  const out = other.run(`try { require(${JSON.stringify(root)}).openShared(${JSON.stringify(name)}, { mode: 0o666 }); console.log('opened') } catch (e) { console.log(e.code, e.message) }`)
  t.match(out, /ERR_SABSYNC_SHARED_SYSTEM .*\/dev\/shm\/sabsync\..*Permission denied/, 'a 0o600 space: denied, naming the file')
  space.close()

  const shared = spaceName(t)
  const s2 = openShared(shared, { mode: 0o666 })
  s2.int32Array('cells', 1)[0] = 7
  // Another user may attach where the mode asked gives it access and the
  // file is no wider than asked.
  const seen = other.run(`const s = require(${JSON.stringify(root)}).openShared(${JSON.stringify(shared)}, { mode: 0o666 }); console.log(s.int32Array('cells', 1)[0]); s.close()`)
  t.equal(seen.trim(), '7')
  const narrow = other.run(`try { require(${JSON.stringify(root)}).openShared(${JSON.stringify(shared)}, { mode: 0o660 }); console.log('opened') } catch (e) { console.log(e.code) }`)
  t.equal(narrow.trim(), 'ERR_SABSYNC_SHARED_FOREIGN', 'a file wider than the mode asked is refused')
  s2.close()
})

t.test('a link at the name, or a file that is no space, is never used or initialised', async t => {
  const name = spaceName(t)
  const target = `/dev/shm/sabsync-trust-target-${process.pid}`
  fs.writeFileSync(target, 'not a space')
  t.teardown(() => fs.rmSync(target, { force: true }))
  fs.symlinkSync(target, file(name))
  t.throws(() => openShared(name), { code: 'ERR_SABSYNC_SHARED_FOREIGN' }, 'a symbolic link is not followed')
  t.equal(fs.readFileSync(target, 'utf8'), 'not a space')
  fs.unlinkSync(file(name))

  fs.writeFileSync(file(name), Buffer.alloc(1 << 20))
  t.throws(() => openShared(name), { code: 'ERR_SABSYNC_SHARED_VERSION', message: /never initialised again/ }, 'a zero-filled file is not made a space')
  t.equal(fs.readFileSync(file(name)).every(b => b === 0), true, 'and it is left as it was')
})

t.test('a space whose header was zeroed while in use is reported, never made again', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const m = space.mutex('m')
  t.equal(m.tryLock(), true)
  const fd = fs.openSync(file(name), 'r+')
  fs.writeSync(fd, Buffer.alloc(64), 0, 64, 0)
  fs.closeSync(fd)
  // Another process opens the name: it must neither initialise it nor take
  // the Mutex this one holds.
  const child = spawn(t, '-', `
    try { sabsync.openShared(${JSON.stringify(name)}); return 'opened' } catch (e) { return e.code }
  `)
  t.equal(await child.done, 'ERR_SABSYNC_SHARED_VERSION')
  t.equal(m.isLocked, true, 'still held here')
  m.unlock()
  space.close()
})

t.test('names and keys that are not well-formed UTF-16 are refused', async t => {
  for (const bad of ['x\ud800y', 'x\udfffy', '\udc00', 'a\ud83d']) {
    t.throws(() => openShared(bad), { code: 'ERR_INVALID_ARG_VALUE', message: /lone surrogate/ })
  }
  const space = openShared(spaceName(t))
  t.throws(() => space.mutex('k\ud800'), { code: 'ERR_INVALID_ARG_VALUE' })
  t.ok(space.mutex('k\ud83d\ude00'), 'a surrogate pair is fine')
  space.close()
})

// A victim: timed calls on every primitive, each timed; reports the worst
// overshoot past its timeout (`worst`; for the calls with no timeout,
// notify and a lookup, the longest call: `untimed`) and what the calls
// answered.
const VICTIM = `
  const m = space.mutex('m'); const s = space.sema('s', 1); const cells = space.int32Array('cells', 4)
  const rw = space.rwlock('rw'); const latch = space.latch('latch', 1); const flag = space.atomicFlag('flag')
  send({ ready: true })
  const answers = {}
  let worst = 0
  let worstWhat = ''
  let untimed = 0
  let untimedWhat = ''
  // The time this thread waited for a CPU is taken out of what a call took.
  const { ownClock } = require('./run-queue')
  const timed = (what, ms, fn) => {
    const clock = ownClock()
    let r
    try { r = String(fn()) } catch (e) { r = e.code || e.message }
    const took = clock()
    if (ms > 0 && took - ms > worst) { worst = took - ms; worstWhat = what }
    if (ms === 0 && took > untimed) { untimed = took; untimedWhat = what }
    answers[what + ':' + r] = (answers[what + ':' + r] || 0) + 1
  }
  const until = Date.now() + Number(process.env.VICTIM_MS || 1500)
  while (Date.now() < until) {
    timed('wait', 5, () => sabsync.wait(cells, 0, 0, 5))
    let ok, tok
    timed('lock', 3, () => (ok = m.lock(3)))
    if (ok === true) timed('unlock', 0, () => m.unlock())
    timed('acquire', 2, () => (tok = s.acquireSync(2)) !== undefined)
    if (tok !== undefined) timed('release', 0, () => s.release(tok))
    timed('notify', 0, () => sabsync.notify(cells, 0, 1))
    timed('read', 4, () => (ok = rw.readLock(4)))
    if (ok === true) timed('readUnlock', 0, () => rw.readUnlock())
    timed('latch', 2, () => latch.wait(2))
    timed('flag', 2, () => flag.wait(true, 2))
    timed('open', 0, () => space.mutex('m-' + (Date.now() % 7)) && 'ok')
  }
  const took = ownClock()
  space.close()
  return { worst, worstWhat, untimed, untimedWhat, answers, close: took() }
`

// Two victims make timed calls in a space while `attack(name, victims)`
// writes its file; then each must have exited cleanly, with no signal,
// every timed call within its timeout plus slack (a quiet machine shows a
// few ms; the bound is for a loaded one; the time a call's thread spent
// waiting for a CPU is not counted), a call with no timeout within
// the bound of the space's bookkeeping locks (250 ms) plus slack, every
// answer a result or a sabsync error code, and close() within 1 s.
async function underAttack (t, attack) {
  const name = spaceName(t)
  const space = openShared(name)
  space.int32Array('cells', 4)
  const victims = [spawn(t, name, VICTIM), spawn(t, name, VICTIM)]
  await Promise.all(victims.map(v => v.message(m => m && m.ready)))
  await attack(name, victims)
  for (const v of victims) {
    const r = await v.done
    const exit = await v.exited
    t.equal(exit.signal, null, 'no signal')
    t.equal(exit.code, 0, 'a clean exit')
    t.ok(r.worst < 200, `every timed call returned within its timeout plus slack (worst ${r.worst.toFixed(1)} ms over, in ${r.worstWhat || 'none'})`)
    t.ok(r.untimed < 250 + 200, `every call with no timeout returned within 250 ms plus slack (worst ${r.untimed.toFixed(1)} ms, in ${r.untimedWhat || 'none'})`)
    const odd = Object.keys(r.answers).filter(a => !/:(true|false|undefined|ok|not-equal|timed-out|0|1|ERR_SABSYNC_[A-Z_]+)$/.test(a))
    t.same(odd, [], 'every answer a result or an ERR_SABSYNC_ code')
    t.ok(r.close < 1000, `close() returned in ${r.close.toFixed(1)} ms`)
  }
  space.close()
}

t.test('a holder id of a live thread in every bookkeeping lock: timed calls keep their deadlines', async t => {
  await underAttack(t, async name => {
    // Every bucket lock and the directory lock name a live owner (with its
    // waiters bit), as a co-tenant that wanted them hung would write.
    const ids = liveIds(name)
    t.ok(ids.length >= 3, 'live owners found in the slots')
    const word = Buffer.alloc(4)
    word.writeUInt32LE((ids[0] | 0x80000000) >>> 0)
    const start = Date.now()
    while (Date.now() - start < 1000) {
      for (let b = 0; b < NBUCKETS; b++) pwrite(name, BUCKETS_OFF + b * 64, word)
      pwrite(name, DIR_LOCK, word)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
  })
})

t.test('scribbling the whole private part with pointers, pids and ids: no signal, no hang', async t => {
  await underAttack(t, async (name, victims) => {
    const ids = liveIds(name)
    const values = [0x42424240, 0x42424242, 0xffffffff, 0x80000000, 1, 2, 3,
      ...victims.map(v => v.pid), process.pid, ...ids, ...ids.map(i => (i | 0x80000000) >>> 0)]
    let seed = 12345
    const rand = n => { seed = (seed * 1103515245 + 12345) >>> 0; return seed % n }
    const start = Date.now()
    while (Date.now() - start < 1200) {
      const buf = Buffer.alloc(4096)
      for (let i = 0; i < 1024; i++) buf.writeUInt32LE(values[rand(values.length)] >>> 0, i * 4)
      pwrite(name, 4096 + rand(Math.floor((PUBLIC_OFF - 8192) / 4)) * 4, buf)
      if (rand(4) === 0) pwrite(name, 0, buf.subarray(0, 512)) // the header too
      await new Promise(resolve => setImmediate(resolve))
    }
  })
})
