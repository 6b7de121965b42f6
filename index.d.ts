// Type definitions for sabsync.
//
// Self-contained: no @types/node needed. What they use beyond ES2022 is
// `Symbol.dispose` (MutexGuard), from TypeScript's own lib below, and the
// global `AbortSignal` (lib "dom", or @types/node).
/// <reference lib="esnext.disposable" />

/** The arrays sabsync can wait on: as `Atomics.wait`, over a SharedArrayBuffer. */
export type WaitableArray = Int32Array | BigInt64Array

/** The cell value type for each array kind: `number` for an Int32Array, `bigint` for a BigInt64Array. */
export type CellValue<T extends WaitableArray> = T extends BigInt64Array ? bigint : number

/** Options of promise calls without a timeout: such a call never answers `undefined` / `false` for a timeout. */
export interface UntimedOptions {
  timeout?: undefined
  /** Aborting leaves the queue; the promise rejects with `signal.reason`. */
  signal?: AbortSignal
  /** Keep the event loop alive while pending (default true). */
  ref?: boolean
}

/** Options of promise calls. */
export interface AsyncOptions {
  /** Milliseconds; a timeout is an answer (false / undefined / 'timed-out'), not an error. */
  timeout?: number
  /** Aborting leaves the queue; the promise rejects with `signal.reason`. */
  signal?: AbortSignal
  /** Keep the event loop alive while pending (default true). */
  ref?: boolean
}

/** Extra options of `waitAsync`, beyond the built-in. */
export interface WaitAsyncOptions {
  signal?: AbortSignal
  ref?: boolean
}

export type WaitAsyncResult =
  | { async: false; value: 'not-equal' | 'timed-out' }
  | { async: true; value: Promise<'ok' | 'timed-out'> }

/**
 * Block the calling thread while `typedArray[index]` holds `value`, until a
 * sabsync `notify` or `timeout` ms (default: forever). Same arguments,
 * conversions, errors and results as `Atomics.wait`.
 *
 * @example
 * const ta = new Int32Array(new SharedArrayBuffer(4))
 * sabsync.wait(ta, 0, 0, 100) // 'timed-out' (after 100 ms)
 */
export function wait(typedArray: Int32Array, index: number, value: number, timeout?: number): 'ok' | 'not-equal' | 'timed-out'
export function wait(typedArray: BigInt64Array, index: number, value: bigint, timeout?: number): 'ok' | 'not-equal' | 'timed-out'
/** An array of either kind (a union): the value of the same kind. */
export function wait<T extends WaitableArray>(
  typedArray: T, index: number, value: CellValue<T>, timeout?: number
): 'ok' | 'not-equal' | 'timed-out'

/**
 * Wait without blocking: as `Atomics.waitAsync`, plus `options.signal` and
 * `options.ref`. Never holds a libuv threadpool thread.
 *
 * @example
 * const r = sabsync.waitAsync(ta, 0, 0, 1000)
 * if (r.async) console.log(await r.value) // 'ok' or 'timed-out'
 */
export function waitAsync(
  typedArray: Int32Array, index: number, value: number, timeout?: number, options?: WaitAsyncOptions
): WaitAsyncResult
export function waitAsync(
  typedArray: BigInt64Array, index: number, value: bigint, timeout?: number, options?: WaitAsyncOptions
): WaitAsyncResult
/** An array of either kind (a union): the value of the same kind. */
export function waitAsync<T extends WaitableArray>(
  typedArray: T, index: number, value: CellValue<T>, timeout?: number, options?: WaitAsyncOptions
): WaitAsyncResult

/**
 * Wake up to `count` (default all) sabsync waiters on `typedArray[index]`,
 * oldest first; answer how many. As `Atomics.notify`: a non-shared array
 * answers 0. It never wakes `Atomics.wait`, and `Atomics.notify` never
 * wakes a sabsync waiter.
 *
 * @example
 * Atomics.store(ta, 0, 1)
 * sabsync.notify(ta, 0, 1) // 1 if a waiter was queued
 */
export function notify(typedArray: Int32Array, index: number, count?: number): number
export function notify(typedArray: BigInt64Array, index: number, count?: number): number
export function notify(typedArray: WaitableArray, index: number, count?: number): number

/**
 * How many sabsync waiters (any thread, blocking or async) are queued on
 * `typedArray[index]`.
 *
 * @example
 * sabsync.waiters(ta, 0) // 0
 */
export function waiters(typedArray: WaitableArray, index: number): number

/** The codes of sabsync's own errors (the registry is lib/errors.js). */
export type SabsyncErrorCode =
  | 'ERR_SABSYNC_BAD_MEMORY'
  | 'ERR_SABSYNC_BAD_TOKEN'
  | 'ERR_SABSYNC_BARRIER_BROKEN'
  | 'ERR_SABSYNC_DEADLOCK'
  | 'ERR_SABSYNC_NOT_OWNER'
  | 'ERR_SABSYNC_TIMEOUT'
  | 'ERR_SABSYNC_WRONG_KIND'
  | 'ERR_SABSYNC_NOT_BUILT'
  | 'ERR_SABSYNC_NAPI'
  | 'ERR_SABSYNC_NOMEM'
  | 'ERR_SABSYNC_UV'
  | 'ERR_SABSYNC_REDIS'
  | 'ERR_SABSYNC_LEASE_LOST'
  | 'ERR_SABSYNC_LOCKS_FULL'
  | 'ERR_SABSYNC_SHARED_MISMATCH'
  | 'ERR_SABSYNC_SHARED_FULL'
  | 'ERR_SABSYNC_SHARED_VERSION'
  | 'ERR_SABSYNC_SHARED_FOREIGN'
  | 'ERR_SABSYNC_SHARED_CLOSED'
  | 'ERR_SABSYNC_SHARED_BUSY'
  | 'ERR_SABSYNC_SHARED_NAME'
  | 'ERR_SABSYNC_SHARED_KEY'
  | 'ERR_SABSYNC_SHARED_SYSTEM'
  | 'ERR_SABSYNC_UNSUPPORTED'

