// Compiled with `tsc --noEmit --strict` by test/types.test.js: the lock
// primitives used as docs/primitives-locks.md shows them.
import { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier } from 'sabsync'
import type { MutexGuard, SharedHandle, RWLockOptions } from 'sabsync'

async function main (): Promise<void> {
  const m = new Mutex()
  const locked: boolean = m.lock(10) && m.tryLock() && (await m.lockAsync({ timeout: 5, signal: AbortSignal.timeout(50), ref: false }))
  m.unlock()
  const n: number = await m.runExclusive(async () => 1)
  const g: MutexGuard | undefined = m.guard(5)
  g?.[Symbol.dispose]()
  const h: SharedHandle = m
  const m2 = Mutex.from(h)
  const died: boolean = m2.ownerDied || m2.isLocked

  const f = new AtomicFlag()
  const fl: boolean = f.testAndSet() && f.test() && f.wait(false, 1) && (await f.waitAsync(true))
  f.clear()
  const woken: number = f.notifyOne() + f.notifyAll()

  const once = Once.from(new Once())
  const ran: boolean | undefined = once.run(() => {}) ?? (await once.runAsync(async () => {}))

  const latch = new Latch(2, { buffer: new SharedArrayBuffer(Latch.byteLength), byteOffset: 0 })
  latch.countDown()
  const open: boolean = latch.wait(5) || latch.tryWait() || (await latch.waitAsync()) || latch.arriveAndWait(1)

  const cv = new CondVar()
  m.lock()
  const notified: boolean = cv.wait(m, 1) || (await cv.waitAsync(m, { timeout: 1 }))
  m.unlock()
  cv.notifyAll()

  const opts: RWLockOptions = { readerSlots: 8 }
  const rw = new RWLock(opts)
  const r: boolean = rw.readLock() && rw.tryReadLock() && (await rw.readLockAsync())
  rw.readUnlock()
  const w: boolean = rw.tryWriteLock() || rw.writeLock(1) || (await rw.writeLockAsync({ timeout: 1 }))
  const bytes: number = RWLock.byteLengthFor(8) + rw.readerSlots

  const b = new Barrier(2)
  const res: { isLeader: boolean } | undefined = b.wait(1) ?? (await b.waitAsync({ timeout: 1 }))
  b.reset()
  void [locked, n, died, fl, woken, ran, open, notified, r, w, bytes, res, b.isBroken, b.arrived, Barrier.byteLengthFor(3)]
}
void main
