'use strict'
// RWLock: many readers or one writer; writer preference; a dead writer's
// lock passes on with `ownerDied`, a dead reader's read locks are released.
//
// Memory (Int32 cells):
//
//   [0] TAG     'RWL1', the kind tag (lib/kind.js), written last by the
//               constructor, read only by RWLock.from
//   [1] STATE   writer bits, below
//   [2] DRAIN   a sequence: bumped when a reader leaves while a writer
//               drains (WW) or a reader waits for a slot (SLOT_WAIT)
//   [3] DIED    1 from the moment a dead writer's write lock is reclaimed
//               until the next writeUnlock (`ownerDied`)
//   [4] N       the number of reader slots
//   [5] HWM     slots at or above this index have never been used
//   [6..7]      0
//   [8..11]     the writers' Mutex (lib/mutex.js)
//   [12..12+N)  reader slots: the owner id of a thread that holds at least
//               one read lock, or 0
//
//   STATE bit 31  WL         a writer holds the write lock
//         bit 30  WW         a writer holds the writers' Mutex and waits for
//                            the readers to leave; new readers wait
//         bit 29  SLOT_WAIT  a reader waits for a free slot
//
// Writers queue on the writers' Mutex, which gives them FIFO-ish order,
// owner checks, and takeover when a writer dies. Readers do not count
// themselves in a shared counter: a thread announces itself in its own
// slot and keeps its recursion count locally (per thread, for every
// RWLock object over this memory). That makes each slot a fact about a
// thread that the thread changes in one atomic step, so a survivor can
// read what a dead thread held: a slot naming a dead id holds nothing.
//
// Reader and writer meet Dekker-style, with seq-cst accesses:
//   reader: slot := id; HWM := max(HWM, slot+1); read STATE (writer? undo)
//   writer: STATE |= WW; read DRAIN; read the slots below HWM (readers? park on DRAIN)
//   reader leaving: slot := 0; read STATE (WW? DRAIN++, wake)
// Either the reader sees WW, or the writer sees the reader's slot; and a
// reader that leaves after the writer's scan sees WW and bumps DRAIN after
// the writer read it, so the writer's park does not sleep through it.
//
// Waiters watch every owner (WATCH_ANY): a dead reader must wake a draining
// writer, and a dead writer the readers parked on STATE.

const {
  backendOf, memoryOf, madeAs, parseTimeout, parseAsyncOptions,
  SabsyncError, outOfRange
} = require('./shared')
const { PARK, Wait, settleSync, settleAsync, addressKey, LOCK_RWLOCK } = require('./waiting')
const { attachTo, writeTag, sizeAgrees } = require('./kind')
const { Mutex, internals } = require('./mutex')
const { LOCK, partOf } = require('./inside')

const STATE = 1
const DRAIN = 2
const DIED = 3
const NSLOTS = 4
const HWM = 5
const MUTEX_BYTES = 32 // where the writers' Mutex begins
const SLOT0 = 12

const WL = 0x80000000 | 0
const WW = 0x40000000
const SLOT_WAIT = 0x20000000
const WRITER = WL | WW

const DEFAULT_SLOTS = 64
const MAX_SLOTS = 65536
const ATTACH = Symbol('attach')

function bytesFor (slots) {
  return SLOT0 * 4 + Math.ceil(slots / 2) * 8
}

function deadlock (what) {
  return new SabsyncError('ERR_SABSYNC_DEADLOCK', what + ': it would wait forever')
}

function notOwner (what) {
  return new SabsyncError('ERR_SABSYNC_NOT_OWNER', what)
}

// This thread's read holds, per RWLock memory: { count, slot, hint }.
const locals = new Map()

// ---- reader slots ----

function raiseHwm (i32, k) {
  for (let h = Atomics.load(i32, HWM); h <= k;) {
    const seen = Atomics.compareExchange(i32, HWM, h, k + 1)
    if (seen === h) break
    h = seen
  }
  return k
}

