'use strict'
// sabsync/redis: Mutex, Sema, RateLimit and RateLimiter across machines, on a Redis
// server (or anything speaking its protocol). The caller passes its own
// ioredis client; this entry point loads neither ioredis nor sabsync's
// native addon.
const { Mutex } = require('./mutex')
const { Sema } = require('./sema')
const { RateLimit } = require('./rate-limit')
const { RateLimiter } = require('./rate-limiter')
const { SabsyncError } = require('../errors')
const { letGo } = require('./let-go')

module.exports = { Mutex, Sema, RateLimit, RateLimiter, SabsyncError, letGo }
