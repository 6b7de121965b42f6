// Compiled with `tsc --strict` by test/types.test.js (with @types/node):
// sabsync/redis used with ioredis's own types, as the README shows it.
import Redis, { Cluster } from 'ioredis'
import { Mutex, Sema, RateLimit, RateLimiter, LockManager, SabsyncError, letGo } from 'sabsync/redis'
import type { RedisClient, LeaseOptions, RedisRateLimiter, RedisWaitOptions, SabsyncErrorCode, RedisLock } from 'sabsync/redis'
import type { LockInfo } from 'sabsync'

async function main (): Promise<void> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  const cluster: RedisClient = new Cluster([{ host: '127.0.0.1', port: 7000 }])
  const options: LeaseOptions = { lease: 10_000, heartbeat: 3000, commandTimeout: 5000, prefix: 'app' }

  const lock = new Mutex(redis, 'orders:42', options)
  const fence: number | false = await lock.lockAsync({ timeout: 5000, signal: AbortSignal.timeout(6000) })
  if (fence !== false) {
    const lost: AbortSignal = lock.lost
    const now: number | undefined = lock.fence
    const ok: boolean = (await lock.unlock()) && lock.isHeld && lost.aborted && now === fence
  }
  const tried: number | false = await lock.tryLock()
  const n: number = await lock.runExclusive(async ({ fence, signal }) => fence + (signal.aborted ? 1 : 0))
  const waiting: number = await lock.nrWaiting()

  const pool = new Sema(cluster, 'ffmpeg', 4, { lease: 60_000 })
  const token: number | undefined = await pool.acquire({ timeout: 100 })
  const other: number | undefined = await pool.tryAcquire()
  if (token !== undefined) {
    const signal: AbortSignal = pool.lost(token)
    const released: void = await pool.release(token)
    // @ts-expect-error: release() resolves nothing (API.md: Promise<void>)
    const flag: boolean = await pool.release(token)
  }
  await pool.release()
  const nr: number = pool.nr + (await pool.nrWaiting())

  const limit: RedisRateLimiter = RateLimit(redis, 'github', 100, { timeUnit: 1000, uniformDistribution: true })
  const at: number | undefined = await limit({ timeout: 50 })
  const sleeping: number = await limit.nrWaiting()
  const perIp = new RateLimiter(redis, 'per-ip', { limit: 100, window: 60_000, burst: 10 })
  const r = await perIp.consume('10.0.0.1', 2)
  const wait: number = r.retryAfter + (await perIp.peek(1)).remaining + (await perIp.store().increment('k')).totalHits
  await perIp.refund('10.0.0.1')
  await perIp.reset('10.0.0.1')
  const exact = new RateLimiter(redis, 'per-ip-exact', { limit: 100, window: 60_000, exact: true })
  const q: number = exact.mostIn(60_000) + (exact.exact ? 1 : 0)
  exact.store().init({ limit: q, windowMs: 60_000 })
  void wait

  const now: number | undefined = await limit.try()
  const risky = new Mutex(redis, 'k', { unsafeAllowEviction: true })
  void [now, risky]
  const rps: number = limit.rps + limit.timeUnit

  try {
    await lock.unlock()
  } catch (err) {
    if (err instanceof SabsyncError) {
      const code: SabsyncErrorCode = err.code
      const redisDown: boolean = code === 'ERR_SABSYNC_REDIS' || code === 'ERR_SABSYNC_LEASE_LOST'
    }
  }
  // Without a timeout a wait resolves only with a grant (an abort rejects):
  // no false / undefined to check for.
  const sure: number = await lock.lockAsync()
  const sureToo: number = await lock.lockAsync({ signal: AbortSignal.timeout(100) })
  const slot: number = await pool.acquire()
  const grant: number = await limit()
  const wo: RedisWaitOptions = Math.random() < 0.5 ? {} : { timeout: 5 }
  const either: number | false = await lock.lockAsync(wo) // a timeout may be in there
  void [sure, sureToo, slot, grant, either]
  // @ts-expect-error: with a timeout, lockAsync may resolve false
  const f1: number = await lock.lockAsync({ timeout: 5 })
  // @ts-expect-error: with a timeout, acquire may resolve undefined
  const f2: number = await pool.acquire({ timeout: 5 })
  // @ts-expect-error: with a timeout, limit may resolve undefined
  const f3: number = await limit({ timeout: 5 })
  // @ts-expect-error: options that may hold a timeout may resolve undefined too
  const f4: number = await pool.acquire(wo)
  void [f1, f2, f3, f4]
  const locks = new LockManager(redis, 'app', { lease: 10_000 })
  const fenced: number = await locks.request('orders:42', async (l: RedisLock) => l.fence)
  const shared: string = await locks.request('cache', { mode: 'shared', signal: AbortSignal.timeout(100) }, l => l.mode)
  const maybe: boolean = await locks.request('cache', { ifAvailable: true }, l => l !== null)
  const who: LockInfo[] = (await locks.query()).held
  await locks.close()
  void [fenced, shared, maybe, who]
  // @ts-expect-error: a mode is 'exclusive' or 'shared'
  locks.request('x', { mode: 'read' }, () => {})
  // @ts-expect-error: a key is a string
  new Mutex(redis, 42)
  // @ts-expect-error: not a Redis client
  new Sema({}, 'k', 1)
}

void main

// Shutdown: give back what this client holds, then quit.
export async function onSigterm (redis: Redis): Promise<void> {
  const released: number = await letGo(redis)
  void released
  await redis.quit()
}
