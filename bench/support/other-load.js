'use strict'
// Other CPU use over a stretch of the run: how many CPUs' worth of time
// work other than this benchmark (this process and the children it waited
// for) kept busy, from the kernel's counters. A row measured while other
// work took much of the machine is noise, not a regression: the table says
// so in its "other CPU" column. Linux only (/proc); elsewhere null.
const fs = require('fs')
const { spawnSync } = require('child_process')

let tick = null // clock ticks per second of /proc's counters
function ticksPerSecond () {
  if (tick === null) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })
    tick = Number(r.stdout) > 0 ? Number(r.stdout) : 100
  }
  return tick
}

// { busy, own, at }: the machine's busy ticks (all CPUs; idle and iowait
// left out), this process's and its waited-for children's ticks, and when.
function sample () {
  try {
    const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal (guest is in user)
    const busy = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + cpu[7]
    const self = fs.readFileSync('/proc/self/stat', 'utf8')
    const f = self.slice(self.lastIndexOf(')') + 2).split(' ').map(Number)
    // f[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17
    const own = f[11] + f[12] + f[13] + f[14]
    return { busy, own, at: process.hrtime.bigint() }
  } catch {
    return null
  }
}

// CPUs of other work between two samples (0 … the machine's CPUs), or null.
function otherCpus (a, b) {
  if (a === null || b === null) return null
  const secs = Number(b.at - a.at) / 1e9
  if (!(secs > 0)) return null
  const other = (b.busy - a.busy) - (b.own - a.own)
  return Math.max(0, other / ticksPerSecond() / secs)
}

// The machine's speed, which other CPU use cannot show: a virtual
// machine's host may take or slow its CPUs (one vCPU of the development
// machine once ran memory- and Atomics-heavy JS 1.3-1.65× slower than the
// other, while a pure arithmetic loop ran as fast on both), and a row then
// measures the host. A fixed piece of work of the kind the cases do
// (compare-and-swap, a seq-cst store, typed-array reads, an array used as
// a stack), timed on each CPU: the least of 15 tries, in ns.
const CALIBRATE = `
const cell = new Int32Array(new SharedArrayBuffer(16))
const held = []
function once () {
  let x = 1
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < 20000; i++) {
    if (Atomics.compareExchange(cell, 1, 0, 7) === 0) { held.push(i); x += cell[2] }
    x = Math.imul(x, 31) + held.pop() | 0
    Atomics.store(cell, 1, 0)
  }
  return Number(process.hrtime.bigint() - t0) + (x === 0.5 ? 1 : 0)
}
function calibrate (tries) {
  let best = Infinity
  for (let t = 0; t < tries; t++) best = Math.min(best, once())
  return best
}`

// The same work on each CPU in turn (a child pinned with taskset), in ns:
// [cpu0, cpu1, ...], or null where taskset is missing.
function calibrateEach (cpus) {
  const out = []
  for (let i = 0; i < cpus; i++) {
    const r = spawnSync('taskset', ['-c', String(i), process.execPath, '-e', CALIBRATE + '\ncalibrate(5); console.log(calibrate(15))'], { encoding: 'utf8' })
    if (r.status !== 0) return null
    out.push(Number(r.stdout.trim()))
  }
  return out
}

module.exports = { sample, otherCpus, calibrateEach }
