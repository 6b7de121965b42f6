// Type definitions for sabsync/redis: Mutex, Sema, RateLimit, RateLimiter and LockManager across
// machines, on a Redis server. The client is the caller's (ioredis); only
// the few methods sabsync calls are named here, so that these types need
// no ioredis types.

import type { Lock, LockOptions, LockManagerSnapshot } from './index'

/** What sabsync needs of the caller's client: an ioredis `Redis` or `Cluster`. */
export interface RedisClient {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number; readOnly?: boolean }): void
  duplicate(...args: any[]): unknown
  readonly status: string
}

/** Options of a waiting call. */
export interface RedisWaitOptions {
  /**
   * Milliseconds to wait for a turn (default: no limit). A timeout is an
   * answer (`false` / `undefined`), not an error; 0 only takes what is free now.
   */
  timeout?: number
  /** Aborting leaves the queue; the promise rejects with `signal.reason`. */
  signal?: AbortSignal
}

/**
 * Who holds a `Mutex` (`Mutex.holder()`): `host`, `pid` and `threadId` as
 * the holder said them in its lease renewals (`null` before its first),
 * its fence, and the milliseconds its lease has left on the server's clock.
 */
export interface RedisHolder {
  host: string | null
  pid: number | null
  threadId: number | null
  fence: number
  leaseLeftMs: number
}

/** A waiting call without a timeout: it resolves only with a grant (an abort rejects). */
export type RedisWaitForever = RedisWaitOptions & { timeout?: undefined }

/** Options of `Mutex` and `Sema`. */
export interface LeaseOptions {
  /** Milliseconds a grant lasts unless renewed; renewed every lease/3 while the process lives (default 10000). */
  lease?: number
  /** A waiting client silent this long (ms) is skipped when its turn comes; it beats every heartbeat/3 (default 3000). */
  heartbeat?: number
  /** Milliseconds to wait for a reply when the call has no timeout of its own (default 5000). */
  commandTimeout?: number
  /**
   * The first part of every key (default 'sabsync'): a non-empty string
   * without `{` or `}` (a RangeError otherwise); keys are `{prefix:kind:key}:…`.
   */
  prefix?: string
  /**
   * Skip the checks that the server does not evict keys in use (default
   * false). Without it, an object's scripts read `maxmemory_policy` (`INFO
   * memory`) on its first call and again once a renewal period (lease/3)
   * has passed, and the call rejects with `ERR_SABSYNC_REDIS` naming an
   * `allkeys-*` policy, or one that cannot be read; a holder whose renewal
   * finds it loses its lease (`lost`). true accepts that an eviction can
   * grant a lock or token twice: only for a server that never fills up.
   */
  unsafeAllowEviction?: boolean
}

/** Options of `RateLimit`. */
export interface RedisRateLimitOptions {
  /** The window, in ms (default 1000). */
  timeUnit?: number
  /** Also space grants at least timeUnit/rps apart (default false). */
  uniformDistribution?: boolean
  /** Milliseconds to wait for a reply when the call has no timeout of its own (default 5000). */
  commandTimeout?: number
  /** The first part of every key (default 'sabsync'): a non-empty string without `{` or `}`. */
  prefix?: string
  /** As for `Mutex` and `Sema` ({@link LeaseOptions.unsafeAllowEviction}; the policy is read again a second later); an evicted log can over-grant. */
  unsafeAllowEviction?: boolean
}

/**
 * A lock across machines with a lease and fencing tokens.
 *
 * @example
 * const lock = new Mutex(redis, 'orders:42', { lease: 10_000 })
 * const fence = await lock.lockAsync({ timeout: 5000 })
 * if (fence !== false) {
 *   try { await db.update(row, { fence }) } finally { await lock.unlock() }
 * }
 */
