/*
 * The futex, once: a wait with an absolute CLOCK_MONOTONIC deadline and a
 * wake, each with its memory as a flag, as musl passes `priv` down one
 * path. Private (FUTEX_PRIVATE_FLAG): the lot's records, words of this
 * process, keyed by address. Shared: a space's words, keyed by the page's
 * file and offset, so a wake from another process's mapping of the same
 * bytes reaches the sleeper (measured: a private one does not).
 *
 * Linux only: the futex parker (parker_futex.c) and a shared space (its
 * layers, space_layout.h) are its callers; the portable parker does not
 * sleep on words.
 */
#define _GNU_SOURCE
#include "internal.h"

#if defined(__linux__)

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void sab__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline, int shared) {
  struct timespec ts, *tsp = NULL;
  if (deadline != UINT64_MAX) {
    ts.tv_sec = (time_t)(deadline / 1000000000u);
    ts.tv_nsec = (long)(deadline % 1000000000u);
    tsp = &ts;
  }
  /* FUTEX_WAIT_BITSET: the deadline is absolute, on CLOCK_MONOTONIC. */
  syscall(SYS_futex, word, FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG), expected, tsp,
          NULL, FUTEX_BITSET_MATCH_ANY);
}

void sab__futex_wake(uint32_t *word, int n, int shared) {
  syscall(SYS_futex, word, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), n, NULL, NULL, 0);
}

#endif /* __linux__ */