// Claim a slot for this thread: the last one it used, a free one, or one
// left by a dead thread. -1 when every slot names a live thread.
function claim (r) {
  const i32 = r.i32
  const n = r.n
  const { self, alive } = r.own
  let k = r.local.hint
  if (Atomics.load(i32, SLOT0 + k) === 0 && Atomics.compareExchange(i32, SLOT0 + k, 0, self) === 0) return raiseHwm(i32, k)
  for (k = 0; k < n; k++) {
    if (Atomics.load(i32, SLOT0 + k) === 0 && Atomics.compareExchange(i32, SLOT0 + k, 0, self) === 0) {
      r.local.hint = k
      return raiseHwm(i32, k)
    }
  }
  for (k = 0; k < n; k++) {
    const v = Atomics.load(i32, SLOT0 + k)
    if (v !== 0 && v !== self && !alive(v) && Atomics.compareExchange(i32, SLOT0 + k, v, self) === v) {
      r.local.hint = k
      return raiseHwm(i32, k)
    }
  }
  return -1
}

// Give slot k back; tell a draining writer or a reader waiting for a slot.
function release (r, k) {
  const i32 = r.i32
  Atomics.store(i32, SLOT0 + k, 0)
  let s = Atomics.load(i32, STATE)
  if ((s & (WW | SLOT_WAIT)) === 0) return
  while ((s & SLOT_WAIT) !== 0) {
    const seen = Atomics.compareExchange(i32, STATE, s, s & ~SLOT_WAIT)
    if (seen === s) break
    s = seen
  }
  Atomics.add(i32, DRAIN, 1)
  r.wakeDrain(Infinity)
}

// Whether a live thread (this one included) holds a read lock.
function readersIn (r) {
  const i32 = r.i32
  const hwm = Math.min(Atomics.load(i32, HWM), r.n)
  const { self, alive } = r.own
  for (let k = 0; k < hwm; k++) {
    const v = Atomics.load(i32, SLOT0 + k)
    if (v !== 0 && (v === self || alive(v))) return true
  }
  return false
}

// ---- writer state ----

function setState (i32, fn) {
  for (let s = Atomics.load(i32, STATE); ;) {
    const seen = Atomics.compareExchange(i32, STATE, s, fn(s))
    if (seen === s) return s
    s = seen
  }
}

// This thread holds the writers' Mutex: take over what a dead writer left,
// then announce itself (new readers wait from here on).
function announce (r) {
  const s = Atomics.load(r.i32, STATE)
  if (r.mutex.ownerDied && (s & WL) !== 0) Atomics.store(r.i32, DIED, 1)
  setState(r.i32, s => (s & SLOT_WAIT) | WW)
}

function becomeWriter (r) {
  setState(r.i32, s => (s & SLOT_WAIT) | WL)
  return true
}

// A writer that gives up while readers drain: let the readers in again.
function abandonWrite (r) {
  setState(r.i32, s => s & SLOT_WAIT)
  r.wakeState(Infinity)
  r.mutex.unlock()
}

// A reader found writer bits and the writers' Mutex held by a dead thread
// (or free): clear what that writer left, under the Mutex.
function reclaimWriter (r) {
  if (!r.mutex.tryLock()) return
  const s = Atomics.load(r.i32, STATE)
  if ((s & WL) !== 0) Atomics.store(r.i32, DIED, 1)
  setState(r.i32, s => s & SLOT_WAIT)
  r.wakeState(Infinity)
  r.mutex.unlock()
}

// ---- decisions ----

function attemptRead (w) {
  const r = w.rw
  const i32 = r.i32
  for (;;) {
    // Another task of this thread got a read lock while this one waited
    // (async readers of one thread wait side by side): this thread is a
    // reader already, so this is one more hold on its slot. Claiming a
    // second slot would count two holds as one and leak a slot.
    if (r.local.count > 0) {
      r.local.count++
      return true
    }
    const epoch = r.own.deathEpoch()
    const drain = Atomics.load(i32, DRAIN)
    const s = Atomics.load(i32, STATE)
    if ((s & WRITER) !== 0) {
      const o = internals.ownerOf(r.mutex)
      if (o === r.own.self) {
        // This thread writes (or waits to): a blocking reader would wait
        // for itself. An async reader waits for this thread's writeUnlock.
        if (w.trying) return false
        if (!w.async) throw deadlock('readLock() by the thread that holds or waits for the write lock')
      } else if (o === 0 || !r.own.alive(o)) {
        reclaimWriter(r)
        continue
      }
      const wait = w.remaining()
      if (wait === 0) return false
      w.cell = STATE
      w.value = s
      w.wait = wait
      w.epoch = epoch
      return PARK
    }
    const k = claim(r)
    if (k < 0) {
      const wait = w.remaining()
      if (wait === 0) return false
      // Flag first, then look again, then park: a reader that leaves after
      // our second look sees the flag and bumps DRAIN.
      if ((s & SLOT_WAIT) === 0) {
        Atomics.compareExchange(i32, STATE, s, s | SLOT_WAIT)
        continue
      }
      w.cell = DRAIN
      w.value = drain
      w.wait = wait
      w.epoch = epoch
      return PARK
    }
    if ((Atomics.load(i32, STATE) & WRITER) !== 0) {
      release(r, k) // a writer announced itself meanwhile: it goes first
      continue
    }
    r.local.count = 1
    r.local.slot = k
    return true
  }
}

