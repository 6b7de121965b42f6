'use strict'
// openShared: a named space of shared memory between the processes of one
// host, and the primitives in it by key (src/core/space.c and its
// neighbours do the work; this file validates, names things and routes).
//
// Each thread opens a space for itself: the memory reaches JS as a buffer
// that cannot be sent to another thread (an external ArrayBuffer before
// Node 24.16 / 26.1), and the thread registers in the space, which gives it
// an owner id that means the same in every process. A space's buffer is
// entered in lib/backend.js with its backend: the primitives over it take
// their owner ids, liveness and death epoch from it, and their waits and
// wakes go to the space's queues, so the same Mutex, Sema, ... code serves
// threads and processes alike.
//
// Objects are found by key in the space's directory. The first caller of a
// key (in any process) creates the object: the directory stays locked while
// its constructor initialises the memory, then the entry is published; a
// creator that dies half-way leaves the key to the next caller to create
// again. Later callers attach (Mutex.from, ...). A key used with another
// kind or other parameters throws ERR_SABSYNC_SHARED_MISMATCH.

const { threadId } = require('worker_threads')
const native = require('./native')
const { addSpace, backendOf, parkNow, asyncFlags, guarded, RESULTS, OUT } = require('./backend')
const { makeSpaceLocks } = require('./locks/processes')
const { memoized } = require('./lot')
const { nameObject } = require('./inside')
const { inspect } = require('./inspect')
const {
  OK, NOT_EQUAL, TIMED_OUT, OWNER_DEAD, SabsyncError, invalidType, outOfRange
} = require('./shared')
const { Mutex } = require('./mutex')
const { AtomicFlag } = require('./atomic-flag')
const { Once } = require('./once')
const { Latch } = require('./latch')
const { CondVar } = require('./condvar')
const { RWLock } = require('./rwlock')
const { Barrier } = require('./barrier')
const { Sema } = require('./sema')
const { RateLimit } = require('./rate-limit')
const { inSpace: rateLimiterIn, parseOptions: parseRateLimiterOptions } = require('./rate-limiter')

const C = native.constants

// Kinds in the directory: a key names one kind for the life of the space.
const KIND = {
  int32Array: 1,
  bigInt64Array: 2,
  mutex: 3,
  atomicFlag: 4,
  once: 5,
  latch: 6,
  condVar: 7,
  rwlock: 8,
  barrier: 9,
  sema: 10,
  rateLimit: 11,
  rateLimiter: 12, // its header; its table is rateLimiterTable under key + '\u0001'
  rateLimiterTable: 13
}

// What a directory entry's params mean, kind by kind (lib/space.js passes
// them in this order): the call that makes one, and each parameter's name
// and value, for a mismatch said in the caller's terms.
const unitOf = p => new Float64Array(new Uint32Array([p[1], p[2]]).buffer)[0]
const KINDS = {
  [KIND.int32Array]: { call: 'int32Array', params: p => [['length', p[0]]] },
  [KIND.bigInt64Array]: { call: 'bigInt64Array', params: p => [['length', p[0]]] },
  [KIND.mutex]: { call: 'mutex', params: () => [] },
  [KIND.atomicFlag]: { call: 'atomicFlag', params: () => [] },
  [KIND.once]: { call: 'once', params: () => [] },
  [KIND.latch]: { call: 'latch', params: p => [['count', p[0]]] },
  [KIND.condVar]: { call: 'condVar', params: () => [] },
  [KIND.rwlock]: { call: 'rwlock', params: p => [['readerSlots', p[0]]] },
  [KIND.barrier]: { call: 'barrier', params: p => [['parties', p[0]]] },
  [KIND.sema]: { call: 'sema', params: p => [['nr', p[0]]] },
  [KIND.rateLimit]: {
    call: 'rateLimit',
    params: p => [['rps', p[0]], ['timeUnit', unitOf(p)], ['uniformDistribution', p[3] !== 0]]
  },
  [KIND.rateLimiter]: { call: 'rateLimiter', params: () => [] },
  [KIND.rateLimiterTable]: { call: 'rateLimiter', params: p => [['keys', p[0]]] }
}

function describeEntry (kind, params) {
  const d = KINDS[kind]
  if (d === undefined) return `an entry of unknown kind ${kind} (overwritten?)`
  const ps = d.params(params).map(([n, v]) => `${n} ${v}`)
  return `${/^[aeiou]/i.test(d.call) ? 'an' : 'a'} ${d.call}${ps.length === 0 ? '' : ` with ${ps.join(', ')}`}`
}

const MAX_CELLS = 1 << 27 // per array: 512 MiB of Int32, below the largest space

