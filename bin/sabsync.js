#!/usr/bin/env node
'use strict'
// npx sabsync: the shared spaces of this host, for a person or a script.
//
//   sabsync ls [--json]               spaces: name, size, owner, mode, processes attached
//   sabsync inspect NAME [--json]     a space's objects, holders, waiters, processes
//   sabsync rm NAME [--force]         unlink a space; refused while processes are attached
//
// Exit codes:
//   0  done
//   1  usage: an unknown command or option, a missing name
//   2  no such space
//   3  the space could not be opened or read (another user's, not a space,
//      a layout of another version, not Linux)
//   4  rm refused: processes are attached (--force unlinks anyway; they
//      keep using it, and a later open makes a new space)
//   5  inspect found a deadlock (the snapshot is printed all the same)
//
// A space is a file /dev/shm/sabsync.NAME. Processes attached: those whose
// memory maps the file (as far as this user may read /proc/PID/maps), and
// the threads registered in it, counted by the kernel's locks on the file
// (/proc/locks: every user's). `inspect` opens the space to read it (its
// own process is left out of what it shows); `ls` and `rm` do not.

const fs = require('fs')
const path = require('path')

const DIR = '/dev/shm'
const PREFIX = 'sabsync.'
const EXIT = { OK: 0, USAGE: 1, NO_SPACE: 2, UNREADABLE: 3, ATTACHED: 4, DEADLOCK: 5 }

const USAGE = `usage: sabsync ls [--json]
       sabsync inspect NAME [--json]
       sabsync rm NAME [--force]
exit codes: 0 done, 1 usage, 2 no such space, 3 cannot open or read it, 4 rm refused (processes attached),
            5 inspect found a deadlock`

class Exit extends Error {
  constructor (code, message) {
    super(message)
    this.exitCode = code
  }
}

// ---- what the kernel says of a space's file ----

function fileOf (name) {
  return path.join(DIR, PREFIX + name)
}

function statOf (name) {
  try {
    const st = fs.lstatSync(fileOf(name))
    return st.isFile() ? st : null
  } catch (err) {
    if (err.code === 'ENOENT') return null
    throw new Exit(EXIT.UNREADABLE, `sabsync: ${fileOf(name)}: ${err.message}`)
  }
}

// Locks held on the file, by the "MAJ:MIN:INODE" /proc/locks names it with:
// a space's registered threads (and each process's bookkeeping id) hold one
// each, whoever's they are.
function lockCounts () {
  const counts = new Map()
  let text = ''
  try {
    text = fs.readFileSync('/proc/locks', 'utf8')
  } catch {
    return counts
  }
  for (const line of text.split('\n')) {
    const m = /^\d+:\s+OFDLCK\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+:[0-9a-f]+:\d+)\s/.exec(line)
    if (m) counts.set(m[1], (counts.get(m[1]) || 0) + 1)
  }
  return counts
}

function lockName (st) {
  const major = Math.floor(st.dev / 256) & 0xfff
  const minor = (st.dev & 0xff) | ((Math.floor(st.dev / 4096)) & 0xfff00)
  const hex = n => n.toString(16).padStart(2, '0')
  return `${hex(major)}:${hex(minor)}:${st.ino}`
}

// Pids (other than this one) whose memory maps one of the files `st`
// (its stat), as far as this user can read their maps: by device and
// inode, since a space's creator maps the file it made before it had its
// name. Answers a Set of pids per entry of `stats`.
function mappers (stats) {
  const found = stats.map(() => new Set())
  const needles = stats.map(st => {
    const [major, minor, ino] = lockName(st).split(':')
    return ` ${major}:${minor} ${ino} `
  })
  let pids = []
  try {
    pids = fs.readdirSync('/proc').filter(d => /^\d+$/.test(d))
  } catch {
    return found
  }
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue
    let maps
    try {
      maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8')
    } catch {
      continue // gone, or another user's
    }
    needles.forEach((n, i) => { if (maps.includes(n)) found[i].add(Number(pid)) })
  }
  return found
}

function ownerName (uid) {
  try {
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const parts = line.split(':')
      if (Number(parts[2]) === uid) return parts[0]
    }
  } catch {}
  return String(uid)
}

function spaceNames () {
  let names = []
  try {
    names = fs.readdirSync(DIR)
  } catch {
    return []
  }
  return names.filter(n => n.startsWith(PREFIX) && n.length > PREFIX.length).map(n => n.slice(PREFIX.length)).sort()
}

