'use strict'
// Mutex: a lock in 16 bytes of shared memory that survives its owner and is
// eventually fair.
//
// Memory, four Int32 cells:
//
//   [0] TAG   'MTX1', the kind tag (lib/kind.js), written last by the
//             constructor and read only by Mutex.from
//   [1] WORD  the lock word, below
//   [2] SLOT  the one "starving" waiter, parked on this cell: its owner id,
//             | GRANT (bit 30) once an unlock has handed it the lock; or 0
//   [3]       0
//
// The lock word:
//
//   bits 0-29  OWNER   id of the holding thread (lib/backend.js: this
//                      process's id of it, or a shared space's); 0: free
//   bit  30    PARKED  a thread may be parked on WORD or SLOT: unlock must
//                      take the slow path (wake, or hand over)
//   bit  31    DIED    the holder took the lock over from a dead owner
//                      (`ownerDied`); cleared by its unlock
//
//   0                      free
//   id                     held; nobody waits (fast unlock: one CAS back to 0)
//   id | PARKED            held; waiters, or a starving waiter, to serve
//   id | PARKED | DIED     held after a takeover (PARKED keeps its unlock slow)
//
// Invariants:
// - OWNER = 0 implies WORD = 0: flags are added only by CAS against a word
//   whose owner is non-zero, and every unlock clears them all (or hands the
//   word to the next owner).
// - A thread parks on WORD only with PARKED in the value it expects, so an
//   unlock that could strand it takes the slow path and wakes one waiter.
//   PARKED is cleared only by an unlock, which then wakes the oldest waiter;
//   a woken waiter sets PARKED again when it takes the lock or parks again,
//   and one that gives up passes the wake on.
// - A starving waiter registers in SLOT, then makes sure PARKED is set, then
//   parks on SLOT. A slow unlock reads SLOT before freeing the word (and
//   hands the lock over: SLOT := id | GRANT, WORD := id | PARKED, wake SLOT)
//   or after freeing it (and withdraws the registration: SLOT := 0, wake
//   SLOT). Either way, by the ordering of the seq-cst accesses, it sees a
//   registration made before the waiter's last look at WORD.
// - Only the recipient clears a GRANT (after it has seen WORD name it), so a
//   waiter that times out or aborts can always tell whether it got the lock.
//
// Fairness. Barging (a newcomer's CAS beating a woken waiter) is what makes
// an uncontended mutex fast, and it can starve a waiter: notably an async
// waiter, whose wake travels through its event loop before it can retry. A
// waiter that has waited FAIR_MS registers as starving; the next unlock
// hands it the lock directly instead of freeing it (parking_lot's
// "eventual fairness", Go's starvation mode). One starving waiter at a time
// holds SLOT; the others stay FIFO on WORD and take their turn after it.
//
// Owner death. Waiters park watching every owner (WATCH_ANY): after a
// hand-over or a barge the word may name a thread other than the one a
// waiter saw, so watching one id could miss its death. Deaths are rare; each
// wakes every watching waiter once, and those that find a live owner park
// again. A waiter that finds a dead owner in the word takes the lock over
// with DIED set (POSIX EOWNERDEAD).

const {
  backendOf, memoryOf, madeAs, parseTimeout, parseAsyncOptions, SabsyncError, invalidType
} = require('./shared')
const { PARK, Wait, settleSync, settleAsync, addressKey, LOCK_MUTEX } = require('./waiting')
const { attachTo, writeTag } = require('./kind')
const { LOCK, waitSync, waitAsync, ownerDied } = require('./inside')

const WORD = 1
const SLOT = 2
const OWNER = 0x3FFFFFFF
const PARKED = 0x40000000
const DIED = 0x80000000 | 0
const GRANT = 0x40000000

// A waiter that has waited this long registers for a hand-over.
const FAIR_MS = 1
// Loads of the word before a waiter first parks: a short critical section
// often ends within them, which saves a native enqueue and a wake.
const SPINS = 64

const BYTES = 16
const ATTACH = Symbol('attach')
const dispose = Symbol.dispose ?? Symbol.for('nodejs.dispose')

