// What must not compile: each line after a `@ts-expect-error` is a mistake
// that index.d.ts refuses (test/types.test.js checks that each of these
// lines is an error on its own, and that nothing else in the file is).
import { wait, waitAsync, notify, Mutex, Sema, RateLimit, Latch, openShared, locks } from 'sabsync'
import type { SharedHandle, Lock } from 'sabsync'

const i32 = new Int32Array(new SharedArrayBuffer(8))
const big = new BigInt64Array(new SharedArrayBuffer(16))
const either: Int32Array | BigInt64Array = Math.random() < 0.5 ? i32 : big

// @ts-expect-error a bigint for an Int32Array's cell
wait(i32, 0, 0n)
// @ts-expect-error a number for a BigInt64Array's cell
wait(big, 0, 0)
// @ts-expect-error a bigint for an Int32Array's cell
waitAsync(i32, 0, 1n, 10)
// @ts-expect-error a number for a BigInt64Array's cell
waitAsync(big, 0, 1, 10)
// @ts-expect-error not an array sabsync can wait on
notify(new Float64Array(4), 0)
wait(either, 0, Math.random() < 0.5 ? 0 : 0n) // a union: either value kind

async function tokens (): Promise<void> {
  const sema = new Sema(2)
  const sure: number = await sema.acquire() // no timeout: always a token
  const alsoSure: number = await sema.acquire({ signal: AbortSignal.timeout(50) })
  // @ts-expect-error with a timeout, acquire may resolve undefined
  const maybe: number = await sema.acquire({ timeout: 5 })
  // @ts-expect-error the same for acquireSync
  const maybeSync: number = sema.acquireSync(5)
  const blocking: number = sema.acquireSync()
  // @ts-expect-error drain with a timeout may leave some undefined
  const all: number[] = await sema.drain({ timeout: 5 })
  // @ts-expect-error a token of another type
  sema.release('slot 0')
  const limit = RateLimit(2)
  // @ts-expect-error sync with a timeout may answer undefined
  const at: number = limit.sync(5)
  void [sure, alsoSure, maybe, maybeSync, blocking, all, at]
}
void tokens

const sab = new SharedArrayBuffer(64)
// @ts-expect-error a buffer where options go: pass { buffer: sab, byteOffset }
void new Mutex(sab)
// @ts-expect-error the same for a primitive that takes a count first
void new Latch(1, sab)
// @ts-expect-error from() needs the handle, not the bare buffer
Mutex.from(sab)
// @ts-expect-error the options of from() are the handle's, not memory options
Sema.from({ byteOffset: 0 })
void new Mutex({ buffer: sab, byteOffset: 16 }) // the right way

function spaces (): void {
  const s = openShared('types-mistakes')
  // @ts-expect-error a space's object is no SharedHandle: its buffer may be an ArrayBuffer
  Mutex.from(s.mutex('lock'))
  // @ts-expect-error nor does a space's RateLimit have a handle to post
  RateLimit.from(s.rateLimit('api', 10).handle)
  // @ts-expect-error a space's Sema is no handle either
  Sema.from(s.sema('pool', 2))
  // @ts-expect-error nor to be typed as one (it would then be posted)
  const posted: SharedHandle = s.latch('l', 1)
  // @ts-expect-error a space's object is of its own class, not another's
  const wrong: Latch = s.mutex('lock')
  // @ts-expect-error versioned is a boolean
  openShared('types-mistakes', { versioned: 1 })
  void [posted, wrong]
}
void spaces

// Web Locks
// @ts-expect-error a mode the spec does not have
void locks.request('x', { mode: 'read' }, () => 1)
// @ts-expect-error with ifAvailable the callback may receive null
void locks.request('x', { ifAvailable: true }, (lock: Lock) => lock.name)
