// Compiled with `tsc --noEmit --strict` by test/package.test.js against the
// installed package, and by test/types.test.js: every export used as the
// README shows it.
import sabsync, { wait, waitAsync, notify, waiters, SabsyncError, openShared } from 'sabsync'
import type { WaitAsyncResult, SharedHandle, MemoryOptions, AsyncOptions, Space, SpaceRateLimiter, SpaceUsage, InSpace } from 'sabsync'

const ta = new Int32Array(new SharedArrayBuffer(8))
const big = new BigInt64Array(new SharedArrayBuffer(16))

const r1: 'ok' | 'not-equal' | 'timed-out' = wait(ta, 0, 0, 10)
const r2: WaitAsyncResult = waitAsync(big, 1, 0n, 10, { signal: AbortSignal.timeout(100), ref: false })
async function f (): Promise<void> {
  if (r2.async) {
    const v: 'ok' | 'timed-out' = await r2.value
    void v
  }
}
const n: number = notify(ta, 0, 1) + waiters(ta, 0) + sabsync.notify(big, 0)
const e: SabsyncError = new SabsyncError()
const code: string = e.code
const h: SharedHandle = { buffer: new SharedArrayBuffer(8), byteOffset: 0 }
const m: MemoryOptions = h
const o: AsyncOptions = { timeout: 5 }
void [r1, f, n, code, m, o]

// ---- primitives ----
import { Mutex, AtomicFlag, Once, Latch, Sema, RWLock, RateLimit, RateLimiter } from 'sabsync'
import type { MutexGuard, RateLimitFunction, RateLimiterAnswer } from 'sabsync'

async function primitives (): Promise<void> {
  const mutex = new Mutex()
  const again: Mutex = Mutex.from({ buffer: mutex.buffer, byteOffset: mutex.byteOffset })
  const locked: boolean = mutex.lock(10) && mutex.tryLock() === false
  mutex.unlock()
  const viaAsync: boolean = await again.lockAsync({ timeout: 5, signal: AbortSignal.timeout(50), ref: true })
  if (viaAsync) again.unlock()
  const sum: number = await mutex.runExclusive(() => 1 + 1)
  const g: MutexGuard | undefined = mutex.guard()
  g?.[Symbol.dispose]()
  const died: boolean = mutex.ownerDied || mutex.isLocked
  const bytes: number = Mutex.byteLength

  const flag = new AtomicFlag({ buffer: new SharedArrayBuffer(8), byteOffset: 0 })
  const was: boolean = flag.testAndSet()
  flag.clear()
  const waited: boolean = flag.wait(true, 1) || await flag.waitAsync(true, { timeout: 1 })
  const woke: number = flag.notifyOne() + flag.notifyAll() + (flag.test() ? 1 : 0)

  const once = new Once()
  const ran: boolean | undefined = once.run(() => 42) ?? await once.runAsync(async () => 42)

  const latch = new Latch(2)
  latch.countDown()
  const opened: boolean = latch.tryWait() || latch.wait(1) || await latch.waitAsync({ timeout: 1 })

  const sema = new Sema(2, { initFn: (slot: number) => `conn${slot}` })
  const token: string = await sema.acquire()
  sema.release(token)
  const t2: string | undefined = sema.tryAcquire() ?? sema.acquireSync(1)
  if (t2 !== undefined) sema.release(t2)
  const t3: string | undefined = await sema.acquire({ timeout: 5 }) // undefined when 5 ms pass first
  if (t3 !== undefined) sema.release(t3)
  const all: string[] = await sema.drain()
  const waiting: number = sema.nrWaiting() + Sema.byteLengthFor(2) + Sema.byteLength + RateLimit.byteLength + RateLimit.byteLengthFor(3)
  const other: Sema = Sema.from({ buffer: sema.buffer, byteOffset: sema.byteOffset })

  const limit: RateLimitFunction = RateLimit(10, { timeUnit: 1000, uniformDistribution: true })
  const at: number = await limit()
  const at2: number | undefined = RateLimit.from({ buffer: limit.buffer, byteOffset: limit.byteOffset }).sync(5)
  const attached: RateLimitFunction = RateLimit.from(limit.handle) // what a worker gets by postMessage(limit.handle)
  const queued: number = limit.nrWaiting()
  const now: number | undefined = limit.try()
  const within: number | undefined = await limit({ timeout: 0 })
  void [locked, sum, died, bytes, was, waited, woke, ran, opened, all, waiting, other, at, at2, attached, queued, now, within, once.done, latch.count]
}
void primitives

