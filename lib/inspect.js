'use strict'
// space.inspect(): a plain, JSON-serialisable snapshot of a shared space
// for a person or a tool (the `sabsync` command): its objects, who holds
// them, who waits, the processes attached, the limiters' occupancy.
//
// Nothing here waits for anything: the private part (directory, waiter
// records, thread slots) is read by src/core/space_inspect.c without taking
// a lock, each word once; the objects' words (the public part) are read
// here with one Atomics.load each. Every value is a claim of the memory at
// the moment of reading, checked only so far as using it is safe: an
// offset or a count outside its object is reported in `unreadable`, never
// followed. A scribbled space gives a snapshot that says what it could not
// read; a busy one gives one that may be a moment old in places.

const native = require('./native')
const { readTable, TABLE_KEY, MUTEX_KEY, WORDS } = require('./locks/processes')

const DIR_STATE = ['empty', 'creating', 'ready', 'retired', 'free']
const OWNER = 0x3FFFFFFF
const VERSION_MARK = '\u0002'

// The words of a kind's memory (lib/mutex.js, rwlock.js, sema.js, ...), as
// offsets in bytes from the object's start.
const MUTEX_WORD = 4
const RW_STATE = 4
const RW_DIED = 12
const RW_SLOT0 = 48
const RW_MUTEX = 32
const SEMA_HEADER = 32
const SEMA_HELD_RECOVERED = 0x40000000
const LIMITER_SLOT = 16 // bytes per key slot: fingerprint, time

// The snapshot. `st` is lib/space.js's state of the open space; `kinds`
// its KINDS table (number -> { call, params }); `also`, if given, a waiter
// { id, off } to count as queued on the cell at offset `off` (a wait
// looking for deadlocks between two of its parks).
function inspect (st, kinds, also) {
  const h = st.handle
  const dir = native.spaceObjects(h)
  const parties = new Map(native.spaceParties(h).map(p => [p.id, p]))
  const unreadable = []
  const who = id => {
    const p = parties.get(id)
    return p === undefined ? null : { pid: p.pid, threadId: p.threadId }
  }
  const view = new DataView(st.buffer)
  // A word of the public part at absolute offset `off`, or undefined when
  // it lies outside (a scribbled directory).
  const word = off => {
    const at = off - st.pubOff
    if (at < 0 || at + 4 > st.buffer.byteLength || at % 4 !== 0) return undefined
    return Atomics.load(new Int32Array(st.buffer, at, 1), 0) >>> 0
  }

  const objects = []
  const locks = [] // { key, kind, holders, waiters }: owner ids, for deadlocks
  const tables = new Map() // a rateLimiter's key -> its table's occupancy
  let table = null // the Web Locks table (space.locks), when there is one
  for (const e of dir.objects) {
    const where = `directory entry ${e.index}`
    if (e.bad & 1) unreadable.push(`${where}: state ${e.state} is no state an entry has`)
    if (e.bad & 2) unreadable.push(`${where}: its key (length or bytes) cannot be read`)
    if (e.bad & 4) unreadable.push(`${where}: its place (offset, size) lies outside the heap`)
    const full = e.key === null ? null : e.key
    const versioned = full !== null && full.includes(VERSION_MARK)
    const key = full === null ? null : full.split(VERSION_MARK)[0].replace(/\u0001$/, '') // eslint-disable-line no-control-regex
    const k = kinds[e.kind]
    const o = {
      key,
      kind: k === undefined ? `unknown (${e.kind})` : k.call,
      state: DIR_STATE[e.state] ?? `unknown (${e.state})`,
      parameters: k === undefined ? {} : Object.fromEntries(k.params(e.params)),
      bytes: e.bytes,
      waiting: e.waiting,
      waiters: e.waiterIds.map(id => who(id) ?? { pid: null, threadId: null, dead: true })
    }
    if (versioned) o.versioned = true
    if (k === undefined) unreadable.push(`${where}: kind ${e.kind} is no kind a space holds`)
    if ((e.bad & 4) === 0 && e.state === 2) {
      try {
        const holders = readState(o, e, word, who, view, st, unreadable, where)
        const waiters = also !== undefined && also.off >= e.off && also.off < e.off + e.bytes && !e.waiterIds.includes(also.id)
          ? [...e.waiterIds, also.id]
          : e.waiterIds
        // The Web Locks table's mutex is their bookkeeping, held for one
        // step (at most BUSY_MS, lib/locks/processes.js) and never while
        // its holder waits: the names are the locks, below. Left out, a
        // party caught inside a step would list it among what it holds.
        if (holders !== undefined && key !== MUTEX_KEY) locks.push({ key, kind: o.kind, holders, waiters })
      } catch (err) {
        unreadable.push(`${where}: ${err.message}`)
      }
    }
    if (e.kind === 13) {
      if (key !== null) tables.set(key, o.table)
      continue
    }
    // The Web Locks table and its mutex: reported as `locks`, below.
    if (key === TABLE_KEY && (e.bad & 4) === 0 && e.state === 2 && e.bytes >= WORDS * 4) {
      const at = e.off - st.pubOff
      if (at >= 0 && at % 4 === 0 && at + WORDS * 4 <= st.buffer.byteLength) table = new Int32Array(st.buffer, at, WORDS)
      continue
    }
    if (key === MUTEX_KEY) continue
    objects.push(o)
  }
  const named = table === null ? { held: [], pending: [], unreadable: [] } : readTable(table)
  unreadable.push(...named.unreadable)
  // Each name a lock for the deadlock search: its holders and waiters.
  const byName = new Map()
  for (const [list, role] of [[named.held, 'holders'], [named.pending, 'waiters']]) {
    for (const r of list) {
      if (!byName.has(r.name)) byName.set(r.name, { key: r.name, kind: 'locks', holders: [], waiters: [] })
      byName.get(r.name)[role].push(r.ownerId)
    }
  }
  locks.push(...byName.values())
  const strip = ({ ownerId, ...info }) => info
  for (const o of objects) {
    if (o.kind === 'rateLimiter' && tables.has(o.key)) o.table = tables.get(o.key)
  }

  // Processes by the pid their slots claim; a process's bookkeeping id
  // (the one it takes the space's locks with) is not one of its threads.
  const byPid = new Map()
  for (const p of parties.values()) {
    const key = p.pid ?? 'unknown'
    if (!byPid.has(key)) byPid.set(key, { pid: p.pid, threads: [] })
    if (!p.bookkeeping) byPid.get(key).threads.push({ ownerId: p.id, threadId: p.threadId })
  }
  return {
    name: st.name,
    file: `/dev/shm/sabsync.${st.name}`,
    size: dir.size,
    at: new Date().toISOString(),
    deaths: dir.epoch,
    processes: [...byPid.values()],
    usage: {
      objects: dir.objects.filter(e => e.state === 1 || e.state === 2).length,
      retired: dir.objects.filter(e => e.state === 3).length,
      heapUsed: dir.heapUsed,
      heapBytes: dir.heapBytes,
      waiterRecords: dir.recordsUsed
    },
    objects,
    locks: { held: named.held.map(strip), pending: named.pending.map(strip) },
    deadlocks: deadlocks(locks, parties),
    unreadable
  }
}

