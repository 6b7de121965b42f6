/*
 * The bookkeeping locks of a space (a bucket's, the directory's): one word
 * of the space each,
 *
 *   bits 0-29  holder  the owner id holding it (0: free)
 *   bit  31    W       someone may sleep on the word: the unlocker wakes one
 *
 * The word is written by anyone (a co-tenant may scribble it), so nothing
 * about it is believed beyond what the kernel holds: a holder is waited
 * for only while its lifeline is held (lifeline.c), and for no longer than
 * the thread's lock deadline. A holder found dead, or a word that names no
 * owner, is taken over with a compare-exchange from the very value read,
 * and the taker repairs what the lock guards (answer 1). A holder that
 * lives and never lets go costs the waiter its deadline, then an error:
 * never a hang. Nothing in the word is a pointer (a robust pthread mutex
 * would keep glibc's list pointers here, which a co-tenant could aim).
 *
 * Below it: space_sys.c (futexes), lifeline.c (probes); above it: the
 * queues and the directory (the layers: space_layout.h).
 */
#define _GNU_SOURCE
#include "space_lock.h"

#if defined(__linux__)

static __thread uint64_t lock_deadline = UINT64_MAX;

uint64_t sab_space_deadline(uint64_t deadline) {
  uint64_t old = lock_deadline;
  lock_deadline = deadline;
  return old;
}

uint64_t sab__slock_deadline(void) {
  if (lock_deadline != UINT64_MAX) return lock_deadline;
  return sab_now() + SAB_SLOCK_BOUND_NS;
}

/* How long a waiter sleeps before it asks whether the holder still lives:
 * a live holder's critical section is a few microseconds, so a holder that
 * keeps it this long was preempted, or died. */
#define PROBE_NS (2ull * 1000000ull)

int sab__slock(sab_space_t *sp, uint32_t *w, uint32_t me) {
  uint32_t zero = 0, slot0, gen0;
  if (!sab__id_parts(me, &slot0, &gen0)) return -1; /* no owner to hold it */
  if (__atomic_compare_exchange_n(w, &zero, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return 0;
  for (int k = 0; k < 64; k++) {
    sab_cpu_relax();
    zero = 0;
    if (__atomic_load_n(w, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(w, &zero, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      return 0;
    }
  }
  uint64_t deadline = sab__slock_deadline();
  int slept = 0;
  for (;;) {
    uint32_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    sab__fuzz_after_read(w);
    if (v == 0) {
      /* Taken with W: others may still sleep on the word. */
      if (__atomic_compare_exchange_n(w, &v, me | SLOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        return 0;
      }
      continue;
    }
    uint32_t holder = v & ~SLOCK_WAITERS, slot, gen;
    /* A word that names no owner was scribbled (ours never holds one); a
     * holder probed only after a sleep, so that a running holder costs no
     * system call. */
    int dead = !sab__id_parts(holder, &slot, &gen) || (slept && sab__slot_alive(sp, holder) <= 0);
    if (dead) {
      if (__atomic_compare_exchange_n(w, &v, me | SLOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        return 1;
      }
      continue;
    }
    if (!(v & SLOCK_WAITERS) && !__atomic_compare_exchange_n(w, &v, v | SLOCK_WAITERS, 0,
                                                             __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      continue;
    }
    uint64_t now = sab_now();
    if (now >= deadline) return -1;
    uint64_t until = now + PROBE_NS < deadline ? now + PROBE_NS : deadline;
    sab__futex_wait(w, v | SLOCK_WAITERS, until, 1);
    slept = sab_now() >= until;
  }
}

void sab__sunlock(uint32_t *w) {
  uint32_t old = __atomic_exchange_n(w, 0, __ATOMIC_RELEASE);
  if (old & SLOCK_WAITERS) sab__futex_wake(w, 1, 1);
}

#endif /* __linux__ */
