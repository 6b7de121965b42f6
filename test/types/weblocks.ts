// The Web Locks API of the threads tier: request's overloads and query's answer.
import { locks, openShared } from 'sabsync'
import type { Lock, LockInfo, LockManager } from 'sabsync'

async function use (manager: LockManager): Promise<void> {
  const n: number = await manager.request('order:1', (lock: Lock) => lock.name.length)
  const s: string = await manager.request('cache', { mode: 'shared' }, async lock => lock.mode)
  const maybe: boolean = await manager.request('cache', { ifAvailable: true }, lock => lock !== null)
  const ac = new AbortController()
  await manager.request('slow', { signal: ac.signal }, () => undefined)
  await manager.request('mine', { steal: true }, lock => lock.mode === 'exclusive')
  const { held, pending } = await manager.query()
  const first: LockInfo | undefined = held[0] ?? pending[0]
  console.log(n, s, maybe, first?.clientId)
}

void use(locks)

void use(openShared('types-only').locks)