/** sabsync's own errors: `code` is one of {@link SabsyncErrorCode}. */
export class SabsyncError extends Error {
  code: SabsyncErrorCode
}

/** Marks the objects of a shared space ({@link InSpace}); not a run-time property. */
declare const spaceObject: unique symbol

/** What `postMessage` carries for a shared primitive: `X.from(handle)` attaches. */
export interface SharedHandle {
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /**
   * The object's size, carried by the primitives whose size is an argument
   * (Sema, RateLimit, RWLock, Barrier, RateLimiter): `from()` refuses memory
   * that says another size (`ERR_SABSYNC_BAD_MEMORY`). Left out, the size is
   * read from the memory.
   */
  readonly byteLength?: number
  /** Never set: an object of a shared space is no handle (its memory does not cross threads). */
  readonly [spaceObject]?: never
}

/** Where to put a primitive: a SharedArrayBuffer and an 8-aligned offset. */
export interface MemoryOptions {
  buffer?: SharedArrayBuffer
  byteOffset?: number
}

// ---- Sema and RateLimit ----

export interface SemaOptions<T> {
  /** Called once per slot, in each thread that constructs or attaches; its value is that thread's token for the slot. */
  initFn?: (slot: number) => T
  /** Called when an `acquire()` on this thread must wait (needs `resumeFn`). */
  pauseFn?: () => void
  /** Called when tokens are free again and no `acquire()` on this thread waits (needs `pauseFn`). */
  resumeFn?: () => void
}

export interface SemaCreateOptions<T> extends SemaOptions<T> {
  /** async-sema's preallocation hint; checked (a positive integer) and otherwise unused. */
  capacity?: number
  /** Memory to initialise the Sema in (default: a fresh SharedArrayBuffer). */
  buffer?: SharedArrayBuffer
  /** 8-byte aligned offset into `buffer`. */
  byteOffset?: number
}

/**
 * A token semaphore shared by every thread (async-sema's meanings). At most
 * `nr` tokens are out at once across all threads; a released token goes
 * straight to the longest waiter, whichever thread it is on. Tokens held by
 * a thread that ends go back to the pool, marked {@link Sema.recovered}.
 * While nobody waits, taking and giving a token is one compare-and-swap in
 * JS, with no native call (in-process memory; in a shared space every call
 * is native).
 *
 * @example
 * const { Sema } = require('sabsync')
 * const s = new Sema(4)
 * new Worker('./worker.js', { workerData: s }) // there: Sema.from(workerData)
 * async function fetchData (url) {
 *   await s.acquire()
 *   try { return await fetch(url) } finally { s.release() }
 * }
 */
export class Sema<T = number> implements SharedHandle {
  constructor (nr: number, options?: SemaCreateOptions<T>)
  /** Bytes that hold a Sema of up to 64 tokens. */
  static readonly byteLength: number
  /** Bytes a Sema of `nr` tokens needs. */
  static byteLengthFor (nr: number): number
  /** Attach to a Sema made in another thread. */
  static from<T = number> (handle: SharedHandle, options?: SemaOptions<T>): Sema<T>
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Its size in bytes: posted with `buffer` and `byteOffset`, held to by `from()`. */
  readonly byteLength: number
  /** The number of tokens. */
  readonly nr: number
  /** A token, at once if one is free, else when one is handed over (an abort rejects with `signal.reason`). */
  acquire (options?: UntimedOptions): Promise<T>
  /** With `options.timeout`: the token, or `undefined` when `timeout` ms passed first. */
  acquire (options: AsyncOptions): Promise<T | undefined>
  /** Blocks this thread until a token is free (for workers). */
  acquireSync (timeout?: undefined): T
  /** The same, or `undefined` after `timeout` ms. */
  acquireSync (timeout: number): T | undefined
  /** A token if one is free and nobody waits, else `undefined`. */
  tryAcquire (): T | undefined
  /** Give a token back (default: the one this thread got most recently). Throws `ERR_SABSYNC_BAD_TOKEN` for a token this thread does not hold. */
  release (token?: T): void
  /** Acquire every token; resolves to them all. */
  drain (options?: UntimedOptions): Promise<T[]>
  /** With `options.timeout`: the tokens, `undefined` for each not acquired in time. */
  drain (options: AsyncOptions): Promise<Array<T | undefined>>
  /** How many acquires wait, on every thread. */
  nrWaiting (): number
  /** Whether this thread's hold of `token` (default: the newest) came from a thread that died holding it. */
  recovered (token?: T): boolean
}

