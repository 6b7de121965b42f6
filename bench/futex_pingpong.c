/*
 * The floor for a wait/notify hand-off between two threads: a raw futex
 * ping-pong in C, no spinning. Built and run by bench/cases/atomics.js.
 * Usage: futex_pingpong ROUNDS  -> prints ns per round trip.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int seq;
static long rounds;

static void fwait(int *addr, int val) {
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void fwake(int *addr) { syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static void *pong(void *arg) {
  (void)arg;
  for (long k = 0; k < rounds; k++) {
    int want = (int)(2 * k + 1);
    while (__atomic_load_n(&seq, __ATOMIC_SEQ_CST) != want) fwait(&seq, want - 1);
    __atomic_store_n(&seq, want + 1, __ATOMIC_SEQ_CST);
    fwake(&seq);
  }
  return NULL;
}

int main(int argc, char **argv) {
  rounds = argc > 1 ? atol(argv[1]) : 100000;
  pthread_t t;
  pthread_create(&t, NULL, pong, NULL);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long k = 0; k < rounds; k++) {
    int mine = (int)(2 * k + 1);
    __atomic_store_n(&seq, mine, __ATOMIC_SEQ_CST);
    fwake(&seq);
    while (__atomic_load_n(&seq, __ATOMIC_SEQ_CST) != mine + 1) fwait(&seq, mine);
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  pthread_join(t, NULL);
  double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  printf("%.1f %d\n", ns / (double)rounds, seq == 2 * rounds);
  return 0;
}