// ---- errors ----

function invalidValue (name, expected, value) {
  const err = new TypeError(`The "${name}" argument must be ${expected}. Received ${JSON.stringify(value)}`)
  err.code = 'ERR_INVALID_ARG_VALUE'
  return err
}

// The native side throws plain Errors with an ERR_SABSYNC_ code; the API
// promises SabsyncError.
function own (err) {
  if (!(err instanceof SabsyncError) && err instanceof Error && typeof err.code === 'string' &&
      err.code.startsWith('ERR_SABSYNC_')) {
    return new SabsyncError(err.code, err.message)
  }
  return err
}

function call (fn, ...args) {
  try {
    return fn(...args)
  } catch (err) {
    throw own(err)
  }
}

// ---- arguments ----

// Control characters, and '/' (a path separator in the file's name).
const BAD_NAME = /[\u0000-\u001f\u007f/]/ // eslint-disable-line no-control-regex

// A lone surrogate has no UTF-8 form: the encoder would write U+FFFD for
// each, and 'x\ud800y' and 'x\udfffy' would name one file. Such strings are
// refused, so that two names never share a file (nor two keys an object).
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

function wellFormed (name, s) {
  if (LONE_SURROGATE.test(s)) {
    throw invalidValue(name, 'a well-formed string (no lone surrogate: it has no UTF-8 form)', s)
  }
}

function checkName (name) {
  if (typeof name !== 'string') throw invalidType('name', 'a string', name)
  wellFormed('name', name)
  const bytes = Buffer.byteLength(name)
  if (bytes === 0 || bytes > C.SPACE_NAME_MAX) {
    throw outOfRange('name', `a string of 1 to ${C.SPACE_NAME_MAX} bytes (UTF-8)`, bytes)
  }
  if (BAD_NAME.test(name) || name === '.' || name === '..') {
    throw invalidValue('name', 'a name without "/" or control characters, other than "." and ".."', name)
  }
}

function checkKey (key) {
  if (typeof key !== 'string') throw invalidType('key', 'a string', key)
  wellFormed('key', key)
  const bytes = Buffer.byteLength(key)
  if (bytes === 0 || bytes > C.SPACE_KEY_MAX) {
    throw outOfRange('key', `a string of 1 to ${C.SPACE_KEY_MAX} bytes (UTF-8)`, bytes)
  }
  if (key.includes('\u0000')) throw invalidValue('key', 'a string without NUL characters', key)
}

function parseOpenOptions (options) {
  if (options === undefined) return { size: 0, mode: 0o600, versioned: STATE }
  if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options)
  const { size, mode = 0o600, versioned = STATE } = options
  if (typeof versioned !== 'boolean' && versioned !== STATE) {
    throw invalidType('options.versioned', 'a boolean (leave it out for the default: see docs/processes.md)', versioned)
  }
  if (size !== undefined) {
    if (typeof size !== 'number') throw invalidType('options.size', 'a number of bytes', size)
    if (!Number.isInteger(size) || size < C.SPACE_MIN_SIZE || size > C.SPACE_MAX_SIZE) {
      throw outOfRange('options.size', `an integer >= ${C.SPACE_MIN_SIZE} and <= ${C.SPACE_MAX_SIZE}`, size)
    }
  }
  if (typeof mode !== 'number') throw invalidType('options.mode', 'a number (permission bits)', mode)
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o777) {
    throw outOfRange('options.mode', 'an integer >= 0 and <= 0o777', mode)
  }
  // The space is a whole number of pages.
  return { size: size === undefined ? 0 : Math.ceil(size / 4096) * 4096, mode, versioned }
}

function countArg (name, n, min, max) {
  if (typeof n !== 'number') throw invalidType(name, 'an integer', n)
  if (!Number.isInteger(n) || n < min || n > max) throw outOfRange(name, `an integer >= ${min} and <= ${max}`, n)
  return n
}

// ---- the space's backend (lib/backend.js): owners, waits, Sema, rate ----

// Native results (the core's) to the primitives' codes (lib/shared.js). A
// record taken out of the queue by something other than a notify or its
// deadline tells a watching waiter to look again.
function codeOf (r, watching) {
  switch (r) {
    case C.OK: return OK
    case C.NOT_EQUAL: return NOT_EQUAL
    case C.OWNER_DEAD: return OWNER_DEAD
    case C.CANCELLED: return watching ? OWNER_DEAD : TIMED_OUT
    default: return TIMED_OUT
  }
}

