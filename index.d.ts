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
  buffer: SharedArrayBuffer
  byteOffset: number
}

/** Where to put a primitive: a SharedArrayBuffer and an 8-aligned offset. */
export interface MemoryOptions {
  buffer?: SharedArrayBuffer
  byteOffset?: number
}
