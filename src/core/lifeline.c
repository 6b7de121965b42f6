/*
 * Owners of a space: thread slots, their lifelines, and deaths.
 *
 * A registered thread holds its slot's lifeline (a robust, process-shared
 * pthread mutex) from sab_space_register to sab_space_unregister. The
 * kernel marks the lifelines of a thread that ends without unlocking them
 * (SIGKILL of its process included): the next trylock answers EOWNERDEAD.
 * So liveness is one trylock, a userspace compare-exchange that fails with
 * EBUSY while the owner lives; nothing polls, and nobody asks the dead.
 *
 * The slot word:
 *
 *   bits 2-31  gen    generation of the slot's current or last tenant,
 *                     1 .. GEN_MAX (0: never used)
 *   bits 0-1   state  SLOT_LIVE while its tenant is registered, SLOT_FREE
 *
 * The owner id of a tenant is gen << SLOT_BITS | slot. Written only by the
 * holder of the lifeline (a registrant, the thread itself when it
 * unregisters), or by whoever buries the tenant after finding its lifeline
 * abandoned, with a compare-exchange from that very LIVE value.
 *
 * Invariants:
 *  O1 A slot word says LIVE with gen g only while the tenant g holds the
 *     lifeline, or after it died and before it is buried. A registrant takes
 *     the lifeline before it writes LIVE; an unregistering thread writes
 *     FREE before it lets go. So LIVE with the lifeline free, or abandoned
 *     (EOWNERDEAD), means: dead, not yet buried.
 *  O2 Burial raises the space's death epoch before the slot word changes
 *     and before any watcher is told (space_owners.c, which visits the
 *     queues after sab__slot_mark_dead). A waiter
 *     compares the epoch it read before it looked at an owner with the one
 *     under its bucket lock (space_lot.c), so either it sees the death, or
 *     the visit of its bucket finds its record. A burier that dies half-way
 *     has raised the epoch at least, which waiters that re-check
 *     periodically see (the binding does).
 *  O3 Generations only grow (mod GEN_MAX, skipping 0): a dead id never comes
 *     back before GEN_MAX more tenants of its slot.
 *
 * Shared words read here:
 *
 *   word       read by                checked / used as
 *   slot.word  alive, reap, register  compared with LIVE | gen of the id asked
 *                                     about; gen taken from it only to make the
 *                                     next one (masked, wrapped to 1..GEN_MAX)
 *   lifeline   every probe            glibc's: trylock only, never a blocking
 *                                     lock, so a lifeline that is not a mutex any
 *                                     more answers an error, taken as "alive"
 *   doorbell   the waker (binding)    a futex value; compared only
 *
 * Slots are reached only by ids checked with sab__id_parts (slot < NSLOTS).
 *
 * This file only probes and marks slots; telling the watchers of a death
 * (visiting the queues) is space_owners.c's, above the queues, so that the
 * queues can probe owners here without a circle of calls.
 */
#define _GNU_SOURCE
#include "space_internal.h"
#include "glibc_old.h"

#if defined(__linux__)

#include <errno.h>
#include <unistd.h>

static uint32_t live_word(uint32_t gen) { return gen << 2 | SLOT_LIVE; }