function backendOfSpace (opened) {
  const h = opened.handle
  const pub = opened.pubOff
  const words = new Int32Array(opened.buffer)
  const epochIndex = (opened.epochOff - pub) / 4
  const base = native.base(words) // where byte 0 of the buffer is in this process
  const self = opened.id

  // The index in `words` of the waiter counter of the bucket of a cell's
  // offset, from the addon (src/napi/space.c spaceBucket): a notify skips
  // the native call when it reads 0. The ordering argument is the
  // in-process lot's (lib/lot.js).
  const countOf = memoized(off => native.spaceBucket(h, off))
  const offsetOf = (ta, index, size) => pub + ta.byteOffset + index * size

  function notifyOff (off, count) {
    if (Atomics.add(words, countOf(off), 0) === 0) return 0
    return native.notify(off, count, h)
  }

  // An async wait: a record in the space, its promise settled on this
  // thread's loop by the addon (src/napi/space.c). A space closed meanwhile
  // rejects it with ERR_SABSYNC_SHARED_CLOSED, naming the space.
  const closedOwn = err => { throw err?.code === 'ERR_SABSYNC_SHARED_CLOSED' ? closedError(opened.buffer) : own(err) }
  function parkAtAsync (ta, index, value, timeout, signal, ref, watch, epoch) {
    const r = native.waitAsync(ta, index, value, timeout, asyncFlags(ref, signal), watch, epoch, h)
    return typeof r === 'number' ? r : guarded(r, signal).catch(closedOwn)
  }

  return Object.freeze({
    self,
    alive: id => id === self || native.spaceAlive(h, id),
    deathEpoch: () => Atomics.load(words, epochIndex) >>> 0,

    park (i32, index, value, timeout, watch = 0, epoch = 0) {
      return codeOf(call(native.wait, i32, index, value, timeout, watch >>> 0, epoch >>> 0, h), watch !== 0)
    },
    parkAsync (i32, index, value, timeout, signal, ref, watch = 0, epoch = 0) {
      const now = parkNow(i32, index, value, timeout, signal)
      if (now !== undefined) return now
      const r = parkAtAsync(i32, index, value, timeout, signal, ref, watch >>> 0, epoch >>> 0)
      return typeof r === 'number' ? codeOf(r, watch !== 0) : r
    },
    waker (i32, index) {
      const off = offsetOf(i32, index, 4)
      const count = countOf(off)
      return n => Atomics.add(words, count, 0) === 0 ? 0 : native.notify(off, n, h)
    },

    // lib/atomics.js: the public wait / waitAsync / notify / waiters
    waitCell (ta, i, size, value, timeout) {
      return RESULTS[codeOf(call(native.wait, ta, i, value, timeout, 0, 0, h), false)]
    },
    waitCellAsync (ta, i, size, value, timeout, signal, ref) {
      const r = parkAtAsync(ta, i, value, timeout, signal, ref, 0, 0)
      return typeof r === 'number' ? RESULTS[codeOf(r, false)] : r
    },
    notifyAt (addr, count) {
      return notifyOff(addr - base + pub, count)
    },
    waitersAt (addr) {
      return native.waiters(addr - base + pub, h)
    },

    // lib/sema.js: a Sema's pool and queue in the space (src/core/space_sema.c),
    // with the answers of the in-process ones. Its view is its offset.
    sema: Object.freeze({
      fast: false,
      view: i32 => pub + i32.byteOffset,
      try: off => call(native.semaTry, off, h),
      acquire: (off, ms) => call(native.semaAcquire, off, ms, h),
      acquireAsync (off, i32, timeout, signal, ref) {
        // A token (one was free), SEMA_TIMED_OUT (a live holder kept the
        // Sema's bookkeeping lock past the timeout), or a promise of a
        // token, SEMA_TIMED_OUT or SEMA_NO_TOKEN (acquire again), as the
        // in-process acquire's.
        const r = call(native.semaAcquireAsync, i32, timeout, asyncFlags(ref, signal), undefined, h)
        return typeof r === 'number' ? r : guarded(r, signal).catch(closedOwn)
      },
      release: (off, slot) => call(native.semaRelease, off, slot, h),
      waiting: off => native.semaWaiting(off, h),
      available: off => call(native.semaAvailable, off, h)
    }),

    // lib/rate-limit.js: a RateLimit's grants (src/core/space_sema.c), taken
    // under its turn's bucket lock, which orders them in every process: its
    // grant ring at i32, its turn after it. A caller that finds the turn
    // free with nobody queued is granted without taking it.
    rate (i32, turnByteOffset) {
      const turnOff = pub + turnByteOffset
      const grant = turnFreeOnly => call(native.rateTake, i32, turnFreeOnly, turnOff, h)
      return { grant, grantIfTurnFree: grant }
    },

    tier: 'space',
    // The cycles of lock waits in the space now (lib/inspect.js), each
    // with the space's name: for sabsync:deadlock.
    deadlocks (i32, index) {
      const also = { id: self, off: offsetOf(i32, index, 4) }
      const snap = inspect({ handle: h, buffer: opened.buffer, pubOff: pub, name: opened.name }, KINDS, also)
      return snap.deadlocks.map(d => ({ tier: 'space', space: opened.name, ...d }))
    },
    waitersOf: (i32, index) => native.waiters(offsetOf(i32, index, 4), h),
    // The slot's claims (pid, thread id), for an id whose lifeline the
    // kernel holds (src/core/space_inspect.c).
    party (id) {
      const p = native.spaceParty(h, id >>> 0)
      return p === null ? null : { pid: p.pid, threadId: p.threadId }
    }
  })
}