export class Mutex {
  constructor(redis: RedisClient, key: string, options?: LeaseOptions)
  readonly key: string
  /**
   * Resolve with a fence (a positive integer, larger than every fence of
   * this key before it) once this client holds the lock, `false` on timeout.
   * Waiters on every client are served in arrival order. One round trip
   * (one script); a call that has to wait is woken by a message that
   * carries its grant and fence, with nothing more to send.
   */
  lockAsync(options?: RedisWaitForever): Promise<number>
  lockAsync(options: RedisWaitOptions): Promise<number | false>
  /** The lock's fence if it is free right now (and nobody waits), else `false`. One round trip. */
  tryLock(): Promise<number | false>
  /**
   * Release: `true`, or `false` if the lease had been lost (`lost` has
   * aborted then); a lost lease never rejects. Rejects with
   * `ERR_SABSYNC_NOT_OWNER` when this Mutex holds nothing, with
   * `ERR_SABSYNC_REDIS` when the server cannot be reached within `commandTimeout`.
   * One round trip, which also grants the lock to the next waiter and wakes it.
   */
  unlock(): Promise<boolean>
  /**
   * Run `fn` holding the lock, unlocking when its result settles; `signal`
   * aborts if the lease is lost meanwhile. Resolves with `fn`'s result only
   * if the lease held until the unlock, else rejects with
   * `ERR_SABSYNC_LEASE_LOST` once `fn` settles (`fn`'s own error wins). A
   * timeout rejects with `ERR_SABSYNC_TIMEOUT`.
   */
  runExclusive<T>(fn: (held: { fence: number; signal: AbortSignal }) => T | PromiseLike<T>, options?: RedisWaitOptions): Promise<Awaited<T>>
  /**
   * Who holds the lock now, as the server says (one round trip), or `null`.
   * `host`, `pid` and `threadId` are `null` for a holder in another process
   * until its first renewal (a third of a lease after its grant), and are
   * what that holder said of itself.
   */
  holder(): Promise<RedisHolder | null>
  /** How many wait for this lock, on every client. */
  nrWaiting(): Promise<number>
  /** Aborts with `ERR_SABSYNC_LEASE_LOST` if the lease of the latest grant is lost. */
  readonly lost: AbortSignal
  /** The fence of the grant held now, or `undefined`. */
  readonly fence: number | undefined
  /**
   * Whether this Mutex holds the lock with a lease not known to be lost:
   * false once the lease's local deadline has passed, whenever it is read
   * (also before the renewal timer has run, after a blocked event loop).
   */
  readonly isHeld: boolean
}

/**
 * `nr` tokens across machines, one lease per token, waiters in arrival order.
 *
 * @example
 * const pool = new Sema(redis, 'ffmpeg', 4)
 * const token = await pool.acquire()
 * try { await transcode() } finally { await pool.release(token) }
 */
export class Sema {
  constructor(redis: RedisClient, key: string, nr: number, options?: LeaseOptions)
  readonly key: string
  readonly nr: number
  /**
   * A token (0 … nr-1; during a deploy that changes `nr`, below the
   * largest `nr` in use) once one is free for this caller; `undefined` on
   * timeout. One round trip; a call that waits is woken with its token.
   */
  acquire(options?: RedisWaitForever): Promise<number>
  acquire(options: RedisWaitOptions): Promise<number | undefined>
  /** A token if one is free right now (and nobody waits), else `undefined`. */
  tryAcquire(): Promise<number | undefined>
  /**
   * Give back `token`, or the token this Sema acquired most recently;
   * resolves once the server has it back, also when its lease had been
   * lost (then `lost(token)`, read before, has aborted with
   * `ERR_SABSYNC_LEASE_LOST`). A token not held here rejects with
   * `ERR_SABSYNC_BAD_TOKEN`; a server out of reach with `ERR_SABSYNC_REDIS`.
   * One round trip, which also hands the token to the next waiter.
   */
  release(token?: number): Promise<void>
  /** How many wait for a token, on every client. */
  nrWaiting(): Promise<number>
  /** Aborts with `ERR_SABSYNC_LEASE_LOST` if the lease of `token` (held here) is lost. */
  lost(token: number): AbortSignal
}