// unlock() by a thread that does not hold the lock, said as what is true
// from this thread: its own lockAsync() calls still waiting (one whose
// promise was not awaited), a lock nobody holds (unlocked twice), or
// another holder.
function notOwner (core, word) {
  const q = queues.get(core.key)
  const waiting = q === undefined ? 0 : q.length
  let why
  if (waiting > 0) {
    why = `this thread does not hold it yet: ${waiting === 1 ? 'a lockAsync() call of this thread is' : `${waiting} lockAsync() calls of this thread are`} ` +
      'still waiting for it. Await lockAsync() before the code it guards (or use runExclusive()), then unlock()'
  } else if ((word & OWNER) === 0) {
    why = 'the mutex is not locked: it was unlocked already (twice?), or never locked by this thread'
  } else {
    why = 'another thread (or, in a shared space, another process) holds it: only the holder may unlock'
  }
  return new SabsyncError('ERR_SABSYNC_NOT_OWNER', `unlock(): ${why}`)
}

function deadlock () {
  return new SabsyncError('ERR_SABSYNC_DEADLOCK',
    'lock() called by the thread that holds the mutex: it would wait forever')
}

// The shared part of every Mutex object over one memory in this thread.
// Built once per object; `key` (the word's address) names this thread's
// queue of lockAsync calls; `own` gives the owner ids (this process's, or a
// shared space's: the backend of lib/backend.js).
function coreOf (i32) {
  const own = backendOf(i32.buffer)
  return {
    i32,
    own,
    key: addressKey(i32, WORD),
    wakeWord: own.waker(i32, WORD),
    wakeSlot: own.waker(i32, SLOT),
    // What its waits are, for deadlocks among threads (lib/waiting.js):
    // this Mutex, or the RWLock whose writers' Mutex it is.
    lockView: i32,
    lockKind: LOCK_MUTEX
  }
}

// ---- acquiring: one decision function for lock() and lockAsync() ----

function register (core) {
  const { i32, own } = core
  const s = Atomics.load(i32, SLOT)
  if (s === 0) return Atomics.compareExchange(i32, SLOT, 0, own.self) === 0
  // A registration left by a thread that died while starving.
  if ((s & GRANT) === 0 && s !== own.self && !own.alive(s)) return Atomics.compareExchange(i32, SLOT, s, own.self) === s
  return false
}

function unregister (core) {
  const { i32, own } = core
  const s = Atomics.load(i32, SLOT)
  if (s === own.self || s === (own.self | GRANT)) Atomics.compareExchange(i32, SLOT, s, 0)
}

// SLOT says GRANT: the unlock that granted it may still be between its two
// stores, so wait for WORD to name us (or take over if that unlock's thread
// died in between), then clear the grant.
function receiveGrant (core) {
  const { i32, own } = core
  for (;;) {
    const word = Atomics.load(i32, WORD)
    const owner = word & OWNER
    if (owner === own.self) break
    if (!own.alive(owner) && Atomics.compareExchange(i32, WORD, word, own.self | PARKED | DIED) === word) {
      ownerDied(core.object, 'Mutex', owner)
      break
    }
  }
  Atomics.store(i32, SLOT, 0)
  return true
}

// The deadline passed (or an abort came): withdraw. Answers true if an
// unlock had already handed us the lock, false otherwise.
function giveUp (w) {
  const i32 = w.i32
  const self = w.core.own.self
  if (w.starving) {
    w.starving = false
    if (Atomics.compareExchange(i32, SLOT, self, 0) !== self &&
        Atomics.load(i32, SLOT) === (self | GRANT)) {
      return receiveGrant(w.core)
    }
  }
  // We may have consumed a wake meant to let a waiter retry: pass it on.
  if (w.parked > 0) w.core.wakeWord(1)
  return false
}