export interface RateLimitOptions {
  /** The window, ms (default 1000). */
  timeUnit?: number
  /** Space grants evenly, `timeUnit / rps` apart (default false). */
  uniformDistribution?: boolean
  buffer?: SharedArrayBuffer
  byteOffset?: number
}

/**
 * `await limit()`: resolves (with the grant's time, ms on process.hrtime's
 * clock) when a call may proceed; with a `timeout`, `undefined` when no
 * grant comes within it (0: a grant only if the limit has room now).
 */
export interface RateLimitFunction extends SharedHandle {
  /** Its size in bytes: carried by `handle`, held to by `from()`. */
  readonly byteLength: number
  (options?: { signal?: AbortSignal, timeout?: undefined }): Promise<number>
  (options: { signal?: AbortSignal, timeout: number }): Promise<number | undefined>
  /** A grant now if the limit has room and nobody waits for it, else `undefined` (synchronous: `limit({ timeout: 0 })`). */
  try (): number | undefined
  /**
   * `{ buffer, byteOffset }`: what to post to a worker (a function cannot be
   * posted), where `RateLimit.from(message)` attaches.
   */
  readonly handle: SharedHandle
  /** Blocks this thread until a call may proceed (for workers); answers the grant's time. */
  sync (timeout?: undefined): number
  /** The same, or `undefined` after `timeout` ms. */
  sync (timeout: number): number | undefined
  /** Callers queued for their turn, on every thread (callers are served in arrival order). */
  nrWaiting (): number
  readonly rps: number
  readonly timeUnit: number
  readonly uniformDistribution: boolean
}

/**
 * At most `rps` grants in any window of `timeUnit` ms across every thread
 * attached with {@link RateLimit.from}, served in arrival order. Grant
 * times live in shared memory; a thread that dies never leaks capacity.
 *
 * @example
 * const { RateLimit } = require('sabsync')
 * const limit = RateLimit(10, { timeUnit: 1000 })
 * worker.postMessage(limit.handle)
 * // in the worker: const limit = RateLimit.from(message)
 * for (const url of urls) { await limit(); fetch(url) }
 */
export declare function RateLimit (rps: number, options?: RateLimitOptions): RateLimitFunction
export declare namespace RateLimit {
  /** Bytes that hold a RateLimit of up to 64 per time unit. */
  const byteLength: number
  /** Bytes a RateLimit of `rps` needs. */
  function byteLengthFor (rps: number): number
  /** Attach to a RateLimit made in another thread. */
  function from (handle: SharedHandle): RateLimitFunction
}

// ---- RateLimiter: a limit per client key ----

/** The parameters of a {@link RateLimiter}. */
export interface RateLimiterParams {
  /** Points a key regains per `window` (1 … 1e9). */
  limit: number
  /** The window, whole ms (1 … 2^31-1). */
  window: number
  /**
   * How deep a key's bucket is: the most points at once (default `limit`; with
   * `exact`, default half the limit rounded up, at most `limit`).
   */
  burst?: number
  /**
   * At most `limit` points in any interval of `window` ms: the bucket is `burst` deep and
   * refills `limit - burst` points a window. Default false: `burst` deep, refilled `limit` a
   * window, so up to `burst + limit` in one window. Same 16 bytes a key either way.
   */
  exact?: boolean
  /**
   * Slots in the table: the most keys active at once (default 10,000; up to 2^24). The
   * table's size: every process must ask for the same; the other parameters are each
   * caller's, applied to the same per-key state (a rolling deploy may change them).
   */
  keys?: number
  /** What a new key gets when the slots it may use all hold active keys: `'allow'` (default) or `'deny'`. */
  whenFull?: 'allow' | 'deny'
}

export interface RateLimiterOptions extends RateLimiterParams {
  buffer?: SharedArrayBuffer
  byteOffset?: number
}

/** How a key stands (times in ms). */
export interface RateLimiterAnswer {
  /** Whether the points were taken (consume) or one point would be (peek). */
  allowed: boolean
  /** Points left in the bucket. */
  remaining: number
  /** 0 when allowed; else the ms after which the same consume, alone, is allowed. */
  retryAfter: number
  /** Ms until the bucket is full again. */
  resetAfter: number
  /** The limiter's `limit`. */
  limit: number
  /** Present (true) when the table had no room for a new key: the answer is `whenFull`'s. */
  full?: true
  /**
   * Present (true) when a new key's claim lock stayed held for 10 ms (a claimant killed
   * mid-claim, or a co-tenant writing the table): the answer is `whenFull`'s, and `consume`
   * never blocks its thread longer than that.
   */
  busy?: true
}

/**
 * An express-rate-limit `Store` over a RateLimiter: use
 * `rateLimit({ windowMs, limit: limiter.mostIn(windowMs), store })`, so that its
 * `RateLimit-Policy` header (`q` per `w`) says what is enforced; `init` throws a
 * `RangeError` for a `limit` below `limiter.mostIn(windowMs)`.
 */
export interface RateLimiterStore<R = { totalHits: number, resetTime: Date }, V = void> {
  readonly localKeys: false
  readonly prefix: undefined
  init (options: { limit?: unknown, windowMs?: unknown } | unknown): void
  get (key: string): R
  increment (key: string): R
  decrement (key: string): V
  resetKey (key: string): V
}

