'use strict'
// The processes tier of the Web Locks API: `space.locks`, one table of
// requests in the space for every thread of every process that opens it,
// driven by the spec's front (lib/locks/front.js).
//
// The table is an Int32Array of the space (its own key), guarded by a
// Mutex of the space (robust: a holder that dies mid-change is taken over,
// and the table is then checked whole). Each request is a slot:
//
//   state  0 free, 1 queued, 2 held
//   owner  the space owner id of the requesting thread (a dead owner's
//          slots are freed by whoever notices: deaths end watching waits)
//   mode   0 exclusive, 1 shared
//   order  when it was queued (FIFO per name), from the header's counter
//   grant  when it was granted (query's held order)
//   serial with the slot's index, the ticket: a slot reused is another ticket
//   pid, thread   what query() says of the owner
//   hash, len, units   the name, two UTF-16 code units a word
//
// Another process can write all of it: every word is read once into a
// local, checked, and only what checked is used; a slot that makes no
// sense is freed; every loop is bounded by the table's size. Changes that
// concern others (a grant, a robbery, a slot freed with a queue behind it)
// ring the header's doorbell, on which each process's managers wait,
// watching owners, so that a holder's death also wakes them.
const { threadId } = require('worker_threads')
const { makeLockManager, STEAL, IF_AVAILABLE } = require('./front')
const { deadlockLooker } = require('../inside')
const { SabsyncError } = require('../errors')
const { OK, WATCH_ANY } = require('../shared')

const SLOTS = 256
const NAME_MAX = 128 // UTF-16 code units
const HEADER = 8
const F = { state: 0, owner: 1, mode: 2, order: 3, grant: 4, serial: 5, pid: 6, thread: 7, hash: 8, len: 9, units: 10 }
const SLOT = F.units + NAME_MAX / 2
const H = { magic: 0, seq: 1, bell: 2, high: 3, serial: 4 }
const MAGIC = 0x4c4f434b // 'LOCK'
const WORDS = HEADER + SLOTS * SLOT
const KEY = '\u0003sabsync.locks'
const TABLE_KEY = KEY + '.table'
const BUSY_MS = 250 // the longest a request waits for the table's mutex

function hashOf (name) {
  let h = 0x811c9dc5
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193)
  return h | 0
}

