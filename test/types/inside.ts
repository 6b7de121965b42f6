// Seeing inside (index.d.ts): nrWaiting on every primitive, a Mutex's
// holder, an RWLock's writer.
import { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier, Sema, RateLimiter } from 'sabsync'

const m = new Mutex()
const h = m.holder
if (h !== null) {
  const pid: number | null = h.pid
  const tid: number | null = h.threadId
  void [pid, tid]
}
const w: { pid: number | null, threadId: number | null } | null = new RWLock().writer
const counts: number[] = [
  m.nrWaiting(), new AtomicFlag().nrWaiting(), new Once().nrWaiting(), new Latch(1).nrWaiting(),
  new CondVar().nrWaiting(), new RWLock().nrWaiting(), new Barrier(2).nrWaiting(), new Sema(1).nrWaiting(),
  new RateLimiter({ limit: 1, window: 1000 }).nrWaiting()
]
void [w, counts]

// space.inspect()
import { openShared } from 'sabsync'
import type { SpaceSnapshot, SpaceParty } from 'sabsync'
const snap: SpaceSnapshot = openShared('types-inside').inspect()
const holder: SpaceParty | null | undefined = snap.objects[0]?.holder
const pids: Array<number | null> = snap.processes.map(p => p.pid)
void [holder, pids, snap.unreadable.length]

// A sabsync/redis Mutex's holder: asked of the server.
import { Mutex as RedisMutex } from 'sabsync/redis'
import type { RedisHolder, RedisClient } from 'sabsync/redis'
declare const redis: RedisClient
async function whoHolds (): Promise<string> {
  const h: RedisHolder | null = await new RedisMutex(redis, 'jobs').holder()
  if (h === null) return 'nobody'
  const fence: number = h.fence
  const left: number = h.leaseLeftMs
  return `${h.host ?? '?'} pid ${h.pid ?? '?'} thread ${h.threadId ?? '?'} (fence ${fence}, ${left} ms left)`
}
void whoHolds

// Cycles of lock waits among this process's threads.
import { deadlocks } from 'sabsync'
import type { ThreadDeadlock } from 'sabsync'
const cycles: ThreadDeadlock[] = deadlocks()
const kinds: Array<'mutex' | 'rwlock' | 'locks'> = cycles.flatMap(c => c.parties.map(p => p.waitsFor.kind))
void kinds
