/*
 * Owner ids and their deaths.
 *
 * Ids count up from 1 and are never reused, so a dead id stays dead. The
 * dead set is a two-level bitmap: 1024 lazily allocated chunks of 2^20 bits
 * (128 KiB) cover ids below 2^30, the most a lock word's owner field holds.
 * Chunks are published with a release store and never freed, so readers
 * need no lock. The death epoch counts deaths; see sab_wait_enqueue_watch.
 * This file knows nothing of the lot: sab_owner_died (lot.c) marks the id
 * here, then wakes the lot's watchers.
 */
#include "internal.h"

#include <stdlib.h>

#define CHUNK_BITS 20
#define CHUNKS     1024u
#define MAX_ID     (CHUNKS << CHUNK_BITS)

static uint32_t next_id = 1;
static uint32_t death_epoch;
static uint64_t *chunks[CHUNKS];
static pthread_mutex_t chunks_mu = PTHREAD_MUTEX_INITIALIZER;

uint32_t sab_owner_new(void) {
  uint32_t id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
  /* Past 2^30 ids (a process that started a billion threads), ids no
   * longer fit a lock word: refuse rather than wrap and reuse. */
  return id < MAX_ID ? id : 0;
}

int sab_owner_alive(uint32_t id) {
  if (id == 0 || id >= MAX_ID) return 0;
  uint64_t *c = __atomic_load_n(&chunks[id >> CHUNK_BITS], __ATOMIC_ACQUIRE);
  if (c == NULL) return 1;
  uint32_t bit = id & ((1u << CHUNK_BITS) - 1);
  return (__atomic_load_n(&c[bit / 64], __ATOMIC_ACQUIRE) & ((uint64_t)1 << (bit % 64))) == 0;
}

uint32_t sab_death_epoch(void) { return __atomic_load_n(&death_epoch, __ATOMIC_SEQ_CST); }

void sab__owner_mark_dead(uint32_t id) {
  if (id == 0 || id >= MAX_ID) return;
  uint64_t **slot = &chunks[id >> CHUNK_BITS];
  uint64_t *c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (c == NULL) {
    if (pthread_mutex_lock(&chunks_mu) != 0) abort();
    c = *slot;
    if (c == NULL) {
      c = calloc((1u << CHUNK_BITS) / 64, sizeof *c);
      if (c == NULL) abort(); /* 128 KiB, once per million ids */
      __atomic_store_n(slot, c, __ATOMIC_RELEASE);
    }
    if (pthread_mutex_unlock(&chunks_mu) != 0) abort();
  }
  uint32_t bit = id & ((1u << CHUNK_BITS) - 1);
  __atomic_fetch_or(&c[bit / 64], (uint64_t)1 << (bit % 64), __ATOMIC_SEQ_CST);
  /* The mark, then the epoch; sab_owner_died (lot.c) then visits every
   * bucket. */
  __atomic_fetch_add(&death_epoch, 1, __ATOMIC_SEQ_CST);
}