// The writer holds the writers' Mutex and has announced itself; wait for
// the readers to leave.
function attemptDrain (w) {
  const r = w.rw
  const epoch = r.own.deathEpoch()
  const drain = Atomics.load(r.i32, DRAIN)
  if (!readersIn(r)) return becomeWriter(r)
  const wait = w.remaining()
  if (wait === 0) {
    abandonWrite(r)
    return false
  }
  w.cell = DRAIN
  w.value = drain
  w.wait = wait
  w.epoch = epoch
  return PARK
}

function abandonDrain (w) {
  abandonWrite(w.rw)
}

function newWait (r, timeout, async, trying = false) {
  const w = new Wait(r.i32, timeout, r.own)
  w.rw = r
  w.async = async
  w.trying = trying
  w.traced = r.traced // from its first park (lib/waiting.js)
  w.lockWait = true // watched for deadlocks (lib/inside.js)
  w.lockView = r.i32
  w.lockKind = LOCK_RWLOCK
  return w
}

// ---- the class ----

class RWLock {
  #r

  static get byteLength () { return bytesFor(DEFAULT_SLOTS) }

  // Bytes for an RWLock with `readerSlots` slots.
  static byteLengthFor (readerSlots) {
    return bytesFor(slotsArg(readerSlots))
  }

  static from (handle) {
    return new RWLock(attachTo('RWLock', handle), ATTACH)
  }

