/*
 * Windows parker: the blocking record's own state word, slept on with
 * WaitOnAddress, as the Linux parker sleeps on it with a futex.
 *
 * The algorithm is the futex parker's, sab__park_word (internal.h): the
 * waiter announces its sleep with WAITING -> PARKED and sleeps while the
 * word reads PARKED; a notifier exchanges in the final state under the
 * bucket lock and wakes only if it took PARKED out, after unlocking.
 * WaitOnAddress compares the word with the expected value inside the call,
 * so a final state stored before it sleeps is seen (no lost wake), and a
 * wake that lands on a later wait at the same stack address is a spurious
 * wake, which sab__park_word absorbs by re-reading the state.
 *
 * There are no shared spaces on Windows (binding.gyp compiles them on
 * Linux only), so every word here is this process's: `shared` is never set.
 */
#ifdef SAB_PARKER_WIN

#include "internal.h"

#include <windows.h>

#include <synchapi.h>

static int spin_allowed = -1;

int sab__spin_allowed(void) {
  int a = __atomic_load_n(&spin_allowed, __ATOMIC_RELAXED);
  if (a < 0) {
    DWORD_PTR mine = 0, all = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &mine, &all)) {
      a = __builtin_popcountll((unsigned long long)mine) > 1;
    } else {
      SYSTEM_INFO si;
      GetSystemInfo(&si);
      a = si.dwNumberOfProcessors > 1;
    }
    __atomic_store_n(&spin_allowed, a, __ATOMIC_RELAXED);
  }
  return a;
}

/* The word wait of sab__park_word: sleeps while *word reads `expected`,
 * until a wake or `deadline` (sab_now's clock; UINT64_MAX: none). The
 * timeout is whole milliseconds, rounded up, so the wait never ends before
 * the deadline for the timeout's sake; the caller re-reads the clock. */
void sab__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline, int shared) {
  (void)shared;
  DWORD ms = INFINITE;
  if (deadline != UINT64_MAX) {
    uint64_t now = sab_now();
    if (now >= deadline) return;
    uint64_t d = (deadline - now + 999999u) / 1000000u;
    ms = d >= (uint64_t)INFINITE ? INFINITE - 1 : (DWORD)d;
  }
  (void)WaitOnAddress((volatile VOID *)word, &expected, sizeof expected, ms);
}

void sab__futex_wake(uint32_t *word, int n, int shared) {
  (void)shared;
  if (n == 1) {
    WakeByAddressSingle((PVOID)word);
  } else {
    WakeByAddressAll((PVOID)word);
  }
}

void sab__parker_init(sab_waiter_t *w) { (void)w; }
void sab__parker_destroy(sab_waiter_t *w) { (void)w; }

uint32_t sab__park(sab_waiter_t *w, uint64_t deadline) {
  return sab__park_word(&w->state, deadline, &w->nudged, 0);
}

void *sab__unpark_locked(sab_waiter_t *w, uint32_t state) {
  uint32_t old = __atomic_exchange_n(&w->state, state, __ATOMIC_SEQ_CST);
  return old == SAB_W_PARKED ? (void *)&w->state : NULL;
}

void sab__unpark(void *token) {
  if (token != NULL) sab__futex_wake(token, 1, 0);
}

#endif /* SAB_PARKER_WIN */
