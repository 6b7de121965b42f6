'use strict'
// Sema: a token semaphore shared by every thread, with async-sema's
// meanings. The queue is native (src/core/sema.c), and so is every call
// that may wait or hand a slot to a waiter; this file validates, maps slots
// to this thread's token values, keeps this thread's bookkeeping (which
// slots it got, for release() without a token and for `recovered`; how
// many of its acquires are queued; pauseFn / resumeFn), and takes the fast
// path.
//
// The fast path (the protocol is the table atop src/core/sema.c). A slot
// is free or held according to its holder word alone, and changes hands by
// one compare-and-swap of that word. While the waiters' bucket counter of
// the native lot reads 0 (nobody queued; lib/lot.js), tryAcquire, acquire
// and acquireSync take a free slot with one CAS (free -> this thread's
// owner id), and release gives one back with one CAS (id -> 0), then reads
// the counter again and, if a waiter came meanwhile, calls semaKick, which
// hands free slots to the oldest waiters (K2: no lost wake). A thread torn
// down between its CAS and the rest leaves only the hints (avail, next) off,
// which nothing trusts. Anything else (the counter raised, no free slot
// among the first SCAN searched, a header that does not match, a CAS that
// fails) goes native, which answers as before: FIFO (K3), death recovery
// (the holder word names the owner, so a dead thread's slots are
// reclaimed), `recovered` (a free slot whose holder died is RECOVERED, and
// the CAS that takes it reports it), exact nrWaiting() (the lot's count).
//
// In a shared space (openShared) its waiters queue in the space's own
// queues and the backend's sema has no `fast`: there every call is native.

const native = require('./native')
const {
  memoryOf, madeAs, parseTimeout, parseAsyncOptions, backendOf,
  WATCH_ANY, SabsyncError, invalidType, outOfRange
} = require('./shared')
const { attachTo, sizeAgrees } = require('./kind')
const { describe } = require('./errors')
const { counts, bucketOf, addressOf } = require('./lot')
const { ACQUIRE, observed, waitSync, waitAsync } = require('./inside')

const {
  SEMA_MAX: MAX,
  SEMA_RECOVERED: RECOVERED, // in a native token: its last holder died
  SEMA_HANDED_SELF: HANDED_SELF, // semaRelease's info bits
  SEMA_POOLED: POOLED,
  SEMA_MAGIC: MAGIC,
  SEMA_W_AVAIL: W_FREES, // native frees so far: refill watchers park on it
  SEMA_KEY_OFFSET: KEY_OFFSET, // the waiters' lot key, in the bucket of W_FREES
  SEMA_W_NR: W_NR,
  SEMA_W_NEXT: W_NEXT, // where a search for a free slot starts (a hint)
  SEMA_HELD_RECOVERED: FREE_RECOVERED, // a free slot's holder word after a death
  SEMA_HEADER_BYTES: HEADER_BYTES,
  SEMA_NO_TOKEN: NO_TOKEN, // an async acquire woken without a token
  SEMA_FAIR_NS,
  OK
} = native.constants
// The token or the info bits of the last native try, acquire or release
// that answered OK (src/napi/results.h).
const OUT = native.out
const DEFAULT_NR = 64 // the tokens that Sema.byteLength holds
const HOLDERS = HEADER_BYTES / 4 // holder[i] is word HOLDERS + nr + i
const OWNER = 0x3FFFFFFF // a holder word's owner bits
const SCAN = 16 // holder words the fast path looks at before it goes native
const ATTACH = Symbol('attach') // Sema.from's way through the constructor
// The fairness bound (src/core/sema.c F1-F4): a waiter queued this long is
// handed tokens directly and overtaken by nobody; a younger one is woken to
// try again, and a running thread may take the token first.
const FAIR_MS = SEMA_FAIR_NS / 1e6
// An option of new Sema() and Sema.from(), not public: another bound in ms.
// 0 is a strict hand-off (every release hands its token to the oldest
// waiter, and nobody takes one while others wait): lib/rate-limit.js's
// turn. Tests set a long one to make a barge certain. Every thread's
// object over one memory should agree (the releaser's bound decides a
// hand-off, the taker's whether it may take).
const FAIRNESS = Symbol('sabsync.sema.fairMs')