  // options.readerSlots: how many threads may hold read locks at the same
  // time (default 64); one more waits for a slot to free.
  constructor (options, attach) {
    let n
    let mem
    if (attach === ATTACH) {
      const { buffer, byteOffset, byteLength } = options
      const head = memoryOf('RWLock', SLOT0 * 4, { buffer, byteOffset }, 'handle')
      n = Atomics.load(head.i32, NSLOTS)
      if (!(n >= 1 && n <= MAX_SLOTS)) throw outOfRange('handle', 'an initialised RWLock', n)
      sizeAgrees('RWLock', head.byteOffset, byteLength, bytesFor(n), `an RWLock of ${n} reader slots`)
      mem = memoryOf('RWLock', bytesFor(n), { buffer, byteOffset }, 'handle')
    } else {
      const slots = options !== null && typeof options === 'object' ? options.readerSlots : undefined
      n = slots === undefined ? DEFAULT_SLOTS : slotsArg(slots, 'options.readerSlots')
      mem = memoryOf('RWLock', bytesFor(n), options)
      mem.i32.fill(0)
      Atomics.store(mem.i32, NSLOTS, n)
    }
    const { buffer, byteOffset, i32 } = mem
    this.buffer = buffer
    this.byteOffset = byteOffset
    this.byteLength = i32.byteLength
    const key = addressKey(i32, STATE)
    const own = backendOf(buffer)
    let local = locals.get(key)
    if (local === undefined) {
      local = { count: 0, slot: -1, hint: own.self % n }
      locals.set(key, local)
    }
    const mutex = attach === ATTACH
      ? Mutex.from({ buffer, byteOffset: byteOffset + MUTEX_BYTES })
      : new Mutex({ buffer, byteOffset: byteOffset + MUTEX_BYTES })
    this.#r = {
      i32,
      n,
      local,
      mutex,
      own,
      wakeState: own.waker(i32, STATE),
      wakeDrain: own.waker(i32, DRAIN),
      traced: { channel: LOCK, object: this, kind: 'RWLock' }
    }
    // Its writers' waits and deaths on the Mutex are told as the RWLock's:
    // a writer that waits for other writers, then for the readers to
    // leave, is traced as two waits.
    partOf(mutex, this, 'RWLock')
    internals.waitsAs(mutex, i32, LOCK_RWLOCK)
    if (attach !== ATTACH) writeTag(i32, 'RWLock') // last: its memory is set up
    madeAs(this, 'RWLock')
  }

  get readerSlots () { return this.#r.n }

  // A dead writer's write lock was reclaimed and no writeUnlock since.
  get ownerDied () { return Atomics.load(this.#r.i32, DIED) === 1 }

  // How many lock calls wait, in every thread: readers queued for the
  // writer to go (or for a slot), a writer queued for the readers to
  // leave, and writers queued on the writers' Mutex.
  nrWaiting () {
    const r = this.#r
    return r.own.waitersOf(r.i32, STATE) + r.own.waitersOf(r.i32, DRAIN) + r.mutex.nrWaiting()
  }

  // The writer holding the write lock: { pid, threadId }, or null (no
  // writer; see Mutex.holder). Readers are not named.
  get writer () {
    const r = this.#r
    return (Atomics.load(r.i32, STATE) & WL) === 0 ? null : r.mutex.holder
  }

  // ---- readers ----

  // A thread that holds a read lock gets more at once (a count), even while
  // a writer waits: waiting would deadlock recursive readers.
  readLock (timeout) {
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    const r = this.#r
    if (r.local.count > 0) {
      r.local.count++
      return true
    }
    return settleSync(newWait(r, t, false), attemptRead)
  }

  tryReadLock () {
    const r = this.#r
    if (r.local.count > 0) {
      r.local.count++
      return true
    }
    return settleSync(newWait(r, 0, false, true), attemptRead)
  }

  readLockAsync (options) {
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    const r = this.#r
    if (r.local.count > 0) {
      r.local.count++
      return Promise.resolve(true)
    }
    const w = newWait(r, timeout, true)
    w.signal = signal
    w.ref = ref
    return settleAsync(w, attemptRead)
  }

  readUnlock () {
    const r = this.#r
    if (r.local.count === 0) throw notOwner('readUnlock() by a thread that holds no read lock')
    if (--r.local.count > 0) return
    const k = r.local.slot
    r.local.slot = -1
    release(r, k)
  }

  // ---- writers ----

  writeLock (timeout) {
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    const r = this.#r
    if (r.local.count > 0) throw deadlock('writeLock() by a thread that holds a read lock')
    if (internals.heldByMe(r.mutex)) throw deadlock('writeLock() by the thread that holds the write lock')
    const deadline = t === Infinity ? Infinity : performance.now() + t
    if (!r.mutex.lock(t)) return false
    announce(r)
    if (!readersIn(r)) return becomeWriter(r)
    const w = newWait(r, Infinity, false)
    w.deadline = deadline
    return settleSync(w, attemptDrain)
  }

  tryWriteLock () {
    const r = this.#r
    if (r.local.count > 0 || internals.heldByMe(r.mutex)) return false
    if (!r.mutex.tryLock()) return false
    announce(r)
    if (!readersIn(r)) return becomeWriter(r)
    abandonWrite(r)
    return false
  }

  // Async writers of one thread queue on the writers' Mutex (lockAsync).
  // A read lock this thread holds (another task's) is waited for.
  async writeLockAsync (options) {
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (signal !== undefined && signal.aborted) throw signal.reason
    const r = this.#r
    const deadline = timeout === Infinity ? Infinity : performance.now() + timeout
    if (!(await r.mutex.lockAsync({ timeout, signal, ref }))) return false
    announce(r)
    if (!readersIn(r)) return becomeWriter(r)
    const w = newWait(r, Infinity, true)
    w.deadline = deadline
    w.signal = signal
    w.ref = ref
    return settleAsync(w, attemptDrain, abandonDrain)
  }

  writeUnlock () {
    const r = this.#r
    if (!internals.heldByMe(r.mutex) || (Atomics.load(r.i32, STATE) & WL) === 0) {
      throw notOwner('writeUnlock() by a thread that does not hold the write lock')
    }
    if (Atomics.load(r.i32, DIED) !== 0) Atomics.store(r.i32, DIED, 0)
    setState(r.i32, s => s & SLOT_WAIT)
    r.wakeState(Infinity)
    r.mutex.unlock()
  }
}

function slotsArg (n, name = 'readerSlots') {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_SLOTS) {
    throw outOfRange(name, `an integer >= 1 and <= ${MAX_SLOTS}`, n)
  }
  return n
}

module.exports = { RWLock }
