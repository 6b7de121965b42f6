'use strict'
// RateLimit on Redis: at most `rps` grants in any window of `timeUnit` ms,
// across every client, on the server's clock, in arrival order.
//
// One script call per caller (lib/redis/scripts.js, `rate`) computes the
// earliest time t its grant may have under the in-process window rules
// (src/core/rate.c) and records t at once, even when t is still to come:
// the caller then sleeps until t. Recording ahead is what makes arrival
// order and one round trip possible; an abort gives the unused time back.
// The caller sleeps from the moment the reply arrives, which is after the
// server read its clock, so it proceeds no earlier than t on the server's
// clock (as long as both clocks tick at the same rate).
//
// `timeout` is decided by the server, on its clock: a grant whose time is
// more than `timeout` ms after the script runs is not recorded. So
// `timeout: 0` (and limit.try()) grants exactly when the limit has room
// when the server is asked, however long the round trip takes. A positive
// timeout also bounds the wait for the reply: a call never outlasts it.

const { hubOf, malformed } = require('./hub')
const { direct, callScript } = require('./scripts')
const { evictionCheck } = require('./queue')
const { ACQUIRE, observed, traceWait } = require('../trace')
const {
  checkClient, checkKey, checkCount, msOption, objectOptions, prefixOption, unsafeAllowEvictionOption, waitOptions,
  within, connected, redisError, quiet, invalidType, outOfRange, redisName, isRefusal, POLICY_RECHECK_MS, MAX_MS
} = require('./common')

function parseOptions (options) {
  const { timeUnit = 1000, uniformDistribution = false } = options
  if (typeof timeUnit !== 'number') throw invalidType('options.timeUnit', 'a positive number of milliseconds', timeUnit)
  if (!(timeUnit >= 0.001 && timeUnit <= MAX_MS)) {
    throw outOfRange('options.timeUnit', `a number of milliseconds >= 0.001 and <= ${MAX_MS}`, timeUnit)
  }
  if (typeof uniformDistribution !== 'boolean') {
    throw invalidType('options.uniformDistribution', 'a boolean', uniformDistribution)
  }
  return { timeUnit, uniformDistribution }
}

// Resolve at performance.now() >= end (a timer can fire a little early
// by the loop's cached clock: check, and sleep again for what is left).
function sleepUntil (end, signal) {
  return new Promise((resolve, reject) => {
    let timer = null
    const aborted = () => { clearTimeout(timer); reject(signal.reason) }
    const check = () => {
      const left = end - performance.now()
      if (left <= 0) {
        if (signal !== undefined) signal.removeEventListener('abort', aborted)
        return resolve()
      }
      timer = setTimeout(check, Math.min(Math.ceil(left), MAX_MS))
    }
    if (signal !== undefined) signal.addEventListener('abort', aborted, { once: true })
    check()
  })
}

/**
 * A rate limiter shared by every client of the server: `await limit()`
 * resolves when a call may proceed, with its grant time (server clock, ms
 * since the epoch); undefined when that would be later than
 * options.timeout ms from now.
 */