let pausedOf, resume // set in Sema's static block
let queueOn // (sema, timeout, signal, ref) => its #queue: set in Sema's static block

// A blocking acquire that waits (traced, lib/inside.js).
function acquireOn (ops, view, ms) {
  return ops.acquire(view, ms)
}

function checkNr (nr, name = 'nr') {
  if (typeof nr !== 'number') throw invalidType(name, 'a positive integer', nr)
  if (!Number.isInteger(nr) || nr < 1 || nr > MAX) {
    throw outOfRange(name, `an integer >= 1 and <= ${MAX}`, nr)
  }
}

function optionalFunction (name, value) {
  if (value !== undefined && typeof value !== 'function') throw invalidType(name, 'a function', value)
  return value
}

// { initFn, pauseFn, resumeFn } of new Sema() and Sema.from(); capacity
// only for the constructor.
function parseOptions (options, ctor) {
  if (options === undefined || options === null) return { fairMs: FAIR_MS }
  if (typeof options !== 'object') throw invalidType('options', 'an object', options)
  const initFn = optionalFunction('options.initFn', options.initFn)
  const pauseFn = optionalFunction('options.pauseFn', options.pauseFn)
  const resumeFn = optionalFunction('options.resumeFn', options.resumeFn)
  if ((pauseFn === undefined) !== (resumeFn === undefined)) {
    const [given, missing] = pauseFn === undefined ? ['resumeFn', 'pauseFn'] : ['pauseFn', 'resumeFn']
    throw invalidType(`options.${missing}`, `a function when options.${given} is given (pausing needs both)`, options[missing])
  }
  if (ctor && options.capacity !== undefined) {
    // async-sema preallocates its waiting list with it; here waiters are
    // list nodes in the native queue, so it is only checked.
    const c = options.capacity
    if (typeof c !== 'number') throw invalidType('options.capacity', 'a positive integer', c)
    if (!Number.isInteger(c) || c < 1) throw outOfRange('options.capacity', 'a positive integer', c)
  }
  const fairMs = options[FAIRNESS] === undefined ? FAIR_MS : options[FAIRNESS]
  if (typeof fairMs !== 'number' || !(fairMs >= 0 && fairMs <= 3600000)) {
    throw outOfRange('options[fairness]', 'a number of ms from 0 to 3600000', fairMs)
  }
  return { initFn, pauseFn, resumeFn, fairMs }
}

function badToken (message) {
  return new SabsyncError('ERR_SABSYNC_BAD_TOKEN', message)
}

// What this thread knows about one Sema's memory, shared by every Sema
// object of this thread over it (so release() without a token means "the
// token this thread got most recently", whichever object it came through).
//   held:      slots delivered to JS here, oldest first
//   recovered: those of them whose last holder had died
//   queued:    this thread's acquires still in the native queue, as far as
//              this thread can tell (one handed over by another thread
//              counts until its promise settles)
//   early:     acquires of ours that our own release handed a slot to,
//              counted off `queued` already, whose promises have not settled
//   pausers:   objects with pauseFn/resumeFn
const locals = new WeakMap() // SharedArrayBuffer -> Map(byteOffset -> local)

// A slot given back: off this thread's list (the newest first; pop
// allocates nothing, splice does) and its mark.
function forget (local, slot) {
  const held = local.held
  if (held.length !== 0 && held[held.length - 1] === slot) held.pop()
  else {
    const i = held.lastIndexOf(slot)
    if (i >= 0) held.splice(i, 1)
  }
  if (local.recovered.size !== 0) local.recovered.delete(slot)
}

function localOf (buffer, byteOffset) {
  let byOffset = locals.get(buffer)
  if (byOffset === undefined) locals.set(buffer, byOffset = new Map())
  let local = byOffset.get(byteOffset)
  if (local === undefined) {
    local = {
      held: [],
      recovered: new Set(),
      queued: 0,
      early: 0,
      pausers: new Set(),
      watching: false,
      own: backendOf(buffer), // its memory's backend (lib/backend.js)
      view: null
    }
    byOffset.set(byteOffset, local)
  }
  return local
}