int sab__slot_mark_dead(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return 0;
  /* Marked already (by another prober, or the slot's new tenant): the
   * epoch stays, so that waiters are not woken for nothing. */
  if (sab__ld(&sab__slot(sp, i)->word) != live_word(gen)) return 0;
  /* O2: the epoch first. */
  __atomic_fetch_add(sab__epoch(sp), 1, __ATOMIC_SEQ_CST);
  uint32_t expected = live_word(gen);
  return __atomic_compare_exchange_n(&sab__slot(sp, i)->word, &expected, gen << 2 | SLOT_FREE, 0,
                                     __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/* Probe the lifeline of slot i. Answers 1 (held: its tenant lives), or 0
 * (abandoned or free: the lifeline was taken and let go again). */
static int probe(sab__slot_t *s) {
  int r = pthread_mutex_trylock(&s->lifeline);
  if (r == EBUSY || r == EDEADLK) return 1; /* EDEADLK: our own */
  if (r == EOWNERDEAD) {
    pthread_mutex_consistent(&s->lifeline);
  } else if (r != 0) {
    return 1; /* not a mutex any more: no evidence of a death */
  }
  pthread_mutex_unlock(&s->lifeline);
  return 0;
}

int sab__slot_alive(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return 0;
  sab__slot_t *s = sab__slot(sp, i);
  if (sab__ld(&s->word) != live_word(gen)) return 0;
  return probe(s) ? 1 : -1; /* -1: O1, LIVE and its lifeline not held: dead, unburied */
}

int sab__space_alive_locked(sab_space_t *sp, uint32_t id, sab__deaths_t *dead) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return 0;
  sab__slot_t *s = sab__slot(sp, i);
  if (sab__ld(&s->word) != live_word(gen)) return 0;
  if (probe(s)) return 1;
  /* Buried by the caller's caller after the bucket lock is released
   * (burial visits every bucket); until then the slot still says LIVE and
   * any other prober may bury it first. */
  if (dead->n < sizeof dead->ids / sizeof dead->ids[0]) dead->ids[dead->n++] = id;
  return 0;
}

uint32_t sab__slot_live_id(sab_space_t *sp, uint32_t i) {
  uint32_t w = sab__ld(&sab__slot(sp, i)->word), gen = w >> 2;
  if ((w & 3u) != SLOT_LIVE || gen == 0 || gen > GEN_MAX) return 0;
  return gen << SLOT_BITS | i;
}

int sab__slot_claim(sab_space_t *sp, uint32_t *id, uint32_t *unburied) {
  /* Start the search where other threads are unlikely to be looking. */
  uint32_t start =
      ((uint32_t)getpid() * 2654435761u + (uint32_t)((uintptr_t)pthread_self() >> 12)) % NSLOTS;
  *unburied = 0;
  for (uint32_t k = 0; k < NSLOTS; k++) {
    uint32_t i = (start + k) % NSLOTS;
    sab__slot_t *s = sab__slot(sp, i);
    int r = pthread_mutex_trylock(&s->lifeline);
    if (r == EOWNERDEAD) {
      pthread_mutex_consistent(&s->lifeline);
    } else if (r != 0) {
      continue; /* held by a live tenant (or not a mutex) */
    }
    uint32_t w = sab__ld(&s->word), gen = (w >> 2) & 0x3FFFFFFFu;
    if ((w & 3u) == SLOT_LIVE && gen >= 1 && gen <= GEN_MAX) {
      /* A tenant that died unburied: the caller tells its watchers. */
      uint32_t old = gen << SLOT_BITS | i;
      if (sab__slot_mark_dead(sp, old)) *unburied = old;
    }
    gen = gen >= GEN_MAX ? 1 : gen + 1;
    __atomic_store_n(&s->pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&s->word, live_word(gen), __ATOMIC_SEQ_CST);
    *id = gen << SLOT_BITS | i;
    return 0;
  }
  return SAB_E_SPACE_FULL;
}

void sab__slot_leave(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (sab__id_parts(id, &i, &gen)) pthread_mutex_unlock(&sab__slot(sp, i)->lifeline);
}

uint32_t *sab_space_doorbell(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return NULL;
  return &sab__slot(sp, i)->doorbell;
}

void sab_space_doorbell_wait(sab_space_t *sp, uint32_t id, uint32_t seen, uint64_t deadline) {
  uint32_t *bell = sab_space_doorbell(sp, id);
  if (bell != NULL) sab__futex_wait_shared(bell, seen, deadline);
}

void sab_space_doorbell_ring(sab_space_t *sp, uint32_t id) {
  uint32_t *bell = sab_space_doorbell(sp, id);
  if (bell == NULL) return;
  __atomic_fetch_add(bell, 1, __ATOMIC_SEQ_CST);
  sab__futex_wake_shared(bell, 1 << 30);
}

#endif /* __linux__ */