function RateLimit (redis, key, rps, options) {
  checkClient(redis)
  checkKey(key)
  checkCount('rps', rps)
  options = objectOptions(options)
  const { timeUnit, uniformDistribution } = parseOptions(options)
  const commandTimeout = msOption(options, 'commandTimeout', 5000, 1)
  const tag = `{${prefixOption(options)}:rate:${key}}`
  const keys = [redisName(tag + ':log'), redisName(tag + ':m')] // R, and RM (scripts.js, rate)
  const log = keys[0]
  const what = 'rate limit on ' + tag // names a call in its errors
  const unitUs = Math.max(1, Math.round(timeUnit * 1000))
  const hub = hubOf(redis)
  const allowEviction = unsafeAllowEvictionOption(options)
  let evictionChecked = allowEviction
  // When the script last found the eviction policy safe (lib/redis/queue.js,
  // policyAt): read again at most once a POLICY_RECHECK_MS.
  let policyAt = -Infinity
  const giveBack = id => { try { redis.sabsync2Unrate(keys[0], id).catch(quiet) } catch {} }
  // The idle tidy (scripts.js, rateTidy): once the newest grant this client
  // saw stops counting, the log is trimmed, and both keys go when it is
  // empty; the script says when to look again while grants remain. One
  // unref'd timer per limit; a failure waits for the next grant.
  let tidyTimer = null
  const tidy = () => {
    tidyTimer = null
    let reply
    try {
      reply = redis.sabsync2RateTidy(...keys, unitUs)
    } catch {
      return
    }
    within(reply, commandTimeout, 'tidy of ' + tag, redis).then(us => {
      if (Number.isSafeInteger(us) && us >= 0 && tidyTimer === null) tidyAfter(us / 1000)
    }, quiet)
  }
  const tidyAfter = ms => {
    tidyTimer = setTimeout(tidy, Math.min(Math.ceil(ms) + 1, MAX_MS))
    tidyTimer.unref()
  }

  async function limit (options) {
    const { timeout, signal } = waitOptions(options)
    if (signal !== undefined && signal.aborted) throw signal.reason
    const sent = performance.now()
    // A reply must come within the caller's timeout (0: within
    // commandTimeout); a late one from a connected client is a timeout.
    const ownDeadline = timeout !== Infinity && timeout !== 0
    let bound = ownDeadline ? timeout : commandTimeout
    let asked = sent // when the script call is sent
    if (!evictionChecked) {
      try {
        await evictionCheck(hub, false, bound, signal, commandTimeout)
      } catch (err) {
        if (ownDeadline && err.cause && err.cause.noReply && connected(redis)) return undefined
        throw err
      }
      evictionChecked = true
      asked = performance.now()
      if (ownDeadline) bound = Math.max(1, timeout - (asked - sent))
    }
    const id = hub.nextId()
    const most = timeout === Infinity ? -1 : Math.floor(timeout * 1000)
    const check = !allowEviction && asked - policyAt >= POLICY_RECHECK_MS
    let r
    let waits = true // for the reply: a call sent again (NOSCRIPT) only while it does
    try {
      const reply = callScript(redis, direct.sabsync6Rate, [log, id, rps, unitUs, uniformDistribution ? 1 : 0, most, check ? 1 : 0], bound, what, answer, () => waits)
      r = await abortable(reply, signal)
      if (check && asked > policyAt) policyAt = asked
    } catch (err) {
      waits = false
      if (isRefusal(err)) policyAt = -Infinity
      giveBack(id) // in case the script runs after all
      if (ownDeadline && err.code === 'ERR_SABSYNC_REDIS' && err.cause && err.cause.noReply && connected(redis)) return undefined
      throw err
    }
    // t µs granted now; {t µs, wait µs} granted at t (> 0); {0, wait µs} not.
    let t
    let wait = 0
    if (typeof r === 'number') t = r
    else if (Array.isArray(r) && r.length === 2) [t, wait] = r
    if (!Number.isSafeInteger(t) || t < 0 || (typeof r === 'number' && t === 0) || (t > 0 && !(Number.isSafeInteger(wait) && wait >= 0))) {
      giveBack(id)
      throw redisError(`sabsync: Redis answered a rate limit call on ${tag} with ${malformed(r)}, not the reply of ` +
        'sabsync\'s script (another program wrote its keys, or this is not Redis)')
    }
    if (t === 0) return undefined
    const waitMs = wait / 1000
    if (tidyTimer === null) tidyAfter(waitMs + timeUnit)
    // The server granted within `timeout` of its clock; a positive timeout
    // also bounds the whole call (0 means "room now", whatever the trip).
    if (timeout !== Infinity && timeout !== 0 && performance.now() - sent + waitMs > timeout) {
      giveBack(id)
      return undefined
    }
    const granted = t / 1000
    if (waitMs > 0) {
      // A call that sleeps is a wait, traced from its start.
      const traced = observed(ACQUIRE) ? traceWait(ACQUIRE, { tier: 'redis', kind: 'RateLimit', key, async: true, waitedMs: 0 }, sent) : null
      try {
        await sleepUntil(performance.now() + waitMs, signal)
      } catch (err) {
        giveBack(id)
        if (traced !== null) traced(false, err)
        throw err
      }
      if (traced !== null) traced(true, granted)
    }
    return granted
  }

  /** How many grants are recorded for times still to come (callers sleeping). */
  function nrWaiting () {
    return within(redis.sabsync2RateWaiting(keys[0]), commandTimeout, 'nrWaiting on ' + tag, redis).then(Number)
  }

  /** limit({ timeout: 0 }): a grant only if the limit has room now. */
  function tryLimit () {
    return limit({ timeout: 0 })
  }

  Object.defineProperty(limit, 'try', { value: tryLimit, writable: true, configurable: true })
  Object.defineProperty(limit, 'nrWaiting', { value: nrWaiting, writable: true, configurable: true })
  Object.defineProperty(limit, 'key', { value: key, enumerable: true })
  Object.defineProperty(limit, 'rps', { value: rps })
  Object.defineProperty(limit, 'timeUnit', { value: timeUnit })
  Object.defineProperty(limit, 'uniformDistribution', { value: uniformDistribution })
  return limit
}

// The reply or the error of a call, as callScript's answer.
function answer (err, r) {
  if (err !== null) throw err
  return r
}

// `promise`, or signal.reason as soon as the signal aborts.
function abortable (promise, signal) {
  if (signal === undefined) return promise
  return new Promise((resolve, reject) => {
    const aborted = () => reject(signal.reason)
    signal.addEventListener('abort', aborted, { once: true })
    promise.then(v => { signal.removeEventListener('abort', aborted); resolve(v) },
      e => { signal.removeEventListener('abort', aborted); reject(e) })
  })
}

module.exports = { RateLimit }