// ---- objects of a closed space ----

// close() unmaps the memory (before Node 24.16 / 26.1 it detaches the
// buffer), so a call on one of the space's objects afterwards would meet
// V8's detached-buffer TypeError deep inside it, or memory this thread no
// longer uses. While the space is open its objects keep their class's
// prototype, so their fast paths cost what an in-process object's do (a
// check on every call cost an uncontended lock + unlock a quarter more).
// The thread's last close gives every object it made from the space a
// prototype derived from its class's (one per class) whose methods and
// getters throw ERR_SABSYNC_SHARED_CLOSED, naming the space.
const spaceNames = new WeakMap() // a space's buffer -> its name
const closedProtos = new Map() // class -> the prototype of its closed space objects
const freedProtos = new Map() // class -> the prototype of its objects after space.free(key)

function closedError (buffer) {
  const name = spaceNames.get(buffer)
  return new SabsyncError('ERR_SABSYNC_SHARED_CLOSED',
    `the shared space "${name}" was closed in this thread: its objects cannot be used here now. ` +
    `Open it again (openShared(${JSON.stringify(name)})) and get the object again by its key`)
}

function freedError (buffer) {
  const name = spaceNames.get(buffer)
  return new SabsyncError('ERR_SABSYNC_SHARED_CLOSED',
    `this object's key was freed in this thread (space.free(key) on "${name}"): its room may hold ` +
    'another object now. Ask the space for the key again (space.mutex(key), ...) to use a live one')
}

function closedProto (Class, freed = false) {
  const protos = freed ? freedProtos : closedProtos
  const error = freed ? freedError : closedError
  let proto = protos.get(Class)
  if (proto !== undefined) return proto
  proto = Object.create(Class.prototype)
  for (const name of Object.getOwnPropertyNames(Class.prototype)) {
    const d = Object.getOwnPropertyDescriptor(Class.prototype, name)
    if (name === 'constructor') continue
    if (typeof d.value === 'function') {
      d.value = { [name] () { throw error(this.buffer) } }[name]
    } else if (d.get !== undefined) {
      d.get = function () { throw error(this.buffer) }
    } else {
      continue
    }
    Object.defineProperty(proto, name, d)
  }
  protos.set(Class, proto)
  return proto
}

// Remember an object made from the space `st` for its close (weakly: a
// key asked for again makes a new object each time, and objects nobody
// holds go).
function track (st, object, key) {
  const proto = Object.getPrototypeOf(object)
  if (proto === null || typeof proto.constructor !== 'function' || proto === Object.prototype ||
      ArrayBuffer.isView(object) || typeof object === 'function') {
    return object
  }
  const ref = new WeakRef(object)
  if (key !== undefined) keyOfRef.set(ref, key)
  st.objects.add(ref)
  if (st.objects.size > st.pruneAt) {
    for (const ref of st.objects) if (ref.deref() === undefined) st.objects.delete(ref)
    st.pruneAt = 2 * st.objects.size + 64
  }
  return object
}

const keyOfRef = new WeakMap() // a tracked object's WeakRef -> the caller's key

// The object, its key told to the diagnostics channels (lib/inside.js);
// arrays are not named (nothing traces them).
function named (object, key) {
  if (typeof object === 'function' || (typeof object === 'object' && object !== null && !ArrayBuffer.isView(object))) {
    nameObject(object, key)
  }
  return object
}

// Close this thread's objects of the space (of `key` alone, when given).
function closeObjects (st, key) {
  for (const ref of st.objects) {
    if (key !== undefined && keyOfRef.get(ref) !== key) continue
    const object = ref.deref()
    if (object !== undefined) {
      // An object already closed (freed before) keeps its prototype.
      const proto = Object.getPrototypeOf(object)
      if (!closedProtos.has(proto.constructor) || closedProtos.get(proto.constructor) !== proto) {
        Object.setPrototypeOf(object, closedProto(proto.constructor, key !== undefined))
      }
    }
    if (key !== undefined) st.objects.delete(ref)
  }
  if (key === undefined) st.objects.clear()
}