/**
 * A token bucket per client key (GCRA), `burst` deep, refilled at `limit`
 * per `window`, in one table shared by every thread attached with
 * {@link RateLimiter.from}: no key gets more than `burst + t × limit /
 * window` points in any t ms (with the default burst, up to 2 × limit in one
 * window; `{ exact: true }` for at most `limit` in any window). Synchronous;
 * no lock for a key in the table (a key's first call takes a short claim lock).
 *
 * @example
 * const perIp = new RateLimiter({ limit: 100, window: 60_000, keys: 100_000 })
 * const r = perIp.consume(req.socket.remoteAddress)
 * if (!r.allowed) res.writeHead(429, { 'Retry-After': Math.ceil(r.retryAfter / 1000) }).end()
 */
export class RateLimiter implements SharedHandle {
  constructor (options: RateLimiterOptions)
  /** Bytes of a RateLimiter of the default 10,000 keys. */
  static readonly byteLength: number
  /** Bytes a RateLimiter of `keys` slots needs. */
  static byteLengthFor (keys?: number): number
  /**
   * Attach to a RateLimiter made in another thread, with its maker's parameters or with
   * this caller's (`keys`, if given, must be the table's).
   */
  static from (handle: SharedHandle, options?: RateLimiterParams): RateLimiter
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Its size in bytes: posted with `buffer` and `byteOffset`, held to by `from()`. */
  readonly byteLength: number
  readonly limit: number
  readonly window: number
  readonly burst: number
  readonly exact: boolean
  readonly keys: number
  readonly whenFull: 'allow' | 'deny'
  /**
   * The most points one key can be allowed in any interval of `ms` ms: `burst + ms × rate`.
   * What a `RateLimit-Policy: q=…;w=…` header may honestly say: `mostIn(window)` is `limit`
   * with `exact`, `burst + limit` by default.
   */
  mostIn (ms: number): number
  /** Take `points` (default 1, at most `burst`) from `key`'s bucket if it holds them. */
  consume (key: string | number, points?: number): RateLimiterAnswer
  /** How `key` stands, consuming nothing. */
  peek (key: string | number): RateLimiterAnswer
  /** Give `points` (default 1) back to `key`. */
  refund (key: string | number, points?: number): void
  /** Forget `key`: its bucket is full again. */
  reset (key: string | number): void
  /** 0: `consume()` answers at once, so nobody ever waits on a RateLimiter. */
  nrWaiting (): number
  store (): RateLimiterStore
}


// ---- Mutex, AtomicFlag, Once, Latch ----

/**
 * A mutual-exclusion lock in shared memory, owned by a thread. Robust: when
 * the holder's thread ends without unlocking, the next acquirer gets the
 * lock with `ownerDied === true`. Eventually fair: a waiter that has waited
 * about 1 ms is handed the lock by the next unlock.
 *
 * @example
 * // main thread
 * const mutex = new Mutex()
 * worker.postMessage(mutex)
 * await mutex.runExclusive(() => { shared[0]++ })
 * // worker
 * const mutex = Mutex.from(message)
 * mutex.lock()
 * try { shared[0]++ } finally { mutex.unlock() }
 */
export class Mutex implements SharedHandle {
  /** Bytes a Mutex needs (16: its kind tag, the lock word and a waiter slot). */
  static readonly byteLength: number
  /** Attach to a Mutex made elsewhere (e.g. received with postMessage). */
  static from(handle: SharedHandle): Mutex
  /** A new, unlocked Mutex in `options.buffer` at `options.byteOffset`, or in fresh memory. */
  constructor(options?: MemoryOptions)
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /**
   * Block until this thread holds the lock; `false` when `timeout` ms passed.
   * Throws `ERR_SABSYNC_DEADLOCK` if this thread already holds it.
   */
  lock(timeout?: number): boolean
  /** Take the lock if it is free (or its holder died) right now. */
  tryLock(): boolean
  /**
   * Resolve `true` once this thread holds the lock, `false` on timeout.
   * Calls pending on one thread are served in turn (async-mutex semantics).
   */
  lockAsync(options?: AsyncOptions): Promise<boolean>
  /** Release; throws `ERR_SABSYNC_NOT_OWNER` if this thread does not hold it. */
  unlock(): void
  /**
   * Run `fn` holding the lock (taken with `lockAsync(options)`), unlocking
   * when its result settles. A timeout rejects with `ERR_SABSYNC_TIMEOUT`.
   */
  runExclusive<T>(fn: () => T | PromiseLike<T>, options?: AsyncOptions): Promise<Awaited<T>>
  /**
   * Lock and answer a guard that unlocks when disposed (`using g = m.guard()`);
   * `undefined` when the timeout passed.
   */
  guard(timeout?: number): MutexGuard | undefined
  guardAsync(options?: AsyncOptions): Promise<MutexGuard | undefined>
  /** Held by a live thread (this one included). */
  readonly isLocked: boolean
  /** The current holder took the lock over from a thread that died holding it; true until it unlocks. */
  readonly ownerDied: boolean
  /**
   * Who holds it: `{ pid, threadId }` of a live holder, or `null` (free, or
   * its holder died and nobody took it over yet). In a shared space, `pid`
   * and `threadId` are what the holder's slot claims (`null` when they do not
   * check out); `threadId` is `worker_threads.threadId` (0: a main thread).
   * For a person or a log: it may be stale once read.
   */
  readonly holder: { pid: number | null, threadId: number | null } | null
  /**
   * How many `lock()` / `lockAsync()` calls wait: those queued in every
   * thread (and process, in a space), plus this thread's `lockAsync()` calls
   * queued behind its first one.
   */
  nrWaiting(): number
}