// { name, file, size, owner, uid, mode, pids, locks } of each space (or of
// `only`).
function describe (only) {
  const names = only === undefined ? spaceNames() : [only]
  const locks = lockCounts()
  const rows = []
  for (const name of names) {
    const st = statOf(name)
    if (st === null) continue
    rows.push({ name, file: fileOf(name), st, size: st.size, owner: ownerName(st.uid), uid: st.uid, mode: '0' + (st.mode & 0o777).toString(8), locks: locks.get(lockName(st)) || 0 })
  }
  const maps = mappers(rows.map(r => r.st))
  rows.forEach((r, i) => { r.pids = [...maps[i]].sort((a, b) => a - b) })
  return rows
}

// ---- output ----

function table (rows) {
  if (rows.length === 0) return ''
  const widths = rows[0].map((_, i) => Math.max(...rows.map(r => String(r[i]).length)))
  return rows.map(r => r.map((c, i) => String(c).padEnd(widths[i])).join('  ').trimEnd()).join('\n') + '\n'
}

const bytes = n => n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`

function party (p) {
  if (p === null || p === undefined) return '-'
  if (p.dead) return 'a dead owner'
  return `pid ${p.pid ?? '?'} thread ${p.threadId ?? '?'}`
}

function stateOf (o) {
  const parts = []
  if ('holder' in o) parts.push(o.holder === null ? 'free' : `held by ${party(o.holder)}`)
  if ('writer' in o) parts.push(o.writer === null ? 'no writer' : `writer ${party(o.writer)}`)
  if (o.readers !== undefined && o.readers.length > 0) parts.push(`${o.readers.length} reader(s): ${o.readers.map(party).join(', ')}`)
  if (o.available !== undefined) parts.push(`${o.available} free` + o.holders.map(h => `; ${party(h)} x${h.tokens}`).join(''))
  if (o.count !== undefined) parts.push(`count ${o.count}`)
  if (o.arrived !== undefined) parts.push(`${o.arrived} arrived${o.broken ? ', broken' : ''}`)
  if (o.done !== undefined) parts.push(o.done ? 'done' : o.running ? `running in ${party(o.running)}` : 'not run')
  if (o.set !== undefined) parts.push(o.set ? 'set' : 'clear')
  if (o.table !== undefined) parts.push(`${o.table.used} of ${o.table.keys} keys tracked${o.table.full ? ' (full)' : ''}`)
  if (o.ownerDied) parts.push('taken over from a dead holder')
  return parts.join('; ') || '-'
}

function showSnapshot (snap) {
  const procs = snap.processes.map(p => `pid ${p.pid ?? '?'} (thread${p.threads.length === 1 ? '' : 's'} ${p.threads.map(t => t.threadId ?? '?').join(', ')})`)
  let out = `space "${snap.name}"  ${snap.file}  ${bytes(snap.size)}  at ${snap.at}\n` +
    `processes attached: ${procs.length === 0 ? 'none' : procs.join(', ')}\n` +
    `owner deaths so far: ${snap.deaths}\n` +
    `objects: ${snap.usage.objects} (${snap.usage.retired} retired), heap ${snap.usage.heapUsed} of ${snap.usage.heapBytes} bytes\n\n`
  const rows = [['KEY', 'KIND', 'PARAMETERS', 'STATE', 'WAITING']]
  for (const o of snap.objects) {
    const params = Object.entries(o.parameters).map(([k, v]) => `${k}=${v}`).join(' ') || '-'
    const waiting = o.waiting === 0 ? '0' : `${o.waiting}: ${o.waiters.map(party).join(', ')}${o.waiting > o.waiters.length ? ', ...' : ''}`
    rows.push([o.key === null ? '(unreadable)' : JSON.stringify(o.key), o.kind + (o.state === 'ready' ? '' : ` (${o.state})`), params, stateOf(o), waiting])
  }
  out += table(rows)
  for (const d of snap.deadlocks) {
    out += '\nDEADLOCK: a cycle of waits\n' + d.parties.map(p =>
      `  ${party(p)} holds ${p.holds.map(k => JSON.stringify(k)).join(', ') || 'nothing'}, waits for ${p.waitsFor.kind} ${JSON.stringify(p.waitsFor.key)}\n`).join('')
  }
  if (snap.unreadable.length > 0) out += '\ncould not be read:\n' + snap.unreadable.map(u => `  ${u}\n`).join('')
  return out
}

// ---- commands ----

function ls (args) {
  const json = flags(args, ['--json'], 0).has('--json')
  const rows = describe()
  if (json) return JSON.stringify(rows.map(r => ({ name: r.name, size: r.size, owner: r.owner, uid: r.uid, mode: r.mode, processes: r.pids, lifelines: r.locks })), null, 2) + '\n'
  return table([['NAME', 'SIZE', 'OWNER', 'MODE', 'PROCESSES'],
    ...rows.map(r => [r.name, bytes(r.size), r.owner, r.mode, r.pids.length === 0 ? (r.locks > 0 ? `${r.locks} lock(s) of processes not shown` : 'none') : r.pids.join(',')])])
}

function inspect (args) {
  const set = flags(args, ['--json'], 1)
  const name = args.find(a => !a.startsWith('--'))
  if (statOf(name) === null) throw new Exit(EXIT.NO_SPACE, `sabsync: no space "${name}" (${fileOf(name)})`)
  const { openShared } = require('..')
  let space
  try {
    space = openShared(name)
  } catch (err) {
    throw new Exit(EXIT.UNREADABLE, `sabsync: cannot open "${name}": ${err.message}`)
  }
  let snap
  try {
    snap = space.inspect()
  } finally {
    // This process opened it to look: it is not one of the processes attached.
    space.close()
  }
  snap.processes = snap.processes.filter(p => p.pid !== process.pid)
  const out = set.has('--json') ? JSON.stringify(snap, null, 2) + '\n' : showSnapshot(snap)
  return snap.deadlocks.length > 0 ? { code: EXIT.DEADLOCK, out } : out
}

function rm (args) {
  const set = flags(args, ['--force'], 1)
  const name = args.find(a => !a.startsWith('--'))
  const [row] = describe(name)
  if (row === undefined) throw new Exit(EXIT.NO_SPACE, `sabsync: no space "${name}" (${fileOf(name)})`)
  if (!set.has('--force') && (row.pids.length > 0 || row.locks > 0)) {
    const who = row.pids.length > 0 ? `process(es) ${row.pids.join(', ')}` : `processes this user cannot see (${row.locks} lock(s) on the file)`
    throw new Exit(EXIT.ATTACHED, `sabsync: "${name}" is in use by ${who}: not removed. ` +
      'Stop them first, or rm --force (they keep using it; a later open makes a new space)')
  }
  try {
    fs.unlinkSync(row.file)
  } catch (err) {
    if (err.code === 'ENOENT') throw new Exit(EXIT.NO_SPACE, `sabsync: no space "${name}"`)
    throw new Exit(EXIT.UNREADABLE, `sabsync: cannot remove ${row.file}: ${err.message}`)
  }
  return `removed "${name}"\n`
}

// The flags among args (each one of `allowed`), and exactly `names` plain
// arguments, else a usage error.
function flags (args, allowed, names) {
  const set = new Set()
  let plain = 0
  for (const a of args) {
    if (a.startsWith('--')) {
      if (!allowed.includes(a)) throw new Exit(EXIT.USAGE, `sabsync: unknown option ${a}\n${USAGE}`)
      set.add(a)
    } else {
      plain++
      if (a.length === 0 || a.includes('/') || a === '.' || a === '..') throw new Exit(EXIT.USAGE, `sabsync: "${a}" cannot name a space\n${USAGE}`)
    }
  }
  if (plain !== names) throw new Exit(EXIT.USAGE, `sabsync: ${names === 0 ? 'no name expected' : 'a space name expected'}\n${USAGE}`)
  return set
}

function main (argv) {
  const [command, ...args] = argv
  const commands = { ls, inspect, rm }
  if (command === '--help' || command === '-h' || command === 'help') return { code: EXIT.OK, out: USAGE + '\n' }
  if (!Object.hasOwn(commands, command ?? '')) return { code: EXIT.USAGE, err: `sabsync: ${command === undefined ? 'a command expected' : `unknown command ${command}`}\n${USAGE}\n` }
  try {
    const r = commands[command](args)
    return typeof r === 'string' ? { code: EXIT.OK, out: r } : r
  } catch (err) {
    if (err instanceof Exit) return { code: err.exitCode, err: err.message + '\n' }
    throw err
  }
}

if (require.main === module) {
  const { code, out, err } = main(process.argv.slice(2))
  if (out) process.stdout.write(out)
  if (err) process.stderr.write(err)
  process.exitCode = code
}

module.exports = { main, EXIT }