/** The function `RateLimit` returns. */
export interface RedisRateLimiter {
  /**
   * Resolve when a call may proceed, with its grant time (the server's
   * clock, ms since the epoch); `undefined` if that would be later than
   * `timeout` ms from now. `timeout: 0` grants exactly when the limit has
   * room when the server is asked, however long the round trip takes.
   */
  (options?: RedisWaitForever): Promise<number>
  (options: RedisWaitOptions): Promise<number | undefined>
  /** `limit({ timeout: 0 })`: a grant only if the limit has room now, else `undefined`. */
  try(): Promise<number | undefined>
  /** Callers whose grant time is still to come, on every client. */
  nrWaiting(): Promise<number>
  readonly key: string
  readonly rps: number
  readonly timeUnit: number
  readonly uniformDistribution: boolean
}

/**
 * At most `rps` grants in any window of `timeUnit` ms, across every client,
 * on the server's clock, in arrival order.
 *
 * @example
 * const limit = RateLimit(redis, 'github', 100, { timeUnit: 1000 })
 * await limit()
 */
export function RateLimit(redis: RedisClient, key: string, rps: number, options?: RedisRateLimitOptions): RedisRateLimiter

/** Options of the keyed {@link RateLimiter}. */
export interface RedisRateLimiterOptions {
  /** Points a key regains per `window` (1 … 1e9, at most one a µs). */
  limit: number
  /** The window, whole ms. */
  window: number
  /** How deep a key's bucket is (default `limit`; with `exact`, half the limit rounded up, at most `limit`). */
  burst?: number
  /** At most `limit` points in any interval of `window` ms (the bucket refills `limit - burst` a window). */
  exact?: boolean
  /** Milliseconds to wait for a reply (default 5000). */
  commandTimeout?: number
  /** As for `Mutex` and `Sema`: run on a server whose policy may evict any key (`allkeys-*`), where an evicted bucket starts full again. */
  unsafeAllowEviction?: boolean
}

/** How a key stands (times in ms, on the server's clock). */
export interface RedisRateLimiterAnswer {
  allowed: boolean
  remaining: number
  retryAfter: number
  resetAfter: number
  limit: number
}

/**
 * A token bucket per client key (GCRA) on Redis, one round trip per call:
 * a sorted set under the hash tag `{prefix}` (a non-empty string without
 * `{` or `}`), with no TTL (so a volatile-* policy cannot evict a bucket);
 * the client that wrote sweeps the entries whose bucket is full again on a
 * timer, and calls take off a few too. `limit`, `window`, `burst` and
 * `exact` are each client's: clients of a rolling deploy with other ones
 * share the buckets, each applying its own.
 *
 * @example
 * const perIp = new RateLimiter(redis, 'per-ip', { limit: 100, window: 60_000 })
 * const r = await perIp.consume(ip)
 */
export class RateLimiter {
  constructor (redis: RedisClient, prefix: string, options: RedisRateLimiterOptions)
  readonly limit: number
  readonly window: number
  readonly burst: number
  readonly exact: boolean
  readonly prefix: string
  /** The most points one key can be allowed in any interval of `ms` ms (what `RateLimit-Policy` may say). */
  mostIn (ms: number): number
  consume (key: string | number, points?: number): Promise<RedisRateLimiterAnswer>
  peek (key: string | number): Promise<RedisRateLimiterAnswer>
  refund (key: string | number, points?: number): Promise<void>
  reset (key: string | number): Promise<void>
  /** An express-rate-limit `Store` over this limiter: `rateLimit({ windowMs, limit: limiter.mostIn(windowMs), store })`. */
  /** 0: `consume()` answers at once, so nobody ever waits on a RateLimiter. */
  nrWaiting (): Promise<number>
  store (): {
    readonly localKeys: false
    readonly prefix: undefined
    init (options: { limit?: unknown, windowMs?: unknown } | unknown): void
    get (key: string): Promise<{ totalHits: number, resetTime: Date }>
    increment (key: string): Promise<{ totalHits: number, resetTime: Date }>
    decrement (key: string): Promise<void>
    resetKey (key: string): Promise<void>
  }
}

