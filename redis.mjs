// ESM entry of sabsync/redis: the same exports as require('sabsync/redis').
import { createRequire } from 'node:module'

const redis = createRequire(import.meta.url)('./lib/redis/index.js')

export const { Mutex, Sema, RateLimit, RateLimiter, LockManager, SabsyncError, letGo } = redis
export default redis