/**
 * Returned by `Mutex#guard`: unlocks once when disposed.
 *
 * @example
 * {
 *   using g = mutex.guard()
 *   shared[0]++
 * } // unlocked here
 */
export interface MutexGuard {
  readonly mutex: Mutex | undefined
  /** `mutex.ownerDied` when the guard was taken. */
  readonly ownerDied: boolean
  [Symbol.dispose](): void
}

/**
 * C++20 `std::atomic_flag` across threads. `testAndSet` and `clear` wake
 * nobody; `notifyOne`/`notifyAll` do, and a waiter returns once the flag
 * differs from the value it waits on.
 *
 * @example
 * // producer
 * flag.testAndSet(); flag.notifyOne()
 * // consumer (a worker)
 * flag.wait(false) // returns once the flag is set and notified
 */
export class AtomicFlag implements SharedHandle {
  static readonly byteLength: number
  static from(handle: SharedHandle): AtomicFlag
  /** A new, clear flag. */
  constructor(options?: MemoryOptions)
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Set the flag; answer its previous value. */
  testAndSet(): boolean
  clear(): void
  test(): boolean
  /** Block while the flag equals `old`: `true` once it differs, `false` on timeout. */
  wait(old: boolean, timeout?: number): boolean
  waitAsync(old: boolean, options?: AsyncOptions): Promise<boolean>
  /** Wake one waiter; answer how many were woken. */
  notifyOne(): number
  /** Wake every waiter; answer how many were woken. */
  notifyAll(): number
  /** How many `wait()` / `waitAsync()` calls are queued on it, in every thread. */
  nrWaiting(): number
}

/**
 * Runs a function exactly once across every thread (C++ `call_once`): the
 * other callers wait until it finished. If it throws, or its thread dies, a
 * waiting caller runs it instead.
 *
 * @example
 * if (once.run(() => buildTable(shared))) console.log('this thread built it')
 */
export class Once implements SharedHandle {
  static readonly byteLength: number
  static from(handle: SharedHandle): Once
  constructor(options?: MemoryOptions)
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Whether fn has run to completion. */
  readonly done: boolean
  /**
   * `true` if this call ran `fn`, `false` if it had run, `undefined` if
   * `timeout` ms passed while another thread was running it. `fn`'s
   * exception propagates. A promise `fn` returns is not awaited.
   */
  run(fn: () => unknown, timeout?: number): boolean | undefined
  /** The same, done when `fn`'s promise resolves. */
  runAsync(fn: () => unknown, options?: AsyncOptions): Promise<boolean | undefined>
  /** How many `run()` / `runAsync()` calls wait for a running `fn`, in every thread. */
  nrWaiting(): number
}

/**
 * A single-use countdown (C++ `std::latch`): waiters are released when the
 * count reaches 0.
 *
 * @example
 * const ready = new Latch(workers.length)
 * // each worker: ready.countDown()
 * await ready.waitAsync()
 */
export class Latch implements SharedHandle {
  static readonly byteLength: number
  static from(handle: SharedHandle): Latch
  /** `count`: an integer from 0 to 2^31-1. */
  constructor(count: number, options?: MemoryOptions)
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  readonly count: number
  /** Decrement by `n` (default 1); below 0 is a RangeError. */
  countDown(n?: number): void
  /** Block until the count is 0: `true`, or `false` on timeout. */
  wait(timeout?: number): boolean
  waitAsync(options?: AsyncOptions): Promise<boolean>
  tryWait(): boolean
  /** `countDown(n)`, then `wait(timeout)`. */
  arriveAndWait(n?: number, timeout?: number): boolean
  /** How many `wait()` / `waitAsync()` calls are queued on it, in every thread. */
  nrWaiting(): number
}

/**
 * A condition variable used with a sabsync `Mutex`. Wake-ups can be
 * spurious: always wait in a loop on your predicate.
 *
 * @example
 * mutex.lock()
 * while (queue.length === 0) notEmpty.wait(mutex)
 * const item = queue.shift()
 * mutex.unlock()
 */
export class CondVar implements SharedHandle {
  static readonly byteLength: number
  static from(handle: SharedHandle): CondVar
  constructor(options?: MemoryOptions)
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /**
   * Unlock `mutex` (held by this thread, else `ERR_SABSYNC_NOT_OWNER`), wait
   * for a notify or `timeout` ms, lock it again. `true`: notified (or a
   * spurious wake-up); `false`: timed out. The mutex is held on return.
   */
  wait(mutex: Mutex, timeout?: number): boolean
  /** The same without blocking; the mutex is re-taken before the promise settles, also on abort. */
  waitAsync(mutex: Mutex, options?: AsyncOptions): Promise<boolean>
  /** Wake one waiter; answer how many were woken. */
  notifyOne(): number
  /** Wake every waiter; answer how many were woken. */
  notifyAll(): number
  /** How many `wait()` / `waitAsync()` calls are queued for a notify, in every thread. */
  nrWaiting(): number
}

/** Options of `new RWLock`. */
export interface RWLockOptions extends MemoryOptions {
  /** How many threads may hold read locks at the same time (default 64). */
  readerSlots?: number
}