/** Options of `new LockManager`. */
export interface RedisLockManagerOptions {
  /**
   * Milliseconds a manager's locks last unless renewed; one call every
   * lease/3 renews them all while the process lives, and a manager whose
   * lease runs out loses its locks to the next requests (default 10000).
   */
  lease?: number
  /** Milliseconds to wait for a reply (default 5000). */
  commandTimeout?: number
  /** As for `Mutex` and `Sema` ({@link LeaseOptions.unsafeAllowEviction}). */
  unsafeAllowEviction?: boolean
}

/** The lock a `request` callback holds on Redis: its name, mode and fence. */
export interface RedisLock extends Lock {
  /** Grows with every grant of every name under the manager's prefix. */
  readonly fence: number
}

/**
 * The Web Locks API across machines: every client of the server that
 * uses `prefix` (a non-empty string without `{` or `}`) shares its names.
 * Errors are the spec's (rejected promises; `DOMException`, `TypeError`);
 * a name longer than 1024 UTF-16 code units is a `RangeError`. A lock
 * stolen, or lost with its lease, rejects its request with an
 * `AbortError`. One prefix lives in one slot of a Redis Cluster.
 *
 * @example
 * const locks = new LockManager(redis, 'myapp', { lease: 10_000 })
 * await locks.request(`order:${id}`, async lock => {
 *   await db.update(order, { fence: lock.fence })
 * })
 * const { held, pending } = await locks.query()
 */
export class LockManager {
  constructor (redis: RedisClient, prefix: string, options?: RedisLockManagerOptions)
  request<T> (name: string, callback: (lock: RedisLock) => T): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions & { ifAvailable: true }, callback: (lock: RedisLock | null) => T): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions & { ifAvailable?: false }, callback: (lock: RedisLock) => T): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions, callback: (lock: RedisLock | null) => T): Promise<Awaited<T>>
  /** Every lock held (in grant order) and waited for (in queue order, name by name), on every machine; `clientId` is `host:pid:threadId`. */
  query (): Promise<LockManagerSnapshot>
  /** Let go of everything this manager holds (their requests reject with `AbortError`) or waits for. */
  close (): Promise<void>
}

/**
 * sabsync's errors (the same class as `require('sabsync').SabsyncError`):
 * here `ERR_SABSYNC_REDIS` (with the client's error as `cause`),
 * `ERR_SABSYNC_LEASE_LOST`, `ERR_SABSYNC_SHARED_MISMATCH`,
 * `ERR_SABSYNC_NOT_OWNER`, `ERR_SABSYNC_BAD_TOKEN`, `ERR_SABSYNC_TIMEOUT`.
 */
/**
 * Give back at once every lock and token held through `redis` (on
 * SIGTERM / SIGINT), instead of leaving them to run out their leases: the
 * next waiter on any machine gets them now. Each holder's `lost` signal
 * aborts with `ERR_SABSYNC_LEASE_LOST`; its `unlock()` then answers
 * `false` (and `release()` resolves), as for a lost lease. Resolves with
 * how many leases were given back; rejects with `ERR_SABSYNC_REDIS` if the
 * server cannot be reached (the leases then run out there). The client
 * stays usable: `quit()` it after.
 *
 * @example
 * process.once('SIGTERM', async () => {
 *   server.close()
 *   await letGo(redis)
 *   await redis.quit()
 * })
 */
export function letGo(redis: RedisClient): Promise<number>

export { SabsyncError } from './index'
export type { SabsyncErrorCode } from './index'
