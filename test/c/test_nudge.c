/*
 * Nudges (sab_nudge_all) racing a waiter on its way to sleep. Built with
 * SAB_SPIN_NS=0 (test/c/Makefile): without the spin, the waiter goes from
 * its enqueue to its futex wait in about a microsecond, and the nudges,
 * sent after a delay that sweeps that span, land all along it.
 */
#define _POSIX_C_SOURCE 200809L
#include "sabsync.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>

/*
 * Each nudge must bring the waiter back long before its deadline. Every
 * 64th round the waiter parks again, briefly, on the same record: the
 * nudge it saw must not make that park return before its deadline.
 */
enum { NUDGE_ROUNDS = 4000 };
static int32_t nudge_cell;
static int nudge_go, nudge_done; /* atomic: rounds started and finished */
static int nudge_late, nudge_early;

static void *nudge_racer(void *p) {
  (void)p;
  for (int i = 1; i <= NUDGE_ROUNDS; i++) {
    while (__atomic_load_n(&nudge_go, __ATOMIC_ACQUIRE) != i) sab_cpu_relax();
    sab_waiter_t w;
    sab_waiter_init_blocking(&w);
    CHECK(sab_wait_enqueue(&w, &nudge_cell, 4, 0) == SAB_PENDING);
    uint64_t far = sab_now() + 1000 * MS;
    CHECK(sab_wait_park(&w, far) == SAB_PENDING);
    if (sab_now() >= far) nudge_late++; /* slept through the nudge */
    if (i % 64 == 0) {
      uint64_t near = sab_now() + 2 * MS;
      CHECK(sab_wait_park(&w, near) == SAB_PENDING);
      if (sab_now() < near) nudge_early++;
    }
    CHECK(sab_wait_cancel(&w, SAB_CANCELLED) == SAB_CANCELLED);
    sab_waiter_destroy(&w);
    __atomic_store_n(&nudge_done, i, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void test_nudge_races_park(void) {
  pthread_t t;
  pthread_create(&t, NULL, nudge_racer, NULL);
  for (int i = 1; i <= NUDGE_ROUNDS; i++) {
    __atomic_store_n(&nudge_go, i, __ATOMIC_RELEASE);
    while (sab_waiters((uintptr_t)&nudge_cell) != 1) sab_cpu_relax();
    for (volatile int d = 0; d < (i * 7) % 3000; d++) {
    }
    sab_nudge_all();
    while (__atomic_load_n(&nudge_done, __ATOMIC_ACQUIRE) != i) sched_yield();
  }
  pthread_join(t, NULL);
  CHECK(nudge_late == 0);
  CHECK(nudge_early == 0);
  printf("# nudges racing a park: %d of %d slept through, %d re-parks returned early\n", nudge_late,
         NUDGE_ROUNDS, nudge_early);
}

int main(void) {
  test_nudge_races_park();
  return report("test_nudge");
}