// Cycles of waits among this process's threads: their Mutex and RWLock
// waits on memory of the process (src/core/lockwaits.c: every thread's
// lock waits that parked, with the holders their lock's words name) and
// their named locks (require('sabsync').locks), parties named by
// threadId. A lock on plain memory has no name: its key is the address of
// its memory in this process ('0x...'), the same in every thread.
function threadDeadlocks () {
  const locks = new Map() // key -> { key, kind, holders, waiters }
  const parties = new Map() // threadId -> { pid, threadId }
  const party = tid => {
    if (tid >= 0 && !parties.has(tid)) parties.set(tid, { pid: process.pid, threadId: tid })
    return tid >= 0
  }
  const lockOf = (id, key, kind) => {
    let l = locks.get(id)
    if (l === undefined) locks.set(id, (l = { key, kind, holders: [], waiters: [] }))
    return l
  }
  for (const [waiter, kind, address, holders] of native.lockWaits()) {
    const key = '0x' + address.toString(16)
    const l = lockOf('memory ' + key, key, kind === 1 ? 'mutex' : 'rwlock')
    // Each waiter read the words at its own moment: the union.
    for (const h of holders) if (party(h) && !l.holders.includes(h)) l.holders.push(h)
    if (party(waiter)) l.waiters.push(waiter)
  }
  const q = native.locksQuery()
  for (const [list, role] of [[q.held, 'holders'], [q.pending, 'waiters']]) {
    for (const r of list) {
      const tid = Number(r.clientId.slice(r.clientId.indexOf(':') + 1))
      if (party(tid)) lockOf('name ' + r.name, r.name, 'locks')[role].push(tid)
    }
  }
  return deadlocks([...locks.values()], parties).map(d => ({
    tier: 'thread',
    parties: d.parties.map(({ ownerId, ...p }) => p)
  }))
}

