// Type definitions for sabsync's lock primitives (Mutex, AtomicFlag, Once,
// Latch, CondVar, RWLock, Barrier). SharedHandle, MemoryOptions and
// AsyncOptions are the same shapes as in the core's declarations.

/** What `postMessage` carries for a shared primitive: `X.from(handle)` attaches. */
export interface SharedHandle {
  buffer: SharedArrayBuffer
  byteOffset: number
}

/** Where to put a primitive: a SharedArrayBuffer and an 8-aligned offset. */
export interface MemoryOptions {
  buffer?: SharedArrayBuffer
  byteOffset?: number
}

/** Options of promise calls. */
export interface AsyncOptions {
  /** Milliseconds; a timeout is an answer (false / undefined), not an error. */
  timeout?: number
  /** Aborting rejects the promise with `signal.reason`. */
  signal?: AbortSignal
  /** Keep the event loop alive while pending (default true). */
  ref?: boolean
}

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
  /** Bytes a Mutex needs (8). */
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
  readonly parties: number
  /** Parties waiting in the current round. */
  readonly arrived: number
  readonly isBroken: boolean
  /** `{ isLeader }` (exactly one leader per round), or `undefined` on timeout. */
  wait(timeout?: number): { isLeader: boolean } | undefined
  waitAsync(options?: AsyncOptions): Promise<{ isLeader: boolean } | undefined>
  /** Break the current round (its waiters throw) and start afresh. */
  reset(): void
}
