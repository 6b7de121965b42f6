// ESM entry: the same exports as require('sabsync').
import { createRequire } from 'node:module'

const sabsync = createRequire(import.meta.url)('./lib/index.js')

export const { wait, waitAsync, notify, waiters, SabsyncError } = sabsync
export const { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier } = sabsync
export const { Sema, RateLimit, RateLimiter, openShared } = sabsync
export const { locks, Lock, LockManager, deadlocks } = sabsync
export default sabsync