function makeSpaceLocks (space, backend) {
  const L = space.int32Array(TABLE_KEY, WORDS)
  const m = space.mutex(KEY + '.mutex')
  const self = backend.self
  const ring = backend.waker(L, H.bell)
  let seenEpoch = backend.deathEpoch()

  // This manager's tickets: waiting (ticket -> { resolve }) and held.
  const waiting = new Map()
  const held = new Set()
  let onStolen = null
  let watching = false
  let keep = null // a ref'd timer while requests wait: the loop stays alive

  const slotAt = ticket => (ticket % SLOTS)
  const serialOf = ticket => Math.floor(ticket / SLOTS)
  const ticketOf = (s, serial) => serial * SLOTS + s + 1 // never 0

  // ---- the table, under m ----

  // Is slot s (state read once) a live request? Frees it when its owner is
  // dead or its words make no sense.
  function live (s, reap) {
    const b = HEADER + s * SLOT
    const state = L[b + F.state]
    if (state === 0) return 0
    const len = L[b + F.len]
    if ((state !== 1 && state !== 2) || !(len >= 0 && len <= NAME_MAX) || (L[b + F.mode] & ~1) !== 0 ||
        (reap && !backend.alive(L[b + F.owner] >>> 0))) {
      L[b + F.state] = 0
      return -1
    }
    return state
  }

  function high () {
    const h = L[H.high]
    return h >= 0 && h <= SLOTS ? h : SLOTS
  }

  function sameName (b, name, hash) {
    if (L[b + F.hash] !== hash || L[b + F.len] !== name.length) return false
    for (let i = 0; i < name.length; i += 2) {
      const w = L[b + F.units + (i >> 1)]
      if ((w & 0xffff) !== name.charCodeAt(i)) return false
      if (i + 1 < name.length && (w >>> 16) !== name.charCodeAt(i + 1)) return false
    }
    return true
  }

  function nameAt (b) {
    const len = Math.min(Math.max(L[b + F.len], 0), NAME_MAX)
    let s = ''
    for (let i = 0; i < len; i++) {
      const w = L[b + F.units + (i >> 1)]
      s += String.fromCharCode(i & 1 ? w >>> 16 : w & 0xffff)
    }
    return s
  }

  // Free every slot whose owner is dead, and every one that makes no
  // sense; grant what that made grantable. Answers whether anything changed.
  function reap () {
    seenEpoch = backend.deathEpoch()
    let freed = false
    const h = high()
    for (let s = 0; s < h; s++) if (live(s, true) < 0) freed = true
    if (freed) grantAll()
    return freed
  }

  // Grant every queue from its head while its head is grantable: the
  // queued slots in order, each granted when nothing ahead of it for its
  // name still waits and what is held allows it.
  function grantAll () {
    const h = high()
    const queued = []
    for (let s = 0; s < h; s++) if (live(s, false) === 1) queued.push(s)
    if (queued.length === 0) return false
    queued.sort((a, b) => (L[HEADER + a * SLOT + F.order] - L[HEADER + b * SLOT + F.order]) | 0)
    const blocked = [] // [hash, slot] of names whose head still waits
    let granted = false
    for (const s of queued) {
      const b = HEADER + s * SLOT
      const name = nameAt(b)
      const hash = L[b + F.hash]
      if (blocked.some(x => x[0] === hash && sameName(HEADER + x[1] * SLOT, name, hash))) continue
      if (grantable(name, hash, L[b + F.mode] === 1, s)) {
        L[b + F.grant] = nextSeq()
        L[b + F.state] = 2
        granted = true
      } else {
        blocked.push([hash, s])
      }
    }
    return granted
  }

  // Would a request for `name` be granted, given what is held (and, with
  // `queue`, what waits ahead of it)? Slot `except` is the request itself.
  function grantable (name, hash, shared, except = -1, queue = false) {
    const h = high()
    for (let s = 0; s < h; s++) {
      if (s === except) continue
      const state = live(s, false)
      if (state <= 0) continue
      const b = HEADER + s * SLOT
      if (!sameName(b, name, hash)) continue
      if (state === 1 && queue) return false
      if (state === 2 && (!shared || L[b + F.mode] !== 1)) return false
    }
    return true
  }

  function nextSeq () {
    const v = (L[H.seq] + 1) | 0
    L[H.seq] = v
    return v
  }

  function take (name, hash, shared, state) {
    for (let s = 0; s < SLOTS; s++) {
      const b = HEADER + s * SLOT
      if (live(s, false) !== 0) continue
      const serial = (L[H.serial] + 1) & 0x1fffff
      L[H.serial] = serial
      L[b + F.owner] = self
      L[b + F.mode] = shared ? 1 : 0
      L[b + F.order] = nextSeq()
      L[b + F.grant] = state === 2 ? L[b + F.order] : 0
      L[b + F.serial] = serial
      L[b + F.pid] = process.pid
      L[b + F.thread] = threadId
      L[b + F.hash] = hash
      L[b + F.len] = name.length
      for (let i = 0; i < name.length; i += 2) {
        L[b + F.units + (i >> 1)] = name.charCodeAt(i) | (i + 1 < name.length ? name.charCodeAt(i + 1) << 16 : 0)
      }
      L[b + F.state] = state
      if (s >= high()) L[H.high] = s + 1
      return ticketOf(s, serial)
    }
    return 0
  }

  // The state of `ticket`'s slot when it is still this thread's request
  // (1 queued, 2 held), else 0: each word read once (another process may
  // change the slot between two reads: a grant, a steal).
  function stateOf (ticket) {
    const t = ticket - 1
    const b = HEADER + slotAt(t) * SLOT
    const state = L[b + F.state]
    if (L[b + F.serial] !== serialOf(t) || (L[b + F.owner] >>> 0) !== self) return 0
    return state === 1 || state === 2 ? state : 0
  }
  const mine = (ticket, state) => stateOf(ticket) === state

  function free (ticket) {
    const t = ticket - 1
    const b = HEADER + slotAt(t) * SLOT
    L[b + F.state] = 0
    // The high-water mark comes down over free slots at the top.
    let h = high()
    while (h > 0 && L[HEADER + (h - 1) * SLOT + F.state] === 0) h--
    L[H.high] = h
  }

  // ---- the table's mutex ----

  // Run fn with m held: at once when m is free (the common case), else
  // after waiting for it (up to BUSY_MS: a live holder that keeps it longer
  // is stopped, or a co-tenant writes the space).
  function locked (fn) {
    if (m.tryLock()) return run(fn)
    return m.lockAsync({ timeout: BUSY_MS }).then(got => {
      if (!got) throw new SabsyncError('ERR_SABSYNC_SHARED_BUSY', `space.locks: the lock table of the space "${space.name}" was held past ${BUSY_MS} ms by a process that lives (stopped, or a co-tenant writing the space); try again`)
      return run(fn)
    })
  }

  function run (fn) {
    let rang = false
    try {
      if (L[H.magic] !== MAGIC) { // new, or overwritten: start clean
        L.fill(0)
        L[H.magic] = MAGIC
      }
      if (m.ownerDied || backend.deathEpoch() !== seenEpoch) rang = reap()
      const r = fn()
      rang = rang || r.ring
      return r.value
    } finally {
      m.unlock()
      if (rang) { Atomics.add(L, H.bell, 1); ring(Infinity) }
    }
  }

  // ---- watching: grants and robberies reach this thread ----

  function check () {
    for (const [ticket, w] of waiting) {
      const state = stateOf(ticket)
      if (state === 2) {
        waiting.delete(ticket)
        w.resolve(ticket)
      } else if (state !== 1) {
        // Freed by someone else (a co-tenant wrote the table, or took this
        // thread for dead): it no longer waits.
        waiting.delete(ticket)
        w.reject(new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `space.locks: a waiting request of the space "${space.name}" left the lock table without being granted (the table was written by another process)`))
      }
    }
    for (const ticket of held) {
      if (!mine(ticket, 2)) {
        held.delete(ticket)
        onStolen(ticket)
      }
    }
    if (waiting.size === 0 && keep !== null) {
      clearInterval(keep)
      keep = null
    }
  }

  async function watch () {
    watching = true
    try {
      while (waiting.size > 0 || held.size > 0) {
        const bell = Atomics.load(L, H.bell)
        check()
        if (waiting.size === 0 && held.size === 0) break
        const epoch = backend.deathEpoch()
        const r = await backend.parkAsync(L, H.bell, bell, 1000, undefined, false, WATCH_ANY, epoch)
        // A death, or a while with nothing heard: look at the table.
        if (r !== OK || backend.deathEpoch() !== seenEpoch) await locked(() => ({ value: 0, ring: reap() }))
      }
    } catch (err) {
      // The space closed under the waits (or its table's mutex answered an
      // error): what waits here rejects with it.
      for (const w of waiting.values()) w.reject(err)
      waiting.clear()
      if (keep !== null) { clearInterval(keep); keep = null }
    } finally {
      watching = false
    }
  }

  function startWatching () {
    if (waiting.size > 0 && keep === null) keep = setInterval(() => {}, 1 << 30)
    if (!watching) watch()
  }

  const backendOfLocks = {
    request (name, exclusive, how) {
      if (name.length > NAME_MAX) {
        throw new RangeError(`space.locks.request: a lock's name in a space is at most ${NAME_MAX} UTF-16 code units long, not ${name.length}`)
      }
      const hash = hashOf(name)
      const shared = !exclusive
      return locked(() => {
        let ring = false
        if (how === STEAL) {
          const h = high()
          for (let s = 0; s < h; s++) {
            const b = HEADER + s * SLOT
            if (live(s, false) === 2 && sameName(b, name, hash)) {
              L[b + F.state] = 0
              ring = true
            }
          }
          // This thread's own holders robbed: told now, before the grant.
          for (const t of held) if (!mine(t, 2)) { held.delete(t); onStolen(t) }
        }
        let now = grantable(name, hash, shared, -1, how !== STEAL)
        if (!now && how !== STEAL && reap()) {
          ring = true
          now = grantable(name, hash, shared, -1, true)
        }
        if (!now && how === IF_AVAILABLE) return { value: 0, ring }
        const ticket = take(name, hash, shared, now ? 2 : 1)
        if (ticket === 0) {
          throw new SabsyncError('ERR_SABSYNC_LOCKS_FULL', `space.locks.request: ${SLOTS} lock requests are held or waiting in the space "${space.name}", the most it has`)
        }
        if (now) {
          held.add(ticket)
          startWatching()
          return { value: ticket, ring }
        }
        let resolve, reject
        const promise = new Promise((_resolve, _reject) => { resolve = _resolve; reject = _reject })
        waiting.set(ticket, { resolve, reject })
        startWatching()
        const pending = {
          promise: promise.then(t => { held.add(t); return t }),
          cancel: () => locked(() => {
            if (!waiting.has(ticket) || !mine(ticket, 1)) return { value: false, ring: false }
            waiting.delete(ticket)
            free(ticket)
            if (waiting.size === 0 && keep !== null) { clearInterval(keep); keep = null }
            return { value: true, ring: grantAll() }
          })
        }
        return { value: pending, ring }
      })
    },
    release (ticket) {
      held.delete(ticket)
      return locked(() => {
        if (!mine(ticket, 2)) return { value: false, ring: false }
        free(ticket)
        return { value: true, ring: grantAll() }
      })
    },
    info () {},
    watch (fn) { onStolen = fn },
    // Cycles in the space through a waiting request: the space's snapshot
    // (lib/inspect.js), whose locks include this table's.
    deadlocks: deadlockLooker(() => space.inspect().deadlocks.map(d => ({ tier: 'space', space: space.name, ...d })), () => self),
    query () {
      return locked(() => {
        const h = high()
        const heldList = []
        const pending = []
        for (let s = 0; s < h; s++) {
          const state = live(s, false)
          if (state <= 0) continue
          const b = HEADER + s * SLOT
          const info = { name: nameAt(b), mode: L[b + F.mode] === 1 ? 'shared' : 'exclusive', clientId: `${L[b + F.pid] >>> 0}:${L[b + F.thread] >>> 0}` }
          if (state === 2) heldList.push([L[b + F.grant], info])
          else pending.push([L[b + F.order], info])
        }
        const inOrder = list => list.sort((a, b) => (a[0] - b[0]) | 0).map(x => x[1])
        return { value: { held: inOrder(heldList), pending: inOrder(pending) }, ring: false }
      })
    }
  }
  return makeLockManager(backendOfLocks)
}

