'use strict'
// Barrier: `parties` threads meet, round after round (a cyclic barrier).
//
// Memory (Int32 cells):
//
//   [0] TAG      'BAR1', the kind tag (lib/kind.js), written last by the
//                constructor, read only by Barrier.from
//   [1] WORD     bits 0-19 ARRIVED  parties waiting in this round
//                bits 20-30 GEN     the round (mod 2048)
//                bit  31    BROKEN  the round was broken
//   [2] RESETS   how many times reset() was called
//   [3] PARTIES
//   [4..4+P)     ids: slot i holds the owner id of the party that arrived
//                i-th, in this round for i < ARRIVED, else in the last one
//
// Arriving is one CAS on WORD: ARRIVED + 1, or, for the last party, the
// next GEN with ARRIVED 0 (it is the round's leader, and wakes the others).
// Waiters park on WORD; an arrival changes WORD without waking them, the
// completion (or a break, or reset) wakes them all.
//
// The round is broken (BROKEN set, everyone woken, ERR_SABSYNC_BARRIER_BROKEN
// for its waiters and every later wait() until reset()) when:
// - a waiter's timeout passes or its signal aborts before the round completes;
// - a party's thread is found dead: one waiting in this round, or one that
//   took part in the last round and has not arrived in this one (it never
//   will). Waiters watch every owner, so a death wakes them to look. A
//   barrier whose threads change from round to round should reset() first.
// GEN is 11 bits; a waiter from round g is still counted in round g, so
// the round cannot move 2048 rounds past it.

const { backendOf, memoryOf, madeAs, parseTimeout, parseAsyncOptions, OK, OWNER_DEAD, SabsyncError, outOfRange } = require('./shared')
const { PARK, Wait, settleSync, settleAsync } = require('./waiting')
const { attachTo, writeTag, sizeAgrees } = require('./kind')
const { WAIT, waitSync, waitAsync } = require('./inside')

const WORD = 1
const RESETS = 2
const PARTIES = 3
const IDS = 4
const ARRIVED = 0xFFFFF
const GEN_SHIFT = 20
const GEN_MASK = 0x7FF
const BROKEN = 0x80000000 | 0
const MAX_PARTIES = ARRIVED
const ATTACH = Symbol('attach')

function bytesFor (parties) {
  return IDS * 4 + Math.ceil(parties / 2) * 8
}

function partiesArg (parties, name = 'parties') {
  if (typeof parties !== 'number' || !Number.isInteger(parties) || parties < 1 || parties > MAX_PARTIES) {
    throw outOfRange(name, `an integer >= 1 and <= ${MAX_PARTIES}`, parties)
  }
  return parties
}

function broken (why) {
  return new SabsyncError('ERR_SABSYNC_BARRIER_BROKEN', `the barrier is broken (${why}); reset() it to use it again`)
}

const genOf = word => (word >>> GEN_SHIFT) & GEN_MASK

// Set BROKEN on round `gen` unless it completed (or broke) meanwhile.
function breakRound (b, gen) {
  const i32 = b.i32
  for (let word = Atomics.load(i32, WORD); ;) {
    if (genOf(word) !== gen || (word & BROKEN) !== 0) return
    const seen = Atomics.compareExchange(i32, WORD, word, word | BROKEN)
    if (seen === word) break
    word = seen
  }
  b.wake(Infinity)
}

// A party that will never come: dead while waiting in this round, or dead
// after taking part in the last one without arriving in this one.
function deadParty (b) {
  const i32 = b.i32
  const { self, alive } = b.own
  for (let i = 0; i < b.parties; i++) {
    const id = Atomics.load(i32, IDS + i)
    if (id !== 0 && id !== self && !alive(id)) return true
  }
  return false
}

function attemptBarrier (w) {
  const b = w.b
  for (;;) {
    const epoch = b.own.deathEpoch()
    const word = Atomics.load(b.i32, WORD)
    if (genOf(word) !== w.gen) {
      if (Atomics.load(b.i32, RESETS) !== w.resets) throw broken('reset while waiting')
      return { isLeader: false }
    }
    if ((word & BROKEN) !== 0) throw broken(w.why || 'a party left the round')
    if ((w.code === -1 || w.code === OWNER_DEAD || w.code === OK) && deadParty(b)) {
      breakRound(b, w.gen)
      w.why = 'a party\'s thread died'
      continue
    }
    const wait = w.remaining()
    if (wait === 0) {
      breakRound(b, w.gen)
      if (genOf(Atomics.load(b.i32, WORD)) !== w.gen) continue // it completed after all
      return undefined
    }
    w.cell = WORD
    w.value = word
    w.wait = wait
    w.epoch = epoch
    return PARK
  }
}

function abandonBarrier (w) {
  breakRound(w.b, w.gen)
}

class Barrier {
  #b

  // Bytes for a Barrier of up to 64 parties; see byteLengthFor.
  static get byteLength () { return bytesFor(64) }

