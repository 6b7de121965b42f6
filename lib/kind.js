'use strict'
// Kind tags: the first Int32 of every primitive's memory says which
// primitive lives there, so that `X.from(handle)` refuses memory that is not
// an X's, and says what it found instead:
//
//   the tag of X               attach
//   another primitive's tag    TypeError ERR_SABSYNC_WRONG_KIND, naming both
//   0                          ERR_SABSYNC_BAD_MEMORY: zeroed, nothing made
//                              there (or a wrong byteOffset)
//   anything else              ERR_SABSYNC_BAD_MEMORY: overwritten, or a
//                              byteOffset that is not where the X begins
//
// Without tags, Mutex.from() over a Sema's memory was accepted and lock()
// then waited forever, and over a zeroed buffer it made a Mutex that no
// other thread shared.
//
// The tags are ASCII, as the C core's are (SAB_SEMA_MAGIC 'SEM1' and
// SAB_RATE_MAGIC 'RAT1' in include/sabsync.h, written by semaInit and
// rateInit). The JS primitives write theirs here, last, with a seq-cst
// store, after the rest of the memory is set up: a thread that reads the
// tag in from() sees the memory set up. Only from() reads a tag: lock,
// unlock and every other call go straight to their own words, at the same
// cost as before.

const { SEMA_MAGIC, RATE_MAGIC } = require('./native').constants
const { memoryOf, handleOf, article: a, SabsyncError } = require('./shared')
const { outOfRange } = require('./errors')

const TAG = 0 // the index of the tag, for every kind

const TAGS = {
  Mutex: 0x4D545831, // 'MTX1'
  AtomicFlag: 0x464C4731, // 'FLG1'
  Once: 0x4F4E4331, // 'ONC1'
  Latch: 0x4C415431, // 'LAT1'
  CondVar: 0x43445631, // 'CDV1'
  RWLock: 0x52574C31, // 'RWL1'
  Barrier: 0x42415231, // 'BAR1'
  Sema: SEMA_MAGIC, // 'SEM1', from the C core
  RateLimit: RATE_MAGIC, // 'RAT1', from the C core
  RateLimiter: 0x524C4B31 // 'RLK1'
}
const KINDS = new Map(Object.entries(TAGS).map(([kind, tag]) => [tag, kind]))

// How each kind is constructed, for the messages.
const MAKE = {
  Latch: 'new Latch(count, { buffer, byteOffset })',
  Barrier: 'new Barrier(parties, { buffer, byteOffset })',
  Sema: 'new Sema(nr, { buffer, byteOffset })',
  RateLimit: 'RateLimit(rps, { buffer, byteOffset })'
}
const make = who => MAKE[who] || `new ${who}({ buffer, byteOffset })`

// Written last by a constructor, once its memory is set up.
function writeTag (i32, who) {
  Atomics.store(i32, TAG, TAGS[who])
}

function wrongKind (who, byteOffset, found) {
  const err = new TypeError(`${who}.from(handle): the memory at byteOffset ${byteOffset} holds ${a(found)}, not ${a(who)}. ` +
    `Pass the handle of ${a(who)} (this one attaches with ${found}.from(handle))`)
  err.code = 'ERR_SABSYNC_WRONG_KIND'
  return err
}

function noneThere (who, byteOffset, word) {
  const why = word === 0
    ? 'the memory there is zeroed: nothing was made there (or it was cleared). ' +
      `Make one with ${make(who)} and pass that object (or its buffer and byteOffset)`
    : `its first word (0x${(word >>> 0).toString(16).padStart(8, '0')}) is no sabsync primitive's kind tag: ` +
      `the byteOffset is not where ${a(who)} begins, or the memory was overwritten`
  return new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `${who}.from(handle): no ${who} at byteOffset ${byteOffset} of this buffer: ${why}`)
}

// The kind whose tag `word` is, or undefined.
const kindOf = word => KINDS.get(word)

// X.from(handle): the { buffer, byteOffset } of a handle whose memory holds
// an X (by its tag). The rest of the memory is the caller's to check.
function attachTo (who, handle) {
  const { buffer, byteOffset, byteLength } = handleOf(who, handle)
  // Every primitive has at least 8 bytes: the tag and one more word.
  const head = memoryOf(who, 8, { buffer, byteOffset }, 'handle')
  const word = Atomics.load(head.i32, TAG)
  if (word === TAGS[who]) return { buffer, byteOffset: head.byteOffset, byteLength }
  const found = kindOf(word)
  throw found !== undefined ? wrongKind(who, head.byteOffset, found) : noneThere(who, head.byteOffset, word)
}

// A primitive whose size is a parameter (Sema, RateLimit, RWLock, Barrier,
// RateLimiter) reads that parameter from its memory when it attaches, and
// memory is what other threads can write: a size made up by a write racing
// the attach, with room for it in the buffer, would make the attached
// object span more of the buffer than the one made (seen: a Sema(1)
// attached as a Sema(2) by test/scribble.js, whose grants then wrote past
// it). So these objects post their byteLength with their buffer and
// byteOffset, and from() holds the memory to it: a size that disagrees is
// ERR_SABSYNC_BAD_MEMORY. A bare { buffer, byteOffset } still attaches by
// what the memory says (docs/threads.md).
function sizeAgrees (who, at, claimed, bytes, what) {
  if (claimed === undefined || claimed === bytes) return
  if (!Number.isSafeInteger(claimed) || claimed <= 0) {
    throw outOfRange('handle.byteLength', `the ${who}'s byteLength (${bytes} for the one at byteOffset ${at}), or left out`, claimed)
  }
  throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `${who}.from(handle): the memory at byteOffset ${at} holds ${what} ` +
    `(${bytes} bytes), the handle says ${claimed} bytes: the memory was overwritten, or the handle is not this ${who}'s`)
}

module.exports = { TAG, TAGS, writeTag, attachTo, sizeAgrees }