/**
 * A readers-writer lock: many readers or one writer. Once a writer waits,
 * new readers wait too. A dead writer's lock passes on (`ownerDied`); the
 * read locks of a dead reader are released.
 *
 * @example
 * rw.readLock()
 * try { lookup(config) } finally { rw.readUnlock() }
 * // elsewhere
 * await rw.writeLockAsync()
 * try { update(config) } finally { rw.writeUnlock() }
 */
export class RWLock implements SharedHandle {
  /** Bytes for the default 64 reader slots. */
  static readonly byteLength: number
  /** Bytes for `readerSlots` reader slots. */
  static byteLengthFor(readerSlots: number): number
  static from(handle: SharedHandle): RWLock
  constructor(options?: RWLockOptions)
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Its size in bytes: posted with `buffer` and `byteOffset`, held to by `from()`. */
  readonly byteLength: number
  readonly readerSlots: number
  /** A dead writer's write lock was reclaimed and no writer has unlocked since. */
  readonly ownerDied: boolean
  /** A thread that holds a read lock gets more at once (counted). */
  readLock(timeout?: number): boolean
  tryReadLock(): boolean
  readLockAsync(options?: AsyncOptions): Promise<boolean>
  readUnlock(): void
  /** Throws `ERR_SABSYNC_DEADLOCK` if this thread holds a read or the write lock. */
  writeLock(timeout?: number): boolean
  tryWriteLock(): boolean
  writeLockAsync(options?: AsyncOptions): Promise<boolean>
  writeUnlock(): void
  /** How many read and write lock calls wait, in every thread (and process, in a space). */
  nrWaiting(): number
  /** The holder of the write lock (as `Mutex#holder`), or `null`. Readers are not named. */
  readonly writer: { pid: number | null, threadId: number | null } | null
}

/**
 * A cyclic barrier for `parties` threads. If a party's thread dies, or a
 * waiter times out or aborts, the round is broken: its waiters and every
 * later `wait()` throw `ERR_SABSYNC_BARRIER_BROKEN` until `reset()`.
 *
 * @example
 * for (let step = 0; step < steps; step++) {
 *   compute(step)
 *   if (barrier.wait().isLeader) publish(step)
 * }
 */
export class Barrier implements SharedHandle {
  /** Bytes for up to 64 parties. */
  static readonly byteLength: number
  static byteLengthFor(parties: number): number
  static from(handle: SharedHandle): Barrier
  /** `parties`: an integer from 1 to 2^20-1. */
  constructor(parties: number, options?: MemoryOptions)
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Its size in bytes: posted with `buffer` and `byteOffset`, held to by `from()`. */
  readonly byteLength: number
  readonly parties: number
  /** Parties waiting in the current round. */
  readonly arrived: number
  readonly isBroken: boolean
  /** `{ isLeader }` (exactly one leader per round), or `undefined` on timeout. */
  wait(timeout?: number): { isLeader: boolean } | undefined
  waitAsync(options?: AsyncOptions): Promise<{ isLeader: boolean } | undefined>
  /** Break the current round (its waiters throw) and start afresh. */
  reset(): void
  /** How many `wait()` / `waitAsync()` calls are queued for the round to complete, in every thread. */
  nrWaiting(): number
}

/** Options of `openShared`. */
export interface OpenSharedOptions {
  /** Bytes, when this call creates the space (default 1 MiB; 512 KiB to 1 GiB, rounded up to a page). Given when it exists, it must be its size. */
  size?: number
  /** Permission bits of the file when this call creates it (default `0o600`). */
  mode?: number
  /**
   * How each object's directory key is made. A space outlives every
   * process, and an object keeps the parameters it was made with:
   *
   * - left out (the default, `'state'`): a `sema`'s, `barrier`'s or
   *   `rateLimit`'s key carries its `nr` / `parties` / `rps` and
   *   `timeUnit`, so a deploy that changes them meets no
   *   error: processes of the old release keep the old object, the new ones
   *   share a new one, and the old one's room is reclaimed once its last
   *   user is gone. Other kinds keep one object per key (a mismatch is
   *   `ERR_SABSYNC_SHARED_MISMATCH`, saying what to do).
   * - `true`: every kind's key carries its kind and parameters.
   * - `false`: none does: a key is one object, whatever asks for it.
   *
   * Versioned keys take up to about 40 of a key's 80 bytes, and may not
   * contain U+0002.
   */
  versioned?: boolean
}

/** What a space holds ({@link Space.usage}). */
export interface SpaceUsage {
  /** Objects in use (found by their keys). */
  objects: number
  /** The most a space holds: 512. */
  maxObjects: number
  /** Objects freed or replaced by a new version, whose room comes back once no process uses them. */
  retired: number
  /** Bytes of the heap for objects in use (each object takes its size rounded up to 64). */
  bytesUsed: number
  /** Bytes of the heap for objects: the space's size less its bookkeeping. */
  bytes: number
}

/** Who holds or waits, as a snapshot names them: `dead` when the owner id no longer lives. */
export interface SpaceParty {
  pid: number | null
  threadId: number | null
  dead?: true
}

/**
 * A plain, JSON-serialisable snapshot of a space ({@link Space.inspect}).
 * Every value is what the memory said when it was read, unlocked: a person's
 * view, not an input to a decision. `unreadable` lists what could not be
 * believed (a scribbled space).
 */
