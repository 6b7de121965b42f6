// Compiled with `tsc --noEmit --strict` by test/package.test.js against the
// installed package: every export used as the README shows it.
import sabsync, { wait, waitAsync, notify, waiters, SabsyncError } from 'sabsync'
import type { WaitAsyncResult, SharedHandle, MemoryOptions, AsyncOptions } from 'sabsync'

const ta = new Int32Array(new SharedArrayBuffer(8))
const big = new BigInt64Array(new SharedArrayBuffer(16))

const r1: 'ok' | 'not-equal' | 'timed-out' = wait(ta, 0, 0, 10)
const r2: WaitAsyncResult = waitAsync(big, 1, 0n, 10, { signal: AbortSignal.timeout(100), ref: false })
async function f (): Promise<void> {
  if (r2.async) {
    const v: 'ok' | 'timed-out' = await r2.value
    void v
  }
}
const n: number = notify(ta, 0, 1) + waiters(ta, 0) + sabsync.notify(big, 0)
const e: SabsyncError = new SabsyncError()
const code: string = e.code
const h: SharedHandle = { buffer: new SharedArrayBuffer(8), byteOffset: 0 }
const m: MemoryOptions = h
const o: AsyncOptions = { timeout: 5 }
void [r1, f, n, code, m, o]