// ---- this thread's open spaces ----

const opened = new Map() // name -> { name, handle, buffer, pubOff, size, refs }

// Versioned keys ({ versioned: true }): a space outlives every process, and
// a key keeps the kind and parameters it was made with, so a deploy that
// changes a Sema's nr or a limit's rate would meet the old object and fail
// with ERR_SABSYNC_SHARED_MISMATCH. With versioned keys, the directory key
// is the caller's key plus the kind and parameters: processes of the old
// deploy keep using the old object (it is never changed under them), the
// new ones make and share a new one. Until the last old process ends, both
// limits hold at once (each over its own processes). Old objects stay in the
// directory until the space is unlinked.
const VERSION_MARK = '\u0002' // refused in callers' keys, so a versioned key is never one of theirs

// The default (versioned left out): the kinds whose parameters are state
// that cannot change under the processes that use it (a Sema's tokens, a
// Barrier's parties, a RateLimit's ring of rps grants) are versioned, so a deploy that changes them meets no
// mismatch; the others keep one object per key (an array's length, a
// lock's reader slots: a mismatch stays an error that says what to do).
// A new version retires the others of its key, whose room is reclaimed at
// the next lookup after their last user has gone (src/core/space.c).
const STATE = 'state'
const STATE_KINDS = new Set([KIND.barrier, KIND.sema, KIND.rateLimit])
const versions = (mode, kind) => mode === true || (mode === STATE && STATE_KINDS.has(kind))

function versionedKey (key, kind, params) {
  const k = `${key}${VERSION_MARK}${kind}:${params.join(',')}`
  const bytes = Buffer.byteLength(k)
  if (bytes > C.SPACE_KEY_MAX) {
    throw outOfRange('key', `a string of at most ${C.SPACE_KEY_MAX - (bytes - Buffer.byteLength(key))} bytes (UTF-8) ` +
      'in a versioned space (the kind and parameters are added to it)', Buffer.byteLength(key))
  }
  return k
}

// The caller's key in a directory key.
const shownKey = key => key.split(VERSION_MARK)[0].replace(/\u0001$/, '') // eslint-disable-line no-control-regex

class Space {
  #st
  #closed = false
  #versioned

  constructor (st, versioned) {
    this.#st = st
    this.#versioned = versioned
  }