// What a space's lock table says, read without its mutex (space.inspect():
// never waits), each word once: the held requests in grant order and the
// waiting ones in queue order, each { name, mode, clientId, ownerId }, and
// what could not be read. `L`: the table's words.
function readTable (L) {
  const unreadable = []
  const held = []
  const pending = []
  if (L.length < WORDS) return { held, pending, unreadable: ['the lock table is shorter than its layout'] }
  if (Atomics.load(L, H.magic) !== MAGIC) return { held, pending, unreadable }
  for (let s = 0; s < SLOTS; s++) {
    const b = HEADER + s * SLOT
    const state = Atomics.load(L, b + F.state)
    if (state === 0) continue
    const len = Atomics.load(L, b + F.len)
    const mode = Atomics.load(L, b + F.mode)
    if ((state !== 1 && state !== 2) || !(len >= 0 && len <= NAME_MAX) || (mode !== 0 && mode !== 1)) {
      unreadable.push(`lock table slot ${s}: state ${state}, name length ${len}, mode ${mode} make no request`)
      continue
    }
    let name = ''
    for (let i = 0; i < len; i++) {
      const w = Atomics.load(L, b + F.units + (i >> 1))
      name += String.fromCharCode(i & 1 ? w >>> 16 : w & 0xffff)
    }
    const info = {
      name,
      mode: mode === 1 ? 'shared' : 'exclusive',
      clientId: `${Atomics.load(L, b + F.pid) >>> 0}:${Atomics.load(L, b + F.thread) >>> 0}`,
      ownerId: Atomics.load(L, b + F.owner) >>> 0
    }
    if (state === 2) held.push([Atomics.load(L, b + F.grant), info])
    else pending.push([Atomics.load(L, b + F.order), info])
  }
  const inOrder = list => list.sort((a, b) => (a[0] - b[0]) | 0).map(x => x[1])
  return { held: inOrder(held), pending: inOrder(pending), unreadable }
}

module.exports = { makeSpaceLocks, readTable, NAME_MAX, SLOTS, WORDS, TABLE_KEY, MUTEX_KEY: KEY + '.mutex' }
