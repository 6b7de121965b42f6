// Type definitions for sabsync.

/** The arrays sabsync can wait on: as `Atomics.wait`, over a SharedArrayBuffer. */
export type WaitableArray = Int32Array | BigInt64Array

/** The cell value type for each array kind. */
export type CellValue<T extends WaitableArray> = T extends BigInt64Array ? bigint : number

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
export function wait<T extends WaitableArray>(
  typedArray: T, index: number, value: CellValue<T> | unknown, timeout?: number
): 'ok' | 'not-equal' | 'timed-out'

/**
 * Wait without blocking: as `Atomics.waitAsync`, plus `options.signal` and
 * `options.ref`. Never holds a libuv threadpool thread.
 *
 * @example
 * const r = sabsync.waitAsync(ta, 0, 0, 1000)
 * if (r.async) console.log(await r.value) // 'ok' or 'timed-out'
 */
export function waitAsync<T extends WaitableArray>(
  typedArray: T, index: number, value: CellValue<T> | unknown, timeout?: number, options?: WaitAsyncOptions
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
export function notify(typedArray: WaitableArray, index: number, count?: number): number

/**
 * How many sabsync waiters (any thread, blocking or async) are queued on
 * `typedArray[index]`.
 *
 * @example
 * sabsync.waiters(ta, 0) // 0
 */
export function waiters(typedArray: WaitableArray, index: number): number

/** sabsync's own errors: `code` starts with `ERR_SABSYNC_`. */
export class SabsyncError extends Error {
  code: string
}

/** What `postMessage` carries for a shared primitive: `X.from(handle)` attaches. */
export interface SharedHandle {
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
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
  /** Bytes a Sema of `nr` tokens needs (its size depends on nr, so this is a function). */
  static byteLength (nr: number): number
  /** Attach to a Sema made in another thread. */
  static from<T = number> (handle: SharedHandle, options?: SemaOptions<T>): Sema<T>
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** The number of tokens. */
  readonly nr: number
  /** A token, at once if one is free, else when one is handed over; `undefined` after `timeout`. */
  acquire (options?: AsyncOptions): Promise<T>
  /** Blocks this thread until a token is free (for workers); `undefined` after `timeout` ms. */
  acquireSync (timeout?: number): T | undefined
  /** A token if one is free and nobody waits, else `undefined`. */
  tryAcquire (): T | undefined
  /** Give a token back (default: the one this thread got most recently). Throws `ERR_SABSYNC_BAD_TOKEN` for a token this thread does not hold. */
  release (token?: T): void
  /** Acquire every token; resolves to them all. */
  drain (options?: AsyncOptions): Promise<T[]>
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

/** `await limit()`: resolves (with the grant's time, ms on process.hrtime's clock) when a call may proceed. */
export interface RateLimiter extends SharedHandle {
  (options?: { signal?: AbortSignal }): Promise<number>
  /** Blocks this thread until a call may proceed (for workers); `undefined` after `timeout` ms. */
  sync (timeout?: number): number | undefined
  readonly rps: number
  readonly timeUnit: number
  readonly uniformDistribution: boolean
}

/**
 * At most `rps` grants in any window of `timeUnit` ms across every thread
 * attached with {@link RateLimit.from}. Grant times live in shared memory;
 * a thread that dies never leaks capacity.
 *
 * @example
 * const { RateLimit } = require('sabsync')
 * const limit = RateLimit(10, { timeUnit: 1000 })
 * worker.postMessage({ buffer: limit.buffer, byteOffset: limit.byteOffset })
 * // in the worker: const limit = RateLimit.from(message)
 * for (const url of urls) { await limit(); fetch(url) }
 */
export declare function RateLimit (rps: number, options?: RateLimitOptions): RateLimiter
export declare namespace RateLimit {
  /** Bytes a RateLimit of `rps` needs. */
  function byteLength (rps: number): number
  /** Attach to a RateLimit made in another thread. */
  function from (handle: SharedHandle): RateLimiter
}