  /**
   * How this view derives directory keys (openShared's options.versioned):
   * true (every kind's key carries its parameters), false (none), or
   * 'state' (the default: sema, barrier and rateLimit keys carry theirs).
   */
  get versioned () { return this.#versioned }

  /** The space's name. */
  get name () { return this.#st.name }

  /** Its size in bytes (all of it, bookkeeping included). */
  get size () { return this.#st.size }

  /** This thread's owner id in the space (the same in every process). */
  get ownerId () { return this.#st.id }

  /** Whether this call's process created the space (first opener). */
  get created () { return this.#st.created }

  /** Whether this object was closed. */
  get closed () { return this.#closed }

  /**
   * The Web Locks API for every thread of every process that opens the
   * space (lib/locks/processes.js): one manager per thread and space.
   */
  get locks () {
    const st = this.#live()
    if (st.locks === undefined) st.locks = makeSpaceLocks(this, backendOf(st.buffer))
    return st.locks
  }

  #live () {
    if (this.#closed) throw new SabsyncError('ERR_SABSYNC_SHARED_CLOSED', `the shared space "${this.#st.name}" was closed`)
    return this.#st
  }

  // The object of `key`: created (the directory locked meanwhile) or
  // attached to. params: up to four unsigned 32-bit numbers that must agree.
  #object (kind, key, params, bytes, create, attach) {
    checkKey(key)
    if (key.includes(VERSION_MARK)) throw invalidValue('key', 'a string without U+0002 (versioned spaces use it)', key)
    const versioned = versions(this.#versioned, kind)
    if (versioned) key = versionedKey(key, kind, params)
    return this.#lookup(kind, key, params, bytes, create, attach, versioned)
  }

  #lookup (kind, key, params, bytes, create, attach, versioned = false) {
    const st = this.#live()
    checkKey(key)
    let created, off
    try {
      created = native.spaceLookup(st.handle, key, kind, bytes,
        params[0] || 0, params[1] || 0, params[2] || 0, params[3] || 0) === C.SPACE_CREATE
      off = OUT[0]
    } catch (err) {
      if (err.code === 'ERR_SABSYNC_SHARED_FULL') throw this.#full(key, bytes)
      throw err.code === 'ERR_SABSYNC_SHARED_MISMATCH' ? this.#mismatch(key, kind, params) : own(err)
    }
    const memory = { buffer: st.buffer, byteOffset: off - st.pubOff }
    const shown = shownKey(key)
    if (!created) return named(track(st, attach(memory), shown), shown)
    let made = false
    let object
    try {
      object = create(memory)
      made = true
    } finally {
      if (made) native.spacePublish(st.handle, off)
      else native.spaceAbandon(st.handle)
    }
    // A new version retires the others of its key: the processes that use
    // them keep them; their room is reclaimed once the last has gone.
    if (versioned) call(native.spaceRetire, st.handle, shown, C.SPACE_RETIRE_VERSIONS, off)
    return named(track(st, object, shown), shown)
  }

  /**
   * Free the object of `key` (every version of it, in a versioned space):
   * this thread stops using it (its objects of `key` here throw
   * ERR_SABSYNC_SHARED_CLOSED from now on), and its room (a directory
   * entry and its bytes) is reclaimed now if no other thread or process
   * uses it, else once the last of them has closed the space or ended.
   * Until then others keep using it, and a lookup of `key` finds it.
   * Answers true when nothing of `key` is left in the space, false when
   * others still use it. Free only what this thread no longer holds or
   * waits on; its arrays (plain typed arrays) cannot be closed: drop them.
   */
  free (key) {
    const st = this.#live()
    checkKey(key)
    if (key.includes(VERSION_MARK)) throw invalidValue('key', 'a string without U+0002 (versioned spaces use it)', key)
    closeObjects(st, key)
    // A rateLimiter's table is its key + U+0001: freed with it.
    let left = 0
    for (const k of [key, key + '\u0001']) {
      if (Buffer.byteLength(k) > C.SPACE_KEY_MAX) continue
      const matched = call(native.spaceRetire, st.handle, k, C.SPACE_RETIRE_VERSIONS | C.SPACE_RETIRE_SELF, 0)
      left += matched - OUT[0]
    }
    return left === 0
  }

  /**
   * What the space holds: { objects, maxObjects, retired, bytesUsed,
   * bytes } (retired: objects freed or replaced by a new version whose
   * room waits for their last user to go; bytes: the heap for objects).
   */
  usage () {
    const st = this.#live()
    const objects = native.spaceUsage(st.handle)
    return { objects, maxObjects: OUT[0], retired: OUT[1], bytesUsed: OUT[2], bytes: OUT[3] }
  }

  // A directory or heap with no room for a new object: which limit was
  // met, and what to do.
  #full (key, bytes) {
    const st = this.#st
    const u = this.usage()
    const need = Math.ceil(bytes / 64) * 64
    const name = JSON.stringify(shownKey(key))
    const where = `openShared: no room for ${name} in the space "${st.name}" (/dev/shm/sabsync.${st.name}): `
    const retired = u.retired === 0
      ? ''
      : ` (${u.retired} of them freed or replaced, whose room comes back once the processes that still use them close the space or end)`
    let why
    if (u.objects + u.retired >= u.maxObjects) {
      why = `it holds ${u.objects + u.retired} objects, the most a space has${retired}. ` +
        'Free the keys no longer used (space.free(key), say when a keyed object is done), or put the objects in several spaces'
    } else {
      why = `this object needs ${need} bytes and ${u.bytes - u.bytesUsed} of the space's ${u.bytes} bytes for objects are left` +
        `${retired}. Free objects no longer used (space.free(key)), or open a bigger space under a new name ` +
        `(openShared(name, { size }), size now ${st.size}; a space's size is fixed when it is made)`
    }
    return new SabsyncError('ERR_SABSYNC_SHARED_FULL', where + why)
  }

  // What a key holds and what was asked, in the caller's terms (which
  // parameter, the value in use, the value asked) and what to do: a space
  // outlives every process, so a deploy that changes parameters meets the
  // old object.
  #mismatch (key, kind, params) {
    const st = this.#st
    const p = [0, 1, 2, 3].map(i => params[i] || 0)
    const found = call(native.spaceEntry, st.handle, key) === C.SPACE_ATTACH
    const name = JSON.stringify(shownKey(key))
    const where = `the key ${name} of the space "${st.name}" (/dev/shm/sabsync.${st.name})`
    const asked = KINDS[kind]
    const ways = 'another key for the new object (say ' + JSON.stringify(shownKey(key) + '-v2') + '), ' +
      'or openShared(name, { versioned: true }) in every process, which makes one object per set of parameters ' +
      '(old processes keep the old one, new ones share the new one; docs/processes.md, "Changing parameters across a rolling deploy")'
    if (!found) {
      return new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH',
        `openShared: ${where} changed while this call asked for it: ask again`)
    }
    const inUse = OUT[0]
    const used = [OUT[2], OUT[3], OUT[4], OUT[5]]
    if (inUse !== kind || KINDS[inUse] === undefined) {
      return new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH',
        `openShared: ${where} holds ${describeEntry(inUse, used)}, and this call asked for ${describeEntry(kind, p)}: ` +
        `a key names one object for the life of the space. Use ${ways}`)
    }
    const mine = asked.params(p)
    const theirs = asked.params(used)
    const diff = mine.filter(([n, v], i) => theirs[i][1] !== v)
      .map(([n, v], i) => `${n}: ${JSON.stringify(theirs[mine.findIndex(m => m[0] === n)][1])} is in use, this call asked for ${JSON.stringify(v)}`)
    const what = diff.length > 0 ? diff.join('; ') : `its size in bytes differs (${describeEntry(inUse, used)})`
    const same = theirs.filter(([n, v], i) => mine[i][1] !== v).map(([n, v]) => `${n}: ${JSON.stringify(v)}`).join(', ')
    return new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH',
      `openShared: ${asked.call}(${name}) of the space "${st.name}": ${what}. ` +
      'A key keeps its parameters until the space is unlinked, or the key freed (space.free(key)) once no process uses it. ' +
      `To change them: ${same === '' ? '' : `ask with ${same} to share the object in use, use `}${ways}`)
  }

