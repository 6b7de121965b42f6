/*
 * Owners of a space: thread slots, their lifelines, and deaths.
 *
 * A registered thread holds its slot's lifeline from sab_space_register to
 * sab_space_unregister: an OFD lock (fcntl F_OFD_SETLK, a write lock) on
 * byte LIFELINE_OFF + i of the space's file, taken through an open file
 * description of the thread's own (a fresh open of /proc/self/fd/N of the
 * process's description: the same file, whatever has become of its name).
 * The kernel keeps the lock with the description and drops it when the
 * description is closed: by the thread when it unregisters, or by the
 * kernel when the process dies (SIGKILL included). A probe asks the kernel
 * through the process's probe description, which holds nothing
 * (F_OFD_GETLK: any other description's lock conflicts with it, this
 * process's own included). The lock is not in the shared memory, so a
 * co-tenant that writes the space can neither forge a death nor follow,
 * or make us follow, anything in it.
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
 * free, with a compare-exchange from that very LIVE value.
 *
 * Invariants:
 *  O1 A slot word says LIVE with gen g only while the tenant g holds the
 *     lifeline, or after it died and before it is buried. A registrant takes
 *     the lifeline before it writes LIVE; an unregistering thread writes
 *     FREE before it lets go. So LIVE with the lifeline free means: dead,
 *     not yet buried.
 *  O2 Burial raises the space's death epoch before the slot word changes
 *     and before any watcher is told (space_owners.c, which visits the
 *     queues after sab__slot_mark_dead). A waiter compares the epoch it
 *     read before it looked at an owner with the one under its bucket lock
 *     (space_lot.c), so either it sees the death, or the visit of its
 *     bucket finds its record. A burier that dies half-way has raised the
 *     epoch at least, which waiters that re-check periodically see (the
 *     binding does).
 *  O3 Generations only grow (mod GEN_MAX, skipping 0): a dead id never comes
 *     back before GEN_MAX more tenants of its slot.
 *
 * Shared words read here:
 *
 *   word       read by                checked / used as
 *   slot.word  alive, reap, register  compared with LIVE | gen of the id asked
 *                                     about; gen taken from it only to make the
 *                                     next one (masked, wrapped to 1..GEN_MAX)
 *   doorbell   the waker (binding)    a futex value; compared only
 *
 * A co-tenant can still hold OFD locks on slot bytes itself (a lifeline
 * that looks held forever, or no free slot): that breaks liveness for that
 * space's objects (waits last until their timeouts, SAB_E_SPACE_FULL), and
 * nothing else.
 *
 * Slots are reached only by ids checked with sab__id_parts (slot < NSLOTS).
 *
 * This file only probes and marks slots; telling the watchers of a death
 * (visiting the queues) is space_owners.c's, above the queues, so that the
 * queues can probe owners here without a circle of calls.
 */
#define _GNU_SOURCE
#include "lifeline.h"
#include "glibc_old.h"

#if defined(__linux__)

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef F_OFD_GETLK
#define F_OFD_GETLK  36
#define F_OFD_SETLK  37
#define F_OFD_SETLKW 38
#endif

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

/* Lifeline locks: one byte each, write locks, never waited for. */
static int lifeline_lock(int fd, int cmd, uint32_t i, struct flock *fl) {
  memset(fl, 0, sizeof *fl);
  fl->l_type = F_WRLCK;
  fl->l_whence = SEEK_SET;
  fl->l_start = (off_t)(LIFELINE_OFF + i);
  fl->l_len = 1;
  return sab__fcntl_lock(fd, cmd, fl);
}

static void lifeline_unlock(int fd, uint32_t i) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_UNLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = (off_t)(LIFELINE_OFF + i);
  fl.l_len = 1;
  sab__fcntl_lock(fd, F_OFD_SETLK, &fl);
}

/* Whether slot i's lifeline is held: 1 (its tenant lives), or 0. A slot
 * this process's thread holds is known without asking the kernel. A probe
 * that fails is no evidence of a death. */
static int probe(sab_space_t *sp, uint32_t i) {
  struct flock fl;
  if (__atomic_load_n(&sp->slot_fd[i], __ATOMIC_ACQUIRE) >= 0) return 1;
  if (lifeline_lock(sp->probe_fd, F_OFD_GETLK, i, &fl) != 0) return 1;
  return fl.l_type != F_UNLCK;
}

int sab__slot_alive(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return 0;
  sab__slot_t *s = sab__slot(sp, i);
  if (sab__ld(&s->word) != live_word(gen)) return 0;
  return probe(sp, i) ? 1 : -1; /* -1: O1, LIVE and its lifeline not held: dead, unburied */
}

int sab__space_alive_locked(sab_space_t *sp, uint32_t id, sab__deaths_t *dead) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return 0;
  sab__slot_t *s = sab__slot(sp, i);
  if (sab__ld(&s->word) != live_word(gen)) return 0;
  if (probe(sp, i)) return 1;
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