class Sema {
  #i32
  #ops // the Sema operations of its memory's backend (lib/backend.js)
  #view // the native checked view of the memory (see src/napi/sema.c), or the space's offset
  #nr
  #local
  #values // slot -> this thread's token value, or null: tokens are slots
  #slots // value -> [slot, ...] (with initFn)
  #pauseFn
  #resumeFn
  #paused = false
  #fast = false // the fast path applies (in-process memory, counters readable)
  #bucket = 0 // index in `counts` of the bucket of the waiters and the refill watchers
  #self = 0 // this thread's owner id, as a holder word holds it
  #hold = 0 // the index of holder[0]
  #fairMs = FAIR_MS // the fairness bound (FAIRNESS)

  /**
   * @param {number} nr tokens (slots 0 … nr-1)
   * @param {object} [options] { initFn, pauseFn, resumeFn, capacity, buffer, byteOffset }
   */
  constructor (nr, options) {
    if (nr === ATTACH) {
      this.#setup(options.mem, options.nr, options.opts)
      return
    }
    checkNr(nr)
    const opts = parseOptions(options, true)
    const mem = memoryOf('Sema', native.semaBytes(nr), options)
    native.semaInit(mem.i32, nr)
    this.#setup(mem, nr, opts)
  }

  /**
   * Bytes that hold a Sema of up to 64 tokens (API.md: every primitive has
   * a static byteLength); `byteLengthFor(nr)` for the exact size.
   */
  static get byteLength () { return native.semaBytes(DEFAULT_NR) }

  /** Bytes a Sema of `nr` tokens needs in shared memory (8-byte aligned). */
  static byteLengthFor (nr) {
    checkNr(nr)
    return native.semaBytes(nr)
  }

