/*
 * The token semaphore's pool (sema.c), shared by its two queues: the
 * in-process lot's (sema.c) and a shared space's (space_sema.c). Every call
 * runs under the lock that guards the semaphore, on a view (base, nr) that
 * sab_sema_open checked; the words it reads and how each is checked are in
 * the table at the top of sema.c.
 */
#ifndef SAB_SEMA_POOL_H
#define SAB_SEMA_POOL_H

#include "sabsync.h"

/* Whose slots these are: the deaths so far where the holders live, and
 * whether a holder's id is alive. */
typedef struct {
  uint32_t epoch;
  int (*alive)(void *ctx, uint32_t id);
  void *ctx;
  int force; /* scan even if the epoch did not move (holders found dead only by probing) */
} sab__owners_t;

/* The pool's head and size, and its oldest slot (read once, checked). */
typedef struct {
  uint32_t head, avail, slot, held;
} sab__pool_t;

/* 0, or SAB_E_CORRUPT: head < nr and avail <= nr. */
int sab__sema_pool_of(const sab_sema_t *s, uint32_t *head, uint32_t *avail);
/* pool_of, and the oldest pooled slot when avail > 0. */
int sab__sema_pool_checked(const sab_sema_t *s, sab__pool_t *p);
/* Slots of dead holders back to the pool (RECOVERED) when the epoch moved:
 * how many, or SAB_E_CORRUPT. */
int sab__sema_reclaim(const sab_sema_t *s, const sab__owners_t *o);
/* Take the oldest pooled slot (p checked, p->avail > 0) for `owner`: the token. */
uint32_t sab__sema_grant(const sab_sema_t *s, uint32_t owner, const sab__pool_t *p);
/* The slot `owner` holds: `slot` itself (< 0: its latest), or -1. */
int64_t sab__sema_held(const sab_sema_t *s, uint32_t owner, int64_t slot);
/* Hand a held slot over to `owner`. */
void sab__sema_hand(const sab_sema_t *s, int64_t slot, uint32_t owner);
/* Put a held slot back in the pool (head, avail from pool_of): 0 or SAB_E_CORRUPT. */
int sab__sema_pool_put(const sab_sema_t *s, int64_t slot, uint32_t head, uint32_t avail);

#endif /* SAB_SEMA_POOL_H */
