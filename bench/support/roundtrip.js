'use strict'
// A standalone driver for the worker<->worker wait/notify round trip (the
// ping-pong of bench/cases/atomics.js), for profiling it (perf, strace) and
// for comparing two builds of sabsync in one interleaved run:
//
//   taskset -c 0 node bench/support/roundtrip.js [--rounds N] [--repeats R]
//       [--impl sabsync|atomics] [ROOT ...]
//
// Each ROOT is a sabsync package directory (default: this checkout); with
// several, their runs alternate (ROOT1, ROOT2, ..., ROOT1, ...) so that a
// change in the machine's load hits them alike. `--impl atomics` runs
// Atomics.wait/notify instead (once per repeat, whatever the roots), and
// `--impl futex` the raw C futex ping-pong (bench/futex_pingpong.c, five
// times the rounds); `--impl sabsync,atomics,futex` all of them. Prints one
// line per run and the medians, in microseconds per round trip.
const path = require('path')
const { Worker } = require('worker_threads')
const { pingPongSource, futexPingPong } = require('./pingpong')

const args = process.argv.slice(2)
const valueOf = (flag, dflt) => args.includes(flag) ? args[args.indexOf(flag) + 1] : dflt
const rounds = Number(valueOf('--rounds', 20000))
const repeats = Number(valueOf('--repeats', 1))
const impls = valueOf('--impl', 'sabsync').split(',')
const VALUED = ['--rounds', '--repeats', '--impl']
const roots = args.filter((a, i) => !a.startsWith('--') && !VALUED.includes(args[i - 1])).map(r => path.resolve(r))
if (roots.length === 0) roots.push(path.join(__dirname, '..', '..'))

function futex () {
  const { us, ok } = futexPingPong(5 * rounds)
  if (!ok) throw new Error('futex ping-pong: wrong final count')
  return us
}

async function once (impl, root) {
  if (impl === 'futex') return { us: futex(), cpu: NaN }
  const sab = new SharedArrayBuffer(8)
  const src = pingPongSource(impl, root)
  const ws = ['ping', 'pong'].map(role => new Worker(src, { eval: true, workerData: { sab, role, rounds } }))
  const next = w => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  await Promise.all(ws.map(next))
  const done = ws.map(next)
  const cpu0 = process.cpuUsage()
  Atomics.store(new Int32Array(sab), 1, 1)
  Atomics.notify(new Int32Array(sab), 1)
  const msgs = await Promise.all(done)
  const cpu = process.cpuUsage(cpu0)
  await Promise.all(ws.map(w => w.terminate()))
  if (Atomics.load(new Int32Array(sab), 0) !== 2 * rounds) throw new Error('wrong final count')
  // The process's CPU time over all the rounds (the warm-up too), per round
  // trip: what the threads ran, whoever else shared the CPU meanwhile.
  return { us: msgs[0].ns / 1000, cpu: (cpu.user + cpu.system) / rounds }
}

const median = xs => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2 }

async function main () {
  const subjects = []
  for (const impl of impls) {
    if (impl === 'sabsync') for (const root of roots) subjects.push({ label: 'sabsync ' + root, impl, root })
    else subjects.push({ label: impl, impl, root: roots[0] })
  }
  const got = subjects.map(() => [])
  const cpus = subjects.map(() => [])
  for (let r = 0; r < repeats; r++) {
    for (let i = 0; i < subjects.length; i++) {
      const { us, cpu } = await once(subjects[i].impl, subjects[i].root)
      got[i].push(us)
      cpus[i].push(cpu)
      console.log(`run ${r + 1} ${subjects[i].label}: ${us.toFixed(2)} us/rt, cpu ${cpu.toFixed(2)} us/rt`)
    }
  }
  console.log(`load ${require('os').loadavg().map(x => x.toFixed(2)).join(' ')}`)
  subjects.forEach((s, i) => console.log(`median ${s.label}: ${median(got[i]).toFixed(2)} us/rt (min ${Math.min(...got[i]).toFixed(2)}), cpu ${median(cpus[i]).toFixed(2)} us/rt`))
}

main().catch(e => { console.error(e); process.exit(1) })