  /** Attach to a Sema made in another thread (or its { buffer, byteOffset }). */
  static from (handle, options) {
    // A Sema's first word is SAB_SEMA_MAGIC, its kind tag: memory of
    // another kind, or none, is refused here, before any native call.
    const { buffer, byteOffset, byteLength } = attachTo('Sema', handle)
    const opts = parseOptions(options, false)
    const head = memoryOf('Sema', HEADER_BYTES, { buffer, byteOffset }, 'handle')
    const nr = Atomics.load(head.i32, W_NR)
    if (Atomics.load(head.i32, 0) !== MAGIC || !(nr >= 1 && nr <= MAX)) {
      throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `sabsync: no Sema at byteOffset ${head.byteOffset} of this buffer`)
    }
    sizeAgrees('Sema', head.byteOffset, byteLength, native.semaBytes(nr), `a Sema of ${nr} tokens`)
    const mem = memoryOf('Sema', native.semaBytes(nr), { buffer, byteOffset }, 'handle')
    // #setup's semaView checks it all again, natively.
    const sema = new Sema(ATTACH, { mem, nr, opts })
    // The size is taken from the memory once, here, and kept. A size that
    // a racing write made up (with room for it in the buffer) would make
    // this object bigger than the one made: the handle's byteLength, which
    // a posted Sema carries, refuses that above (sizeAgrees); for a bare
    // { buffer, byteOffset }, look again after the native look, so that a
    // scribble must hold across both to get through.
    if (Atomics.load(mem.i32, W_NR) !== nr || Atomics.load(mem.i32, 0) !== MAGIC) {
      throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `sabsync: the Sema at byteOffset ${head.byteOffset} changed while it was attached to`)
    }
    return sema
  }

  #setup (mem, nr, { initFn, pauseFn, resumeFn, fairMs }) {
    // Own enumerable data: what postMessage copies, and Sema.from reads.
    Object.defineProperty(this, 'buffer', { value: mem.buffer, enumerable: true })
    Object.defineProperty(this, 'byteOffset', { value: mem.byteOffset, enumerable: true })
    Object.defineProperty(this, 'byteLength', { value: mem.i32.byteLength, enumerable: true })
    madeAs(this, 'Sema')
    this.#i32 = mem.i32
    this.#local = localOf(mem.buffer, mem.byteOffset)
    this.#ops = this.#local.own.sema
    this.#fairMs = fairMs
    this.#view = this.#ops.view(mem.i32, fairMs)
    if (this.#local.view === null) this.#local.view = this.#view
    this.#nr = nr
    this.#values = null
    if (this.#ops.fast) {
      const addr = addressOf(mem.i32, mem.buffer, 0, 4)
      this.#fast = true
      this.#bucket = bucketOf(addr + KEY_OFFSET) // = bucketOf(addr + 4 * W_FREES)
      this.#self = this.#local.own.self & OWNER
      this.#hold = HOLDERS + nr
    }
    if (initFn !== undefined) {
      this.#values = new Array(nr)
      this.#slots = new Map()
      for (let slot = 0; slot < nr; slot++) {
        const value = initFn(slot)
        this.#values[slot] = value
        const list = this.#slots.get(value)
        if (list === undefined) this.#slots.set(value, [slot])
        else list.push(slot)
      }
    }
    if (pauseFn !== undefined) {
      this.#pauseFn = pauseFn
      this.#resumeFn = resumeFn
      this.#local.pausers.add(this)
    }
  }

  /** The number of tokens. */
  get nr () { return this.#nr }

  // A native token (slot | RECOVERED) became this thread's.
  #got (t) {
    const recovered = t >= RECOVERED
    const slot = recovered ? t - RECOVERED : t
    const local = this.#local
    local.held.push(slot)
    if (recovered) local.recovered.add(slot)
    else if (local.recovered.size !== 0) local.recovered.delete(slot)
    return this.#values === null ? slot : this.#values[slot]
  }

  // The fast take: a token (slot | RECOVERED), or -1 (go native). The
  // words read before the CAS are plain reads (cheaper than Atomics.load,
  // a builtin call): a stale counter only lets this take overtake a waiter
  // that queued while it ran (K3 allows that), a stale header or holder
  // only sends it native or makes its CAS fail. The slot is a loop index
  // below this object's own nr, never a value read from the memory.
  #take () {
    const i32 = this.#i32
    const nr = this.#nr
    if (!this.#fast || counts[this.#bucket] !== 0 || i32[0] !== MAGIC || i32[W_NR] !== nr) return -1
    const start = i32[W_NEXT]
    let i = start >= 0 && start < nr ? start : 0
    const hold = this.#hold
    for (let k = nr < SCAN ? nr : SCAN; k > 0; k--) {
      const h = i32[hold + i]
      if ((h === 0 || h === FREE_RECOVERED) && Atomics.compareExchange(i32, hold + i, h, this.#self) === h) {
        const next = i + 1 === nr ? 0 : i + 1
        if (next !== start) i32[W_NEXT] = next // a hint: no store when it would not change
        return h === 0 ? i : i + RECOVERED
      }
      if (++i === nr) i = 0
    }
    return -1
  }

  // The fast give-back of slot (0 <= slot < nr, checked by the caller):
  // true, or false (go native: someone waits, or the word is not ours).
  #give (slot) {
    const i32 = this.#i32
    const self = this.#self
    if (!this.#fast || counts[this.#bucket] !== 0 || i32[0] !== MAGIC || i32[W_NR] !== this.#nr ||
        Atomics.compareExchange(i32, this.#hold + slot, self, 0) !== self) return false
    // K2: the counter read after the CAS (seq-cst both): a waiter that
    // queued since, or a refill watcher (both in this bucket), is served
    // natively.
    if (Atomics.load(counts, this.#bucket) !== 0) native.semaKick(this.#view)
    return true
  }

  /** A token if one is free and nobody waits for one, else undefined. */
  tryAcquire () {
    let t = this.#take()
    if (t < 0 && this.#ops.try(this.#view) === OK) t = OUT[0]
    return t < 0 ? undefined : this.#got(t)
  }

  /**
   * Block this thread until a token is free (for workers; allowed on the
   * main thread, as Atomics.wait is in Node). undefined after `timeout` ms.
   */
  acquireSync (timeout) {
    const ms = parseTimeout(timeout)
    let t = this.#take()
    if (t < 0) {
      const r = ms === 0
        ? this.#ops.try(this.#view)
        : waitSync(ACQUIRE, this, 'Sema', acquireOn, this.#ops, this.#view, ms)
      if (r === OK) t = OUT[0]
    }
    return t < 0 ? undefined : this.#got(t)
  }

  /**
   * A promise of a token: at once if one is free, else when a release
   * hands one over (oldest waiter first, across threads). Resolves
   * undefined after options.timeout ms; rejects with signal.reason on abort.
   */
  acquire (options) {
    if (options === undefined) {
      // The common call: no options to parse, and a free slot taken fast.
      const t = this.#take()
      if (t >= 0) return Promise.resolve(this.#got(t))
    }
    let opts
    try {
      opts = parseAsyncOptions(options)
    } catch (err) {
      return Promise.reject(err)
    }
    return this.#acquire(opts)
  }

  #acquire ({ timeout, signal, ref }, again = false) {
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    // A free slot needs no native record; the fast take and semaTry
    // refuse while others wait, so this overtakes nobody.
    let now = this.#take()
    if (now < 0 && this.#ops.try(this.#view) === OK) now = OUT[0]
    if (now >= 0 || timeout === 0) return Promise.resolve(now < 0 ? undefined : this.#got(now))
    // It waits: traced once (lib/inside.js), not again when it asks again.
    if (!again && observed(ACQUIRE)) return waitAsync(ACQUIRE, this, 'Sema', queueOn, this, timeout, signal, ref)
    return this.#queue(timeout, signal, ref)
  }

  #queue (timeout, signal, ref) {
    const r = this.#ops.acquireAsync(this.#view, this.#i32, timeout, signal, ref, this.#fairMs)
    // A token, or SEMA_TIMED_OUT: a space's bookkeeping lock kept past the timeout.
    if (typeof r === 'number') return Promise.resolve(r >= 0 ? this.#got(r) : undefined)
    const local = this.#local
    local.queued++
    if (this.#pauseFn !== undefined && !this.#paused) {
      this.#paused = true
      this.#pauseFn()
    }
    return r.then(t => {
      if (t >= 0 && local.early > 0) local.early--
      else local.queued--
      const value = t >= 0 ? this.#got(t) : undefined
      if (local.queued === 0) resumeCheck(this.#i32, local)
      // Woken without a token (a stray wake on the waiters' key): queue again.
      return t === NO_TOKEN ? this.#acquire({ timeout, signal, ref }, true) : value
    }, err => {
      local.queued--
      if (local.queued === 0) resumeCheck(this.#i32, local)
      throw err
    })
  }

  /**
   * Give a token back: to the longest waiter of any thread, else to the
   * pool. Without one: the token this thread got most recently.
   * A token this thread does not hold throws ERR_SABSYNC_BAD_TOKEN.
   */
  release (token) {
    const local = this.#local
    if (token === undefined) {
      const held = local.held
      if (held.length > 0 && this.#give(held[held.length - 1])) {
        const slot = held.pop()
        if (local.recovered.size !== 0) local.recovered.delete(slot)
        // #released(POOLED), without the calls while nobody pauses.
        if (local.pausers.size !== 0) resumeCheck(this.#i32, local)
        return
      }
      while (held.length > 0) {
        const slot = held.pop()
        local.recovered.delete(slot)
        if (this.#ops.release(this.#view, slot) === OK) return this.#released(OUT[0])
        // Not ours any more: a release() below gave it back before its
        // promise delivered it. Try the next.
      }
      // Nothing delivered is held; one may be on its way to an acquire of
      // ours (handed over, its promise not settled yet): the native side
      // knows, and gives back the newest.
      if (this.#ops.release(this.#view, -1) !== OK) throw badToken('release() without a token, but this thread holds no token of this Sema')
      return this.#released(OUT[0])
    }
    if (this.#values === null && Number.isInteger(token) && token >= 0 && token < this.#nr && this.#give(token)) {
      forget(local, token)
      if (local.pausers.size !== 0) resumeCheck(this.#i32, local)
      return
    }
    for (const slot of this.#slotsOf(token)) {
      if (this.#values !== null && this.#give(slot)) {
        forget(local, slot)
        return this.#released(POOLED)
      }
      if (this.#ops.release(this.#view, slot) === OK) {
        const info = OUT[0]
        const i = local.held.lastIndexOf(slot)
        if (i >= 0) local.held.splice(i, 1)
        local.recovered.delete(slot)
        return this.#released(info)
      }
    }
    throw badToken(`The "token" argument is not a token this thread holds (released twice, never acquired, or another thread's). Received ${describe(token)}`)
  }

  // Candidate slots for a token value, the likeliest first.
  #slotsOf (token) {
    if (this.#values === null) {
      return Number.isInteger(token) && token >= 0 && token < this.#nr ? [token] : []
    }
    const list = this.#slots.get(token)
    if (list === undefined || list.length === 1) return list || []
    // initFn gave equal values to several slots: the newest held first.
    const held = this.#local.held
    const order = []
    for (let i = held.length - 1; i >= 0; i--) {
      if (list.includes(held[i]) && !order.includes(held[i])) order.push(held[i])
    }
    for (const slot of list) if (!order.includes(slot)) order.push(slot)
    return order
  }

  // info: the bits of a native release (HANDED_SELF, POOLED).
  #released (info) {
    const local = this.#local
    if (info & HANDED_SELF) {
      // To an acquire of this thread: it no longer waits, though its promise
      // settles later.
      local.queued--
      local.early++
    }
    if ((info & POOLED) || local.queued === 0) resumeCheck(this.#i32, local)
  }

  /**
   * Whether this thread's hold of `token` (default: the token it got most
   * recently) came from a thread that died holding it: whatever the token
   * guards may be half-done.
   */
  recovered (token) {
    const local = this.#local
    if (token === undefined) {
      const held = local.held
      return held.length > 0 && local.recovered.has(held[held.length - 1])
    }
    for (const slot of this.#slotsOf(token)) if (local.recovered.has(slot)) return true
    return false
  }

  /** Acquire every token (waiting as acquire does); resolves to them all. */
  drain (options) {
    const all = []
    for (let i = 0; i < this.#nr; i++) all.push(this.acquire(options))
    return Promise.all(all)
  }

  /** How many acquires wait, on every thread (blocking and async). */
  nrWaiting () {
    return this.#ops.waiting(this.#view)
  }

  static {
    queueOn = (sema, timeout, signal, ref) => sema.#queue(timeout, signal, ref)
    // For resumeCheck, which serves every object of a thread's memory.
    pausedOf = sema => sema.#paused
    resume = sema => {
      if (!sema.#paused) return
      sema.#paused = false
      sema.#resumeFn()
    }
  }
}

// resumeFn: called when tokens are free again and nobody on this thread
// waits (as async-sema calls it when a release finds nobody waiting). When
// no token is free, watch the pool's size word until a release refills it
// (or a death, whose slots the next look reclaims), without keeping the
// loop alive.
function resumeCheck (i32, local) {
  if (local.pausers.size === 0 || local.queued !== 0) return
  let anyPaused = false
  for (const s of local.pausers) if (pausedOf(s)) anyPaused = true
  if (!anyPaused) return
  // Park first, then look (src/core/sema.c K2): the park raises the
  // bucket's counter before this look, so a give-back after the look reads
  // it and wakes us (a fast give-back changes no word we could park on),
  // and one before the look is seen by it.
  let r = null
  let ac = null
  if (!local.watching) {
    ac = new AbortController()
    const epoch = local.own.deathEpoch()
    r = local.own.parkAsync(i32, W_FREES, Atomics.load(i32, W_FREES), Infinity, ac.signal, false, WATCH_ANY, epoch)
  }
  if (local.own.sema.available(local.view) > 0) {
    if (r !== null && typeof r !== 'number') {
      r.catch(() => {})
      ac.abort()
    }
    for (const s of local.pausers) resume(s)
    return
  }
  if (r === null) return // a watch is pending already
  if (typeof r === 'number') {
    // A native free, or a death, since we read frees: look again.
    queueMicrotask(() => resumeCheck(i32, local))
    return
  }
  local.watching = true
  r.then(() => {
    local.watching = false
    resumeCheck(i32, local)
  })
}

module.exports = { Sema, FAIRNESS }