function attemptLock (w) {
  const i32 = w.i32
  const core = w.core
  const { self, alive } = core.own
  if (w.parked === 0 && !w.spun) {
    w.spun = true
    for (let i = 0; i < SPINS && Atomics.load(i32, WORD) !== 0; i++);
  }
  for (;;) {
    // The epoch before the word: a death after this read makes the park
    // answer OWNER_DEAD (see lib/shared.js).
    const epoch = core.own.deathEpoch()
    const word = Atomics.load(i32, WORD)
    const owner = word & OWNER
    if (owner === 0) {
      // Free (so word === 0). After a wake, others may still be parked:
      // keep PARKED so that our unlock wakes the next one. (The CAS is
      // against `word`, not 0: memory that was not a Mutex's can hold flags
      // without an owner, and a CAS against 0 would loop here forever;
      // found by the API fuzz, test/fuzz-primitives.test.js.)
      const mine = w.parked > 0 || w.starving ? self | PARKED : self
      if (Atomics.compareExchange(i32, WORD, word, mine) === word) {
        if (w.starving) unregister(core)
        return true
      }
      continue
    }
    if (owner === self) {
      if (w.starving && Atomics.load(i32, SLOT) === (self | GRANT)) return receiveGrant(core)
      // Held by this thread: a blocking wait could never end. An async
      // waiter waits for this thread's own unlock (async-mutex semantics).
      if (!w.async) throw deadlock()
    } else if (!alive(owner)) {
      if (Atomics.compareExchange(i32, WORD, word, self | PARKED | DIED) === word) {
        if (w.starving) unregister(core)
        ownerDied(core.object, 'Mutex', owner)
        return true
      }
      continue
    }
    if (w.starving) {
      const s = Atomics.load(i32, SLOT)
      if (s === (self | GRANT)) return receiveGrant(core)
      if (s !== self) {
        // An unlock withdrew the registration while freeing the lock.
        w.starving = false
        continue
      }
    }
    const now = performance.now()
    const wait = w.deadline === Infinity ? Infinity : w.deadline - now
    if (wait <= 0) return giveUp(w)
    if (!w.starving && now - w.start >= FAIR_MS && register(core)) {
      w.starving = true
      continue // look at the word again, after registering (see the invariants)
    }
    if ((word & PARKED) === 0 && Atomics.compareExchange(i32, WORD, word, word | PARKED) !== word) continue
    w.epoch = epoch
    w.wait = wait
    if (w.starving) {
      w.cell = SLOT
      w.value = self
    } else {
      w.cell = WORD
      w.value = word | PARKED
    }
    return PARK
  }
}

function newWait (core, timeout, async) {
  const w = new Wait(core.i32, timeout, core.own)
  w.core = core
  w.async = async
  w.starving = false
  w.spun = false
  w.start = performance.now()
  w.lockWait = true // watched for deadlocks (lib/inside.js)
  w.lockView = core.lockView
  w.lockKind = core.lockKind
  return w
}

// ---- releasing ----

function unlockSlow (core) {
  const { i32, own } = core
  for (;;) {
    const word = Atomics.load(i32, WORD)
    if ((word & OWNER) !== own.self) throw notOwner(core, word)
    if ((word & PARKED) !== 0) {
      const s = Atomics.load(i32, SLOT)
      if (s !== 0 && (s & GRANT) === 0) {
        if (!own.alive(s)) {
          Atomics.compareExchange(i32, SLOT, s, 0) // it died starving
          continue
        }
        if (Atomics.compareExchange(i32, SLOT, s, s | GRANT) !== s) continue // it withdrew
        // The lock is s's from here. Only waiters change a held word (they
        // add PARKED, already set), so this CAS succeeds at once.
        let cur = word
        for (let seen; (seen = Atomics.compareExchange(i32, WORD, cur, s | PARKED)) !== cur;) cur = seen
        core.wakeSlot(1)
        return
      }
    }
    if (Atomics.compareExchange(i32, WORD, word, 0) !== word) continue
    if ((word & PARKED) !== 0) {
      core.wakeWord(1)
      // A waiter that registered after we looked at SLOT parks there
      // expecting this unlock to see it: withdraw it and let it look again.
      const s = Atomics.load(i32, SLOT)
      if (s !== 0 && (s & GRANT) === 0 && Atomics.compareExchange(i32, SLOT, s, 0) === s) core.wakeSlot(1)
    }
    return
  }
}

// ---- this thread's queue of lockAsync calls ----
//
// Pending lockAsync calls of one thread wait in turn (async-mutex
// semantics): only the oldest contends for the word; the others wait in a
// JS queue here, each with its own timer and abort listener until its turn.

const queues = new Map() // word address -> entries, oldest first

function refOf (q) {
  for (const e of q) if (e.ref) return true
  return false
}