export interface SpaceSnapshot {
  name: string
  /** The file under `/dev/shm`. */
  file: string
  size: number
  /** When it was taken (ISO 8601). */
  at: string
  /** Owner deaths in the space so far (threads and processes that ended registered). */
  deaths: number
  /** The processes attached, by the pid their slots claim, with their threads. */
  processes: Array<{ pid: number | null, threads: Array<{ ownerId: number, threadId: number | null }> }>
  usage: { objects: number, retired: number, heapUsed: number, heapBytes: number, waiterRecords: number }
  objects: Array<{
    key: string | null
    kind: string
    state: string
    parameters: Record<string, number | boolean>
    bytes: number
    /** Waits queued on the object's cells, in every process. */
    waiting: number
    /** The first of them. */
    waiters: SpaceParty[]
    /** Present when its directory key carries its parameters (a versioned key). */
    versioned?: true
    /** mutex: its holder, or null. */
    holder?: SpaceParty | null
    /** mutex, rwlock: the holding began by taking over from a dead holder. */
    ownerDied?: boolean
    /** rwlock: the writer and the readers. */
    writer?: SpaceParty | null
    readers?: SpaceParty[]
    /** sema: free tokens, and who holds the others. */
    available?: number
    holders?: Array<SpaceParty & { tokens: number }>
    /** latch */
    count?: number
    /** barrier */
    arrived?: number
    broken?: boolean
    /** once */
    done?: boolean
    running?: SpaceParty | null
    /** atomicFlag */
    set?: boolean
    /** rateLimiter: its table's slots, those whose key is tracked now, those being claimed. */
    table?: { keys: number, used: number, claiming: number, full: boolean }
  }>
  /**
   * Cycles of lock waits (mutexes, rwlocks) among the space's threads and
   * processes: each party with what it holds and the lock it waits for.
   */
  deadlocks: Array<{ parties: Array<{ pid: number | null, threadId: number | null, ownerId: number, holds: Array<string | null>, waitsFor: { key: string | null, kind: string } }> }>
  unreadable: string[]
}

/**
 * A primitive in a shared space ({@link openShared}): an instance of its
 * in-process class (a helper typed `(lock: Mutex) => …` takes it), but no
 * {@link SharedHandle}: its memory is this thread's view of the space, so
 * `X.from()` in another thread and `postMessage` do not carry it; that
 * thread opens the space and gets the object by its key. Its `buffer` is
 * typed as the class's; at run time it is an `ArrayBuffer` before Node
 * 24.16 / 26.1.
 */
export type InSpace<T> = T & { readonly [spaceObject]: true }

/** A RateLimit in a shared space: `await limit()` as {@link RateLimitFunction}, with no `handle`. */
export interface SpaceRateLimiter extends Omit<RateLimitFunction, 'handle' | typeof spaceObject> {
  (options?: { signal?: AbortSignal, timeout?: undefined }): Promise<number>
  (options: { signal?: AbortSignal, timeout: number }): Promise<number | undefined>
  readonly [spaceObject]: true
}

/**
 * A named space of shared memory between the processes of one host (Linux),
 * opened by this thread. Objects are found by key: the first caller of a key
 * in any process creates it, later callers attach; a `sema` or `barrier`
 * asked with another `nr` / `parties` is a new version of its key (by
 * default), and a key used with another kind or other parameters otherwise
 * throws `ERR_SABSYNC_SHARED_MISMATCH`, saying which and what to do. The objects
 * have the methods of their in-process classes; the holder of a lock is a
 * thread of some process, and when that process dies (SIGKILL included) the
 * next waiter takes over (`ownerDied`). Their `buffer` is an `ArrayBuffer`
 * before Node 24.16 / 26.1, and belongs to this thread: other threads open
 * the space themselves.
 *
 * @example
 * const space = openShared('myapp')
 * const lock = space.mutex('cache-rebuild')
 * await lock.runExclusive(rebuild)
 */
