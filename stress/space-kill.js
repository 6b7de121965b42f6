'use strict'
// The SIGKILL soak of `npm run stress` for shared spaces: 3 processes use
// a space's Mutex, Sema (2 tokens) and RWLock (writers), blocking and
// async, and the driver SIGKILLs one of them at a random moment every few
// milliseconds, then starts a new one. Checked, in the space itself: never
// two inside the Mutex or the write lock, never more than 2 Sema holders
// (holders the driver killed excepted: they are gone); and at the end,
// with every process gone, the Mutex free, both tokens back, the RWLock
// free: nothing lost to any death.
//
//   node stress/space-kill.js [seconds]      (npm run stress runs it)
const { fork } = require('child_process')
const sabsync = require('..')

// Cells: [0] the pid inside the Mutex, [1] the pid inside the RWLock as a
// writer, [2] violations, [3] operations, [4..7) the pids holding a Sema
// token, [7..15) the pids the driver killed (a ring; [15] its next place).
// The driver writes a pid there before it kills it: a pid found inside
// that is in the ring is a dead holder, the only excuse for a second one.
const MUTEX = 0; const WRITER = 1; const BAD = 2; const OPS = 3
const HOLDERS = 4; const NHOLDERS = 3; const DEAD = 7; const NDEAD = 8; const DEAD_AT = 15
const CELLS = 16

function body (name) {
  const space = sabsync.openShared(name)
  const c = space.int32Array('cells', CELLS)
  const m = space.mutex('m')
  const s = space.sema('s', 2)
  const rw = space.rwlock('rw')
  const me = process.pid
  const dead = pid => { for (let i = 0; i < NDEAD; i++) if (Atomics.load(c, DEAD + i) === pid) return true; return false }
  const exclusive = cell => {
    const prev = Atomics.exchange(c, cell, me)
    if (prev !== 0 && !dead(prev)) Atomics.add(c, BAD, 1)
    for (let i = 0; i < 20; i++) Atomics.add(c, OPS, 1)
    Atomics.compareExchange(c, cell, me, 0)
  }
  const holding = () => {
    let mine = -1
    for (let i = 0; i < NHOLDERS && mine < 0; i++) {
      const v = Atomics.load(c, HOLDERS + i)
      if (v !== 0 && dead(v)) Atomics.compareExchange(c, HOLDERS + i, v, 0)
      if (Atomics.compareExchange(c, HOLDERS + i, 0, me) === 0) mine = i
    }
    let live = 0
    for (let i = 0; i < NHOLDERS; i++) {
      const v = Atomics.load(c, HOLDERS + i)
      if (v !== 0 && !dead(v)) live++
    }
    if (mine < 0 || live > 2) Atomics.add(c, BAD, 1)
    Atomics.add(c, OPS, 1)
    if (mine >= 0) Atomics.store(c, HOLDERS + mine, 0)
  }
  async function loop () {
    for (let k = 0; ; k++) {
      if (k % 2 === 0) {
        if (m.lock(20)) { exclusive(MUTEX); m.unlock() }
      } else if (await m.lockAsync({ timeout: 20 })) { exclusive(MUTEX); m.unlock() }
      const tok = k % 3 === 0 ? s.acquireSync(20) : await s.acquire({ timeout: 20 }).catch(() => undefined)
      if (tok !== undefined) { holding(); s.release(tok) }
      if (k % 4 === 0 && rw.writeLock(20)) { exclusive(WRITER); rw.writeUnlock() }
    }
  }
  process.send('ready')
  loop()
}

async function spaceKill (seconds = 20) {
  const name = `stress-kill-${process.pid}`
  sabsync.openShared.unlink(name)
  const space = sabsync.openShared(name)
  const c = space.int32Array('cells', CELLS)
  const m = space.mutex('m')
  const s = space.sema('s', 2)
  const rw = space.rwlock('rw')
  const start = () => {
    const p = fork(__filename, ['--child', name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    p.ready = new Promise(resolve => p.once('message', resolve))
    return p
  }
  let kids = [start(), start(), start()]
  await Promise.all(kids.map(k => k.ready))
  let kills = 0
  const until = Date.now() + seconds * 1000
  while (Date.now() < until) {
    await new Promise(resolve => setTimeout(resolve, 5 + Math.random() * 40))
    const k = Math.floor(Math.random() * kids.length)
    const at = Atomics.load(c, DEAD_AT)
    Atomics.store(c, DEAD + at, kids[k].pid)
    Atomics.store(c, DEAD_AT, (at + 1) % NDEAD)
    kids[k].kill('SIGKILL')
    kills++
    await new Promise(resolve => kids[k].once('exit', resolve))
    const fresh = start()
    kids = kids.map((p, i) => i === k ? fresh : p)
    await fresh.ready
  }
  for (const p of kids) p.kill('SIGKILL')
  await Promise.all(kids.map(p => new Promise(resolve => p.exitCode !== null || p.signalCode !== null ? resolve() : p.once('exit', resolve))))
  // Nothing lost: every object can be had in full once its holders died.
  const gotMutex = m.lock(5000)
  const t1 = s.acquireSync(5000)
  const t2 = s.acquireSync(5000)
  const gotWrite = rw.writeLock(5000)
  const ops = Atomics.load(c, OPS)
  const violations = Atomics.load(c, BAD)
  const ok = gotMutex && t1 !== undefined && t2 !== undefined && gotWrite && violations === 0 && ops > 0
  space.unlink()
  space.close()
  return {
    ok,
    detail: `${kills} SIGKILLs, ${ops} operations, ${violations} violations; afterwards the Mutex ${gotMutex ? 'free' : 'NOT FREE'}, ` +
      `${[t1, t2].filter(t => t !== undefined).length} of 2 tokens back, the RWLock ${gotWrite ? 'free' : 'NOT FREE'}`
  }
}

if (process.argv[2] === '--child') {
  body(process.argv[3])
} else if (require.main === module) {
  spaceKill(Number(process.argv[2]) || 20).then(r => {
    console.log((r.ok ? 'ok: ' : 'FAILED: ') + r.detail)
    process.exit(r.ok ? 0 : 1)
  })
}

module.exports = { spaceKill }