function settleEntry (q, e, fn, value) {
  const i = q.indexOf(e)
  if (i > 0) q.splice(i, 1)
  disarm(e)
  fn(value)
}

// setTimeout takes at most 2^31-1 ms: a longer delay fires after 1 ms
// (with a warning), which timed out a lockAsync({ timeout: 3e9 }) waiting
// behind another at once (found by the API fuzz, test/fuzz-primitives.test.js). A longer
// timeout takes several timers.
const MAX_TIMER = 0x7FFFFFFF

function arm (q, e) {
  if (e.deadline !== Infinity) {
    const expire = () => {
      const left = e.deadline - performance.now()
      e.timer = left > MAX_TIMER
        ? setTimeout(expire, MAX_TIMER)
        : setTimeout(() => settleEntry(q, e, e.resolve, false), Math.max(0, left))
      if (!e.ref) e.timer.unref()
    }
    expire()
  }
  if (e.signal !== undefined) {
    e.onAbort = () => settleEntry(q, e, e.reject, e.signal.reason)
    e.signal.addEventListener('abort', e.onAbort, { once: true })
  }
}

function disarm (e) {
  if (e.timer !== undefined) clearTimeout(e.timer)
  if (e.onAbort !== undefined) e.signal.removeEventListener('abort', e.onAbort)
  e.timer = e.onAbort = undefined
}

function abandonLock (w) {
  if (giveUp(w)) unlockSlow(w.core) // the lock came with the abort: pass it on
}

async function serve (core, q) {
  while (q.length > 0) {
    const e = q[0]
    disarm(e) // the head's timeout and signal go to the native wait
    const w = newWait(core, Infinity, true)
    w.deadline = e.deadline
    w.start = e.start
    w.signal = e.signal
    w.ref = refOf(q)
    try {
      e.resolve(await settleAsync(w, attemptLock, abandonLock))
    } catch (err) {
      e.reject(err)
      // The space closed under the queue: the rest of it can never lock.
      if (err.code === 'ERR_SABSYNC_SHARED_CLOSED') {
        for (const rest of q.splice(1)) {
          disarm(rest)
          rest.reject(err)
        }
      }
    }
    q.shift()
  }
  queues.delete(core.key)
}

// A lockAsync call that waits: an entry in this thread's queue for the
// word, served by serve() when it is the oldest.
function enqueue (core, q, timeout, { signal, ref }) {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    const e = { resolve, reject, start, deadline: start + timeout, signal, ref, timer: undefined, onAbort: undefined }
    q.push(e)
    if (q.length === 1) serve(core, q)
    else arm(q, e)
  })
}

// ---- the class ----

let internals

class Mutex {
  #i32
  #core
  #self // this thread's owner id for this memory (core.own.self)

  static get byteLength () { return BYTES }

  static from (handle) {
    return new Mutex(attachTo('Mutex', handle), ATTACH)
  }

  constructor (options, attach) {
    const { buffer, byteOffset, i32 } = memoryOf('Mutex', BYTES, options, attach === ATTACH ? 'handle' : 'options')
    if (attach !== ATTACH) {
      Atomics.store(i32, WORD, 0)
      Atomics.store(i32, SLOT, 0)
      Atomics.store(i32, 3, 0)
      writeTag(i32, 'Mutex')
    }
    this.buffer = buffer
    this.byteOffset = byteOffset
    this.#i32 = i32
    this.#core = coreOf(i32)
    this.#core.object = this // named in diagnostics (lib/inside.js)
    this.#self = this.#core.own.self
    madeAs(this, 'Mutex')
  }

