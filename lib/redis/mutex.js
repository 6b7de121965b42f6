'use strict'
// Mutex on Redis: one holder at a time across every client, under a lease
// this process renews; every grant carries a fence that grows with every
// grant of the key. See lib/redis/queue.js and lib/redis/scripts.js.

const { LeaseQueue } = require('./queue')
const { checkClient, checkKey, objectOptions, invalidType, quiet, SabsyncError } = require('./common')

// `lost` before the first grant: a signal that never aborts.
const never = new AbortController().signal

class Mutex {
  #q
  #holding = null // the grant held now
  #last = null // the latest grant, held or not (its signal is `lost`)

  constructor (redis, key, options) {
    checkClient(redis)
    checkKey(key)
    this.#q = new LeaseQueue(redis, 'mutex', key, 1, true, objectOptions(options))
    Object.defineProperty(this, 'key', { value: key, enumerable: true })
  }

  /**
   * Resolves with a fence (a positive integer) once this client holds the
   * lock, false when `timeout` ms passed first. Calls pending on one Mutex
   * are served in turn, with every other client's, in arrival order.
   */
  lockAsync (options) {
    return this.#q.take(true, options, this.#granted)
  }

  /** The lock's fence if it was free right now, else false. */
  tryLock () {
    return this.#q.take(false, undefined, this.#granted)
  }

  // A take's answer as lockAsync() and tryLock() give it, made where the
  // reply is handled: a free lock+unlock costs no promise and no microtask
  // beyond the replies' own (neither is an async function either).
  #granted = h => h === undefined ? false : this.#adopt(h)

  #adopt (h) {
    // Only a server that lost its state grants again while a grant is
    // held here; that earlier grant is gone.
    if (this.#holding !== null) this.#holding.lose('the server granted the lock again (it lost its state)')
    this.#holding = h
    this.#last = h
    return h.fence
  }

  /**
   * Release the lock: true, or false if its lease had been lost (then
   * `lost` has aborted too). Never rejects for a lost lease. Rejects with
   * ERR_SABSYNC_NOT_OWNER when this Mutex holds nothing, and with
   * ERR_SABSYNC_REDIS when the server cannot be reached within
   * commandTimeout (the lease is no longer renewed then, so the server
   * frees the lock when it runs out).
   */
  unlock () {
    const h = this.#holding
    if (h === null) {
      return Promise.reject(new SabsyncError('ERR_SABSYNC_NOT_OWNER', `sabsync: unlock() of ${this.#q.tag}, which this Mutex does not hold`))
    }
    this.#holding = null
    return h.release()
  }

  /**
   * Run fn({ fence, signal }) holding the lock, unlocking when its result
   * settles. `signal` aborts if the lease is lost meanwhile. Resolves with
   * fn's result only if the lease held until the unlock; if it was lost
   * first, fn did not run alone, and runExclusive rejects with the
   * ERR_SABSYNC_LEASE_LOST (signal.reason) once fn settles. fn's own error
   * wins over that. A timeout rejects with ERR_SABSYNC_TIMEOUT.
   */
  async runExclusive (fn, options) {
    if (typeof fn !== 'function') throw invalidType('fn', 'a function', fn)
    const fence = await this.lockAsync(options)
    if (fence === false) throw new SabsyncError('ERR_SABSYNC_TIMEOUT', 'runExclusive: the mutex was not acquired within the timeout')
    const h = this.#holding
    const signal = h.signal
    let result
    try {
      result = await fn({ fence, signal })
    } catch (err) {
      // Given back before the rejection, as before the result: the next
      // call, from any client, finds the lock free.
      if (this.#holding === h) await this.unlock().catch(quiet)
      throw err
    }
    if (this.#holding === h) await this.unlock()
    if (signal.aborted) throw signal.reason
    return result
  }

  /**
   * Who holds the lock now, as the server says: null, or { host, pid,
   * threadId, fence, leaseLeftMs }. host, pid and threadId are null for a
   * holder in another process until its first renewal (a third of a lease
   * after its grant), and are what that holder said of itself.
   */
  holder () {
    return this.#q.holder()
  }

  /** How many wait for this lock, on every client. */
  nrWaiting () {
    return this.#q.count()
  }

  /** Aborts (ERR_SABSYNC_LEASE_LOST) when the lease of the latest grant is lost. */
  get lost () {
    return this.#last === null ? never : this.#last.signal
  }

  /** The fence of the grant held now, or undefined. */
  get fence () {
    return this.#holding === null ? undefined : this.#holding.fence
  }

  /** Whether this Mutex holds the lock with a lease not known to be lost. */
  get isHeld () {
    return this.#holding !== null && !this.#holding.lost
  }
}

module.exports = { Mutex }