  static byteLengthFor (parties) {
    return bytesFor(partiesArg(parties))
  }

  static from (handle) {
    return new Barrier(undefined, attachTo('Barrier', handle), ATTACH)
  }

  constructor (parties, options, attach) {
    let mem
    if (attach === ATTACH) {
      const head = memoryOf('Barrier', IDS * 4, options, 'handle')
      parties = Atomics.load(head.i32, PARTIES)
      if (!(parties >= 1 && parties <= MAX_PARTIES)) throw outOfRange('handle', 'an initialised Barrier', parties)
      sizeAgrees('Barrier', head.byteOffset, options.byteLength, bytesFor(parties), `a Barrier of ${parties} parties`)
      mem = memoryOf('Barrier', bytesFor(parties), options, 'handle')
    } else {
      partiesArg(parties)
      mem = memoryOf('Barrier', bytesFor(parties), options)
      mem.i32.fill(0)
      Atomics.store(mem.i32, PARTIES, parties)
      writeTag(mem.i32, 'Barrier')
    }
    this.buffer = mem.buffer
    this.byteOffset = mem.byteOffset
    this.byteLength = mem.i32.byteLength
    const own = backendOf(mem.buffer)
    this.#b = { i32: mem.i32, parties, wake: own.waker(mem.i32, WORD), own }
    madeAs(this, 'Barrier')
  }

  get parties () { return this.#b.parties }

  get isBroken () { return (Atomics.load(this.#b.i32, WORD) & BROKEN) !== 0 }

  // Parties waiting in the current round.
  get arrived () { return Atomics.load(this.#b.i32, WORD) & ARRIVED }

  // How many wait() and waitAsync() calls are queued for the round to
  // complete, in every thread (arrived counts the parties in the round).
  nrWaiting () { return this.#b.own.waitersOf(this.#b.i32, WORD) }

  // Arrive: the last party of the round returns { isLeader: true } at once
  // and releases the others ({ isLeader: false }). Answers `undefined` when
  // `timeout` ms passed first (the round is then broken for the others).
  wait (timeout) {
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    const w = this.#arrive(t)
    return w.isLeader !== undefined ? w : waitSync(WAIT, this, 'Barrier', settleSync, w, attemptBarrier)
  }

  waitAsync (options) {
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    let w
    try {
      w = this.#arrive(timeout)
    } catch (err) {
      return Promise.reject(err)
    }
    if (w.isLeader !== undefined) return Promise.resolve(w)
    w.signal = signal
    w.ref = ref
    return waitAsync(WAIT, this, 'Barrier', settleAsync, w, attemptBarrier, abandonBarrier)
  }

  // Break the current round (its waiters throw) and start a fresh one.
  // The round is frozen (BROKEN) while RESETS moves: an arrival that got in
  // before the freeze read the old RESETS, and none gets in during it, so
  // every waiter of the old round sees RESETS differ from what it read.
  // (A waiter whose round completed just before a reset may see the reset
  // first and throw: reset() is for a barrier nobody is passing.)
  reset () {
    const b = this.#b
    const i32 = b.i32
    let word = Atomics.load(i32, WORD)
    for (let seen; (word & BROKEN) === 0; word = seen) {
      if ((seen = Atomics.compareExchange(i32, WORD, word, word | BROKEN)) === word) break
    }
    Atomics.add(i32, RESETS, 1)
    for (let i = 0; i < b.parties; i++) Atomics.store(i32, IDS + i, 0)
    Atomics.store(i32, WORD, ((genOf(word) + 1) & GEN_MASK) << GEN_SHIFT)
    b.wake(Infinity)
  }

  // One CAS: count this thread in, or complete the round. Answers the
  // leader's result, or a Wait for the others.
  #arrive (timeout) {
    const b = this.#b
    const i32 = b.i32
    const resets = Atomics.load(i32, RESETS)
    for (let word = Atomics.load(i32, WORD); ;) {
      if ((word & BROKEN) !== 0) throw broken('an earlier round was broken')
      const arrived = word & ARRIVED
      // ARRIVED < parties holds in every round (the last party starts the
      // next one); more is memory written by something else.
      if (arrived >= b.parties) {
        throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `Barrier.wait: its memory says ${arrived} parties arrived, of ${b.parties}: ` +
          'something else wrote over the Barrier. Find what writes there; reset() starts a clean round')
      }
      const gen = genOf(word)
      const last = arrived + 1 === b.parties
      const next = last ? ((gen + 1) & GEN_MASK) << GEN_SHIFT : word + 1
      const seen = Atomics.compareExchange(i32, WORD, word, next)
      if (seen !== word) {
        word = seen
        continue
      }
      Atomics.store(i32, IDS + arrived, b.own.self)
      if (last) {
        b.wake(Infinity)
        return { isLeader: true }
      }
      const w = new Wait(i32, timeout, b.own)
      w.b = b
      w.gen = gen
      w.resets = resets
      w.why = ''
      return w
    }
  }
}

module.exports = { Barrier }