int sab__slot_claim_fd(sab_space_t *sp, int fd, uint32_t *id, uint32_t *unburied) {
  /* Start the search where other threads are unlikely to be looking. */
  uint32_t start =
      ((uint32_t)getpid() * 2654435761u + (uint32_t)((uintptr_t)pthread_self() >> 12)) % NSLOTS;
  if (unburied != NULL) *unburied = 0;
  for (uint32_t k = 0; k < NSLOTS; k++) {
    uint32_t i = (start + k) % NSLOTS;
    struct flock fl;
    /* The kernel decides who has the slot: held by another description
     * (any process), it is not free whatever its word says. */
    if (lifeline_lock(fd, F_OFD_SETLK, i, &fl) != 0) continue;
    sab__slot_t *s = sab__slot(sp, i);
    uint32_t w = sab__ld(&s->word), gen = (w >> 2) & 0x3FFFFFFFu;
    if ((w & 3u) == SLOT_LIVE && gen >= 1 && gen <= GEN_MAX) {
      /* O1: LIVE with its lifeline free is a tenant that died unburied (or
       * a word a co-tenant forged): the slot is free, whatever its word
       * says, so forged words cannot fill a space. The caller tells its
       * watchers; a caller that cannot tell yet (unburied NULL: it has no
       * lock id to visit the queues with) leaves it in sp->untold, which
       * space_owners.c tells at the next call that can. */
      uint32_t old = gen << SLOT_BITS | i;
      if (sab__slot_mark_dead(sp, old)) {
        if (unburied != NULL) {
          *unburied = old;
        } else {
          __atomic_store_n(&sp->untold, old, __ATOMIC_RELEASE);
        }
      }
    }
    gen = gen >= 1 && gen < GEN_MAX ? gen + 1 : 1;
    __atomic_store_n(&sp->slot_fd[i], fd, __ATOMIC_RELEASE);
    __atomic_store_n(&s->pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&s->word, live_word(gen), __ATOMIC_SEQ_CST);
    *id = gen << SLOT_BITS | i;
    return 0;
  }
  return SAB_E_SPACE_FULL;
}

int sab__slot_claim(sab_space_t *sp, uint32_t *id, uint32_t *unburied) {
  /* A description of our own: the process's (sp->fd) holds the lock id's
   * lifeline, and two locks of one description would be one. */
  char path[32];
  snprintf(path, sizeof path, "/proc/self/fd/%d", sp->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  *unburied = 0;
  if (fd < 0) return SAB_E_SPACE_SYS;
  int r = sab__slot_claim_fd(sp, fd, id, unburied);
  if (r != 0) close(fd);
  return r;
}

void sab__slot_leave(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return;
  int fd = __atomic_exchange_n(&sp->slot_fd[i], -1, __ATOMIC_ACQ_REL);
  if (fd < 0) return;
  if (fd != sp->fd) {
    close(fd); /* closing the description drops its lock: the lifeline is let go */
  } else {
    lifeline_unlock(fd, i);
  }
}

uint32_t sab__lock_id(sab_space_t *sp) {
  uint32_t id = __atomic_load_n(&sp->lock_id, __ATOMIC_ACQUIRE), zero = 0;
  if (id != 0) return id;
  /* A forked child (space.c forgot the parent's): a description and a slot
   * of its own, made at its first lock, so that a child that only execs
   * costs the space nothing. */
  char path[32];
  snprintf(path, sizeof path, "/proc/self/fd/%d", sp->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return 0;
  if (sab__slot_claim_fd(sp, fd, &id, NULL) != 0) {
    close(fd);
    return 0;
  }
  if (!__atomic_compare_exchange_n(&sp->lock_id, &zero, id, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    sab__slot_free_quietly(sp, id); /* another thread of the child was first */
    return zero;
  }
  return id;
}

void sab__slot_free_quietly(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return;
  uint32_t expected = live_word(gen);
  __atomic_compare_exchange_n(&sab__slot(sp, i)->word, &expected, gen << 2 | SLOT_FREE, 0,
                              __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
  sab__slot_leave(sp, id);
}

uint32_t *sab_space_doorbell(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return NULL;
  return &sab__slot(sp, i)->doorbell;
}

void sab_space_doorbell_wait(sab_space_t *sp, uint32_t id, uint32_t seen, uint64_t deadline) {
  uint32_t *bell = sab_space_doorbell(sp, id);
  if (bell != NULL) sab__futex_wait(bell, seen, deadline, 1);
}

void sab_space_doorbell_ring(sab_space_t *sp, uint32_t id) {
  uint32_t *bell = sab_space_doorbell(sp, id);
  if (bell == NULL) return;
  __atomic_fetch_add(bell, 1, __ATOMIC_SEQ_CST);
  sab__futex_wake(bell, 1 << 30, 1);
}

#endif /* __linux__ */