// Cycles of waits among the lock holders: a waiter queued on a lock waits
// for each live holder of it (a mutex's holder; an rwlock's writer and
// readers). Each cycle once, as the parties in it: who, what it holds,
// what it waits for. Only live owners take part (a dead holder's lock
// passes on), and only the first eight waiters of a lock are known.
function deadlocks (locks, parties) {
  const edges = new Map() // waiter id -> [{ to: holder id, lock }]
  const held = new Map() // id -> keys it holds
  for (const l of locks) {
    for (const h of l.holders) {
      if (!parties.has(h)) continue
      if (!held.has(h)) held.set(h, [])
      held.get(h).push(l.key)
    }
    for (const w of l.waiters) {
      if (!parties.has(w)) continue
      for (const h of l.holders) {
        if (h === w || !parties.has(h)) continue
        if (!edges.has(w)) edges.set(w, [])
        edges.get(w).push({ to: h, lock: l })
      }
    }
  }
  const cycles = []
  const seen = new Set()
  const path = []
  const onPath = new Map() // id -> the index of its step in path
  const done = new Set()
  function visit (id) {
    onPath.set(id, path.length)
    for (const e of edges.get(id) || []) {
      path.push({ id, lock: e.lock })
      if (onPath.has(e.to)) {
        // Each step: a party and the lock it waits for, held by the next.
        const steps = path.slice(onPath.get(e.to))
        const sig = steps.map(s => s.id).slice().sort((a, b) => a - b).join(',')
        if (!seen.has(sig)) {
          seen.add(sig)
          cycles.push(steps)
        }
      } else if (!done.has(e.to)) {
        visit(e.to)
      }
      path.pop()
    }
    onPath.delete(id)
    done.add(id)
  }
  for (const id of edges.keys()) if (!done.has(id)) visit(id)
  return cycles.map(steps => ({
    parties: steps.map(({ id, lock }) => {
      const p = parties.get(id)
      return { pid: p.pid, threadId: p.threadId, ownerId: id, holds: held.get(id) || [], waitsFor: { key: lock.key, kind: lock.kind } }
    })
  }))
}

// The state of a ready object, kind by kind, into `o`.
function readState (o, e, word, who, view, st, unreadable, where) {
  const holderOf = id => {
    if (id === 0) return null
    return who(id) ?? { pid: null, threadId: null, dead: true }
  }
  const need = n => {
    if (e.bytes < n) throw new Error(`${e.bytes} bytes are too few for a ${o.kind}`)
  }
  switch (e.kind) {
    case 3: { // mutex
      need(16)
      const w = word(e.off + MUTEX_WORD)
      o.holder = holderOf(w & OWNER)
      o.ownerDied = (w & 0x80000000) !== 0
      return (w & OWNER) === 0 ? [] : [w & OWNER]
    }
    case 8: { // rwlock
      const slots = e.params[0]
      need(RW_SLOT0 + slots * 4)
      const s = word(e.off + RW_STATE)
      const writer = word(e.off + RW_MUTEX + MUTEX_WORD) & OWNER
      o.writer = (s & 0x80000000) !== 0 ? holderOf(writer) : null
      o.ownerDied = word(e.off + RW_DIED) === 1
      o.readers = []
      const ids = writer === 0 ? [] : [writer] // the writer, or a writer draining the readers
      for (let i = 0; i < slots; i++) {
        const id = word(e.off + RW_SLOT0 + i * 4)
        if (id !== 0) {
          o.readers.push(holderOf(id & OWNER))
          ids.push(id & OWNER)
        }
      }
      return ids
    }
    case 10: { // sema
      const nr = e.params[0]
      need(SEMA_HEADER + nr * 8)
      const holders = new Map()
      let free = 0
      for (let i = 0; i < nr; i++) {
        const v = word(e.off + SEMA_HEADER + (nr + i) * 4)
        if (v === 0 || v === SEMA_HELD_RECOVERED) {
          free++
          continue
        }
        const id = v & OWNER
        holders.set(id, (holders.get(id) || 0) + 1)
      }
      o.available = free
      o.holders = [...holders].map(([id, tokens]) => ({ ...holderOf(id), tokens }))
      break
    }
    case 6: // latch
      need(8)
      o.count = word(e.off + 4)
      break
    case 9: { // barrier
      need(16)
      const w = word(e.off + 4)
      o.arrived = w & 0xFFFFF
      o.broken = (w & 0x80000000) !== 0
      break
    }
    case 5: { // once
      need(8)
      const s = word(e.off + 4)
      o.done = s === 0x80000000
      o.running = s !== 0x80000000 && (s & OWNER) !== 0 ? holderOf(s & OWNER) : null
      break
    }
    case 4: // atomicFlag
      need(8)
      o.set = word(e.off + 4) === 1
      break
    case 13: { // a rateLimiter's table: keys tracked now
      const keys = e.params[0]
      need(keys * LIMITER_SLOT)
      const now = process.hrtime.bigint()
      let used = 0
      let claiming = 0
      const at = e.off - st.pubOff
      for (let i = 0; i < keys; i++) {
        const w = view.getBigInt64(at + i * LIMITER_SLOT + 8, true)
        if (w > now) used++
        else if (w < 0n) claiming++
      }
      o.table = { keys, used, claiming, full: used + claiming >= keys }
      break
    }
  }
}

module.exports = { inspect, threadDeadlocks }
