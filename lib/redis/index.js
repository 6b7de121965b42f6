'use strict'
// sabsync/redis: Mutex, Sema, RateLimit, RateLimiter and the Web Locks API
// (LockManager) across machines, on a Redis
// server (or anything speaking its protocol). The caller passes its own
// ioredis client; this entry point loads neither ioredis nor sabsync's
// native addon.
const { Mutex } = require('./mutex')
const { Sema } = require('./sema')
const { RateLimit } = require('./rate-limit')
const { RateLimiter } = require('./rate-limiter')
const { SabsyncError } = require('../errors')
const { letGo } = require('./let-go')
const { LockManager } = require('./locks')

module.exports = { Mutex, Sema, RateLimit, RateLimiter, LockManager, SabsyncError, letGo }