  #cells (kind, key, length, Type) {
    countArg('length', length, 1, MAX_CELLS)
    const bytes = length * Type.BYTES_PER_ELEMENT
    const make = ({ buffer, byteOffset }) => new Type(buffer, byteOffset, length)
    return this.#object(kind, key, [length], bytes, make, make) // zeroed when made
  }

  /** `length` Int32 cells: sabsync's wait / waitAsync / notify on them reach every process. */
  int32Array (key, length) { return this.#cells(KIND.int32Array, key, length, Int32Array) }

  /** `length` BigInt64 cells, as int32Array. */
  bigInt64Array (key, length) { return this.#cells(KIND.bigInt64Array, key, length, BigInt64Array) }

  mutex (key) {
    return this.#object(KIND.mutex, key, [], Mutex.byteLength, m => new Mutex(m), m => Mutex.from(m))
  }

  atomicFlag (key) {
    return this.#object(KIND.atomicFlag, key, [], AtomicFlag.byteLength, m => new AtomicFlag(m), m => AtomicFlag.from(m))
  }

  once (key) {
    return this.#object(KIND.once, key, [], Once.byteLength, m => new Once(m), m => Once.from(m))
  }

  latch (key, count) {
    countArg('count', count, 0, 0x7FFFFFFF)
    return this.#object(KIND.latch, key, [count], Latch.byteLength, m => new Latch(count, m), m => Latch.from(m))
  }

  condVar (key) {
    return this.#object(KIND.condVar, key, [], CondVar.byteLength, m => new CondVar(m), m => CondVar.from(m))
  }

  rwlock (key, options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw invalidType('options', 'an object', options)
    }
    const readerSlots = options === undefined || options.readerSlots === undefined ? 64 : options.readerSlots
    const bytes = RWLock.byteLengthFor(readerSlots) // validates it
    return this.#object(KIND.rwlock, key, [readerSlots], bytes,
      m => new RWLock({ ...m, readerSlots }), m => RWLock.from(m))
  }

  barrier (key, parties) {
    const bytes = Barrier.byteLengthFor(parties) // validates it
    return this.#object(KIND.barrier, key, [parties], bytes, m => new Barrier(parties, m), m => Barrier.from(m))
  }

  /**
   * A Sema of `nr` tokens shared by every process. options: initFn,
   * pauseFn, resumeFn (this thread's, as for Sema.from).
   */
  sema (key, nr, options) {
    const bytes = Sema.byteLengthFor(nr) // validates it
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw invalidType('options', 'an object', options)
    }
    const { initFn, pauseFn, resumeFn } = options || {}
    const own = { initFn, pauseFn, resumeFn }
    return this.#object(KIND.sema, key, [nr], bytes,
      m => new Sema(nr, { ...own, ...m }), m => Sema.from(m, own))
  }

  /**
   * A RateLimit of `rps` per options.timeUnit ms shared by every process:
   * an async function (and .sync) as RateLimit gives.
   */
  rateLimit (key, rps, options) {
    const bytes = RateLimit.byteLengthFor(rps) // validates it
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw invalidType('options', 'an object', options)
    }
    const { timeUnit = 1000, uniformDistribution = false } = options || {}
    // Checked as RateLimit checks them, before the directory is touched.
    RateLimit(rps, { timeUnit, uniformDistribution })
    const unit = new Float64Array([timeUnit])
    const [lo, hi] = new Uint32Array(unit.buffer)
    return this.#object(KIND.rateLimit, key, [rps, lo, hi, uniformDistribution ? 1 : 0], bytes,
      m => RateLimit(rps, { timeUnit, uniformDistribution, ...m }), m => RateLimit.from(m))
  }

  /**
   * A RateLimiter (a limit per client key) shared by every process:
   * options { limit, window, burst, exact, keys, whenFull } as new
   * RateLimiter. Only keys (the table's size) must agree between
   * processes; the rest are this caller's, so a rolling deploy that
   * changes a limit shares one table and the new limit holds after it.
   */
  rateLimiter (key, options) {
    checkKey(key)
    if (key.includes(VERSION_MARK)) throw invalidValue('key', 'a string without U+0002 (versioned spaces use it)', key)
    if (this.#versioned === true) {
      // Only the table's size is its state: limit, window, burst, exact and
      // whenFull are each caller's, applied to one table across a deploy.
      const p = parseRateLimiterOptions(options)
      key = versionedKey(key, KIND.rateLimiter, [p.keys])
    }
    if (Buffer.byteLength(key) >= C.SPACE_KEY_MAX) {
      throw outOfRange('key', `a string of 1 to ${C.SPACE_KEY_MAX - 1} bytes (UTF-8) for a rateLimiter`, Buffer.byteLength(key))
    }
    const lookup = (...args) => this.#lookup(...args)
    const limiter = rateLimiterIn(lookup, key, options, { header: KIND.rateLimiter, table: KIND.rateLimiterTable })
    return named(track(this.#live(), limiter, shownKey(key)), shownKey(key))
  }

  /**
   * A plain, JSON-serialisable snapshot of the space for a person or a
   * tool: every object (kind, key, parameters, holders, waiters), the
   * processes attached, the deaths so far, the limiters' occupancy, and
   * what could not be read (lib/inspect.js). It takes no lock: it never
   * waits for a holder, and never holds up a caller.
   */
  inspect () {
    return inspect(this.#live(), KINDS)
  }

  /**
   * Close this thread's view (once every object of this thread opened with
   * this name is closed): the objects made from it can no longer be used
   * here, this thread's owner id ends (as if the thread had died: what it
   * held passes on), and the mapping goes when nothing of this process
   * uses it. The space itself lives on.
   */
  close () {
    if (this.#closed) return
    this.#closed = true
    const st = this.#st
    if (--st.refs > 0) return
    opened.delete(st.name)
    closeObjects(st)
    native.spaceClose(st.handle)
  }

  /**
   * Remove the name: a later openShared of it makes a new space. Processes
   * that have it open keep using it. Answers false if the name was gone.
   */
  unlink () {
    return call(native.spaceUnlink, this.#st.name)
  }
}

/**
 * Open (creating it if needed) the shared space `name`, for this thread.
 * options.size: bytes, when this call creates it (default 1 MiB); given
 * when it exists, it must be its size. options.mode: the file's permission
 * bits when created (default 0o600).
 */
function openShared (name, options) {
  checkName(name)
  const { size, mode, versioned } = parseOpenOptions(options)
  let st = opened.get(name)
  if (st !== undefined) {
    if (size !== 0 && size !== st.size) {
      throw new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH', `openShared: "${name}" is open with size ${st.size}, not ${size}`)
    }
    st.refs++
    return new Space(st, versioned)
  }
  const r = call(native.spaceOpen, name, size, mode)
  native.spaceThreadSet(r.handle, threadId)
  st = {
    name,
    handle: r.handle,
    buffer: r.buffer,
    pubOff: r.pubOff,
    size: r.size,
    id: r.id,
    created: r.created,
    refs: 1,
    objects: new Set(), // WeakRefs of the objects made from it (track)
    pruneAt: 64
  }
  addSpace(r.buffer, backendOfSpace({ ...r, name }))
  spaceNames.set(r.buffer, name)
  opened.set(name, st)
  return new Space(st, versioned)
}

/** Remove the space `name` without opening it; false if there was none. */
openShared.unlink = function unlink (name) {
  checkName(name)
  return call(native.spaceUnlink, name)
}

module.exports = { openShared, Space }