  // Blocks until this thread holds the lock; false when `timeout` ms passed.
  lock (timeout) {
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    if (Atomics.compareExchange(this.#i32, WORD, 0, this.#self) === 0) return true
    return waitSync(LOCK, this, 'Mutex', settleSync, newWait(this.#core, t, false), attemptLock)
  }

  // Takes the lock if it is free (or its holder died) now.
  tryLock () {
    const i32 = this.#i32
    const self = this.#self
    const word = Atomics.compareExchange(i32, WORD, 0, self)
    if (word === 0) return true
    const owner = word & OWNER
    if (owner === self || this.#core.own.alive(owner) ||
        Atomics.compareExchange(i32, WORD, word, self | PARKED | DIED) !== word) return false
    ownerDied(this, 'Mutex', owner)
    return true
  }

  lockAsync (options) {
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    const core = this.#core
    let q = queues.get(core.key)
    if (q === undefined) {
      if (Atomics.compareExchange(this.#i32, WORD, 0, this.#self) === 0) return Promise.resolve(true)
      q = []
      queues.set(core.key, q)
    } else if (timeout === 0) {
      return Promise.resolve(false) // others of this thread are ahead of it
    }
    return waitAsync(LOCK, this, 'Mutex', enqueue, core, q, timeout, { signal, ref })
  }

  unlock () {
    if (Atomics.compareExchange(this.#i32, WORD, this.#self, 0) === this.#self) return
    unlockSlow(this.#core)
  }

  // Runs fn holding the lock (taken with lockAsync(options)); unlocks when
  // fn's promise settles. A timeout rejects with ERR_SABSYNC_TIMEOUT: there
  // is no result to answer with.
  runExclusive (fn, options) {
    if (typeof fn !== 'function') throw invalidType('fn', 'a function', fn)
    return this.lockAsync(options).then(async got => {
      if (!got) throw new SabsyncError('ERR_SABSYNC_TIMEOUT', 'runExclusive: the mutex was not acquired within the timeout')
      try {
        return await fn()
      } finally {
        this.unlock()
      }
    })
  }

  // `using g = mutex.guard()`: locks, and unlocks when g is disposed.
  // undefined when the timeout passed (`using` accepts undefined).
  guard (timeout) {
    return this.lock(timeout) ? new MutexGuard(this) : undefined
  }

  async guardAsync (options) {
    return (await this.lockAsync(options)) ? new MutexGuard(this) : undefined
  }

  // Held by a live thread (this one included).
  get isLocked () {
    const owner = Atomics.load(this.#i32, WORD) & OWNER
    return owner !== 0 && (owner === this.#self || this.#core.own.alive(owner))
  }

  // The current holding began by taking over from a thread that died
  // holding the lock; true until that holder unlocks.
  get ownerDied () {
    return (Atomics.load(this.#i32, WORD) & DIED) !== 0
  }

  // Who holds it: { pid, threadId } of a live holder (threadId null when
  // unknown), or null (free, or its holder died and nobody took it over
  // yet). In a space, pid and threadId are what the holder's slot claims.
  // For a person or a log: the answer may be stale by the time it is read.
  get holder () {
    const owner = Atomics.load(this.#i32, WORD) & OWNER
    return owner === 0 ? null : this.#core.own.party(owner)
  }

  // How many lock() and lockAsync() calls wait for it: those queued on its
  // words in every thread (and process, in a space), and this thread's
  // lockAsync() calls queued behind its first one. A waiter between a wake
  // and its next look at the word is not counted for that moment.
  nrWaiting () {
    const { i32, own, key } = this.#core
    const q = queues.get(key)
    return own.waitersOf(i32, WORD) + own.waitersOf(i32, SLOT) + (q === undefined ? 0 : q.length - 1)
  }

  static {
    internals = {
      isMutex: m => typeof m === 'object' && m !== null && #i32 in m,
      // The owner id in the word (0: free); used by CondVar and RWLock.
      ownerOf: m => Atomics.load(m.#i32, WORD) & OWNER,
      // Whether this thread holds it (in the mutex's own owner ids).
      heldByMe: m => (Atomics.load(m.#i32, WORD) & OWNER) === m.#self,
      // Its waits are waits for the lock over `view` (an RWLock's).
      waitsAs: (m, view, kind) => {
        m.#core.lockView = view
        m.#core.lockKind = kind
      }
    }
  }
}

class MutexGuard {
  #mutex
  constructor (mutex) {
    this.#mutex = mutex
    this.ownerDied = mutex.ownerDied
  }

  get mutex () { return this.#mutex }

  // Unlocks once; later calls do nothing.
  [dispose] () {
    const m = this.#mutex
    if (m === undefined) return
    this.#mutex = undefined
    m.unlock()
  }
}

module.exports = { Mutex, MutexGuard, internals }