async function space (): Promise<void> {
  const s: Space = openShared('types-sample', { size: 1 << 20, mode: 0o600 })
  const cells: Int32Array = s.int32Array('cells', 4)
  const big2: BigInt64Array = s.bigInt64Array('big', 2)
  const lock: InSpace<Mutex> = s.mutex('lock')
  await lock.runExclusive(() => { cells[0]++ })
  const woke: number = notify(cells, 0) + waiters(big2, 0)
  const r = s.rwlock('r', { readerSlots: 8 })
  const pool = s.sema('pool', 2, { initFn: (slot: number) => `c${slot}` })
  const conn: string = await pool.acquire()
  pool.release(conn)
  const api: SpaceRateLimiter = s.rateLimit('api', 10, { timeUnit: 1000 })
  await api()
  const view: ArrayBuffer | SharedArrayBuffer = lock.buffer // an ArrayBuffer before Node 24.16 / 26.1
  const at: number | undefined = api.sync(5)
  void [view, at]
  const perIp = s.rateLimiter('per-ip', { limit: 100, window: 60_000, keys: 1000, whenFull: 'deny' })
  const answer: RateLimiterAnswer = perIp.consume('10.0.0.1', 2)
  const wait: number = answer.retryAfter + perIp.peek(7).resetAfter
  perIp.refund('10.0.0.1')
  perIp.reset('10.0.0.1')
  const local = new RateLimiter({ limit: 5, window: 1000 })
  const again: RateLimiter = RateLimiter.from(local)
  const next: RateLimiter = RateLimiter.from(local, { limit: 7, window: 1000, exact: true })
  const most: number = next.mostIn(1000) + (next.exact ? 1 : 0)
  void most
  const hits: number = again.store().increment('k').totalHits + RateLimiter.byteLengthFor(10) + RateLimiter.byteLength
  void [wait, hits]

  const room: number | undefined = api.try() ?? await api({ timeout: 0 })
  void [view, at, room]
  void [woke, r, s.atomicFlag('f'), s.once('o'), s.latch('l', 1), s.condVar('c'), s.barrier('b', 2), s.ownerId, s.created]

  // A helper typed with a class takes that class's object from a space,
  // and from() still takes an in-process object.
  const withLock = (m: Mutex): boolean => m.tryLock()
  const drain = async (p: Sema<string>): Promise<string> => p.acquire()
  const readers = (rw: RWLock): void => rw.readUnlock()
  const held: boolean = withLock(s.mutex('lock')) && withLock(new Mutex()) && withLock(Mutex.from(new Mutex()))
  const first: string = await drain(pool)
  const spaceLimiter: RateLimiter = perIp
  const versioned: Space = openShared('types-versioned', { versioned: true })
  const flag: boolean | 'state' = versioned.versioned && s.versioned
  const freed: boolean = s.free('order:1')
  const u: SpaceUsage = s.usage()
  const left: number = u.maxObjects - u.objects - u.retired + u.bytes - u.bytesUsed
  void [freed, left]
  void [held, first, readers, spaceLimiter, flag, Sema.from(new Sema(2)), RWLock.from(new RWLock())]
  s.close()
  const gone: boolean = s.unlink() || openShared.unlink('types-sample')
  void gone
}
void space
