'use strict'
// Sema on Redis: `nr` tokens (the slots 0 … nr-1) across every client, one
// lease per token held, waiters served in arrival order. See
// lib/redis/queue.js and lib/redis/scripts.js.

const { LeaseQueue } = require('./queue')
const { checkClient, checkKey, checkCount, objectOptions, invalidType, SabsyncError } = require('./common')

class Sema {
  #q
  #held = new Map() // token -> Holding
  #order = [] // tokens held, in the order they were acquired

  constructor (redis, key, nr, options) {
    checkClient(redis)
    checkKey(key)
    checkCount('nr', nr)
    this.#q = new LeaseQueue(redis, 'sema', key, nr, false, objectOptions(options))
    Object.defineProperty(this, 'key', { value: key, enumerable: true })
    Object.defineProperty(this, 'nr', { value: nr, enumerable: true })
  }

  /** A token once one is free for this caller, undefined on timeout. */
  acquire (options) {
    return this.#q.take(true, options, this.#granted)
  }

  /** A token if one is free right now (and nobody waits), else undefined. */
  tryAcquire () {
    return this.#q.take(false, undefined, this.#granted)
  }

  // A take's answer as acquire() and tryAcquire() give it (as Mutex's).
  #granted = h => h === undefined ? undefined : this.#adopt(h)

  #adopt (h) {
    const old = this.#held.get(h.slot)
    if (old !== undefined) { // only after the server lost its state
      old.lose('the server granted its token again (it lost its state)')
      this.#order.splice(this.#order.lastIndexOf(h.slot), 1)
    }
    this.#held.set(h.slot, h)
    this.#order.push(h.slot)
    return h.slot
  }

  /**
   * Give back `token`, or without one the token this Sema acquired most
   * recently. Resolves undefined (API.md: Promise<void>) once the server
   * has it back, also when its lease had been lost meanwhile: then the
   * token's `lost(token)` signal (read before the release) has aborted with
   * ERR_SABSYNC_LEASE_LOST by the time this resolves. A token this Sema
   * does not hold rejects with ERR_SABSYNC_BAD_TOKEN; a server that cannot
   * be reached with ERR_SABSYNC_REDIS (the token is no longer renewed, so
   * the server takes it back when its lease runs out).
   */
  async release (token) {
    if (token === undefined) {
      if (this.#order.length === 0) throw new SabsyncError('ERR_SABSYNC_BAD_TOKEN', 'sabsync: release() on a Sema that holds no token')
      token = this.#order[this.#order.length - 1]
    } else if (typeof token !== 'number') {
      throw invalidType('token', 'a token from acquire() (an integer)', token)
    }
    const h = this.#held.get(token)
    if (h === undefined) throw new SabsyncError('ERR_SABSYNC_BAD_TOKEN', `sabsync: release(${token}): this Sema does not hold that token`)
    this.#held.delete(token)
    this.#order.splice(this.#order.lastIndexOf(token), 1)
    await h.release()
  }

  /** How many wait for a token, on every client. */
  nrWaiting () {
    return this.#q.count()
  }

  /** An AbortSignal that aborts if the lease of `token` (held here) is lost. */
  lost (token) {
    if (typeof token !== 'number') throw invalidType('token', 'a token from acquire() (an integer)', token)
    const h = this.#held.get(token)
    if (h === undefined) throw new SabsyncError('ERR_SABSYNC_BAD_TOKEN', `sabsync: lost(${token}): this Sema does not hold that token`)
    return h.signal
  }
}

module.exports = { Sema }