export interface Space {
  readonly name: string
  /** Bytes, bookkeeping included. */
  readonly size: number
  /** This thread's owner id in the space (the same number in every process). */
  readonly ownerId: number
  /** The Web Locks API for every thread of every process that opens this
   * space: names up to 128 UTF-16 code units, 256 requests held or waiting
   * at once; a process that dies releases what it held. */
  readonly locks: LockManager
  /** Whether this process created the space. */
  readonly created: boolean
  /** How this view makes directory keys: `true`, `false`, or `'state'` (the default: see {@link OpenSharedOptions.versioned}). */
  readonly versioned: boolean | 'state'
  readonly closed: boolean
  /** `length` Int32 cells; `wait` / `waitAsync` / `notify` / `waiters` on them reach every process. */
  int32Array(key: string, length: number): Int32Array
  bigInt64Array(key: string, length: number): BigInt64Array
  mutex(key: string): InSpace<Mutex>
  atomicFlag(key: string): InSpace<AtomicFlag>
  once(key: string): InSpace<Once>
  latch(key: string, count: number): InSpace<Latch>
  condVar(key: string): InSpace<CondVar>
  rwlock(key: string, options?: { readerSlots?: number }): InSpace<RWLock>
  barrier(key: string, parties: number): InSpace<Barrier>
  /** A Sema of `nr` tokens; `initFn`, `pauseFn`, `resumeFn` are this thread's. */
  sema<T = number>(key: string, nr: number, options?: SemaOptions<T>): InSpace<Sema<T>>
  /** A RateLimit of `rps` per `timeUnit` ms across every process. */
  rateLimit(key: string, rps: number, options?: Omit<RateLimitOptions, 'buffer' | 'byteOffset'>): SpaceRateLimiter
  /** A RateLimiter (a limit per client key) shared by every process; `RateLimiter.from` does not attach to it. */
  rateLimiter(key: string, options: RateLimiterParams): InSpace<RateLimiter>
  /**
   * Free the object of `key` (every version of it): this thread's objects of
   * `key` throw `ERR_SABSYNC_SHARED_CLOSED` from now on, and its room (a
   * directory entry and its bytes) is reclaimed now if no other thread or
   * process uses it, else once the last of them has closed the space or
   * ended (they keep using it meanwhile, and a lookup of `key` finds it).
   * `true` when nothing of `key` is left, `false` when others still use it.
   * Free only what this thread no longer holds or waits on; arrays of a
   * freed key are not closed: drop them.
   *
   * @example
   * const lock = space.mutex(`order:${id}`)
   * await lock.runExclusive(() => ship(id))
   * space.free(`order:${id}`)
   */
  free(key: string): boolean
  /** What the space holds: objects and bytes, against their limits. */
  usage(): SpaceUsage
  /**
   * A snapshot of every object (kind, key, parameters, holders, waiters),
   * the processes attached and the limiters' occupancy; JSON-serialisable.
   * It takes no lock: it never waits for a holder and never holds up a
   * caller. `npx sabsync inspect NAME` prints it.
   */
  inspect(): SpaceSnapshot
  /** This thread's view ends (when its last open of this name closes); the space lives on. */
  close(): void
  /** Remove the name (a later `openShared` makes a new space); `false` if it was gone. */
  unlink(): boolean
}

/**
 * Open the shared space `name` (1-200 bytes, no `/`), creating it if needed.
 * Throws `ERR_SABSYNC_UNSUPPORTED` where processes cannot share it,
 * `ERR_SABSYNC_SHARED_VERSION` for a space of another layout version.
 *
 * @example
 * const space = openShared('myapp', { size: 1 << 20, mode: 0o600 })
 */
export declare function openShared (name: string, options?: OpenSharedOptions): Space
export declare namespace openShared {
  /** Remove the space `name` without opening it; `false` if there was none. */
  function unlink (name: string): boolean
}

// ---- Web Locks in every tier: `locks` ----

/** A lock's mode: one holder (`'exclusive'`), or any number (`'shared'`). */
export type LockMode = 'exclusive' | 'shared'

/** `request()`'s options, as the Web Locks spec has them. */
export interface LockOptions {
  /** Default `'exclusive'`. */
  mode?: LockMode
  /** Granted now or not at all: the callback then receives `null`. */
  ifAvailable?: boolean
  /** Take the lock from every holder now (their requests reject with an
   * `AbortError`); exclusive only. */
  steal?: boolean
  /** Abort a request still waiting: it rejects with `signal.reason`. */
  signal?: AbortSignal
}

/** A granted lock, as the callback receives it. */
export declare class Lock {
  private constructor ()
  readonly name: string
  readonly mode: LockMode
}

/** One held or waiting request in `query()`'s answer. */
export interface LockInfo {
  name: string
  mode: LockMode
  /** The agent: `"pid:threadId"` (on Redis, prefixed with the host). */
  clientId: string
}

export interface LockManagerSnapshot {
  /** In the order they were granted. */
  held: LockInfo[]
  /** Name by name, each in queue order. */
  pending: LockInfo[]
}

/**
 * The Web Locks API: `request()` runs the callback while it holds the
 * named lock, and settles as the callback's result does, after the
 * release. Errors are rejected promises (`TypeError`, `DOMException`
 * `NotSupportedError` / `AbortError`), never throws.
 */
export declare class LockManager {
  private constructor ()
  request<T> (name: string, callback: (lock: Lock) => T): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions & { ifAvailable: true }, callback: (lock: Lock | null) => T): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions & { ifAvailable?: false }, callback: (lock: Lock) => T): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions, callback: (lock: Lock | null) => T): Promise<Awaited<T>>
  /** Every agent's held and waiting requests in this tier. */
  query (): Promise<LockManagerSnapshot>
}

/** Named locks for every thread of this process (Node 18+). */
export declare const locks: LockManager

/**
 * A cycle of lock waits among the threads of this process: each party with
 * the locks it holds and the one it waits for. A lock on plain memory has
 * no name: its key is the address of its memory in the process (`'0x…'`,
 * the same in every thread); a named lock's key is its name.
 */
export interface ThreadDeadlock {
  tier: 'thread'
  parties: Array<{ pid: number, threadId: number, holds: string[], waitsFor: { key: string, kind: 'mutex' | 'rwlock' | 'locks' } }>
}

/**
 * The cycles of lock waits among this process's threads now (`Mutex` and
 * `RWLock` waits of 50 ms or more on `SharedArrayBuffer` memory, and the
 * named locks of `locks`): what `sabsync:deadlock` tells a waiting thread,
 * for any thread to ask. Spaces answer in `space.inspect()`.
 */
export declare function deadlocks(): ThreadDeadlock[]
