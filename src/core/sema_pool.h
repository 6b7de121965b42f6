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

/* Word 6 of a semaphore (reserved, 0 from sab_sema_init) in a shared
 * space: SAB__SEMA_STRICT once it is a RateLimit's turn, whose hand-off is
 * strict (fair_ns 0), as its in-process view's (space_sema.c). */
#define SAB__SEMA_W_STRICT 6
#define SAB__SEMA_STRICT   0x54525453u /* "STRT" */

/* Whose slots these are: the deaths so far where the holders live, and
 * whether a holder's id is alive. */
typedef struct {
  uint32_t epoch;
  int (*alive)(void *ctx, uint32_t id);
  void *ctx;
  int force; /* scan even if the epoch did not move (holders found dead only by probing) */
} sab__owners_t;

/* What a search for a free slot found: avail 1 with the slot and its holder
 * word (read once), or avail 0. head: where the search began. */
typedef struct {
  uint32_t head, avail, slot, held;
} sab__pool_t;

/* Free slots, counted from the holder words. */
uint32_t sab__sema_count_free(const sab_sema_t *s);
/* Search for a free slot from the next hint (always 0). */
int sab__sema_pool_checked(const sab_sema_t *s, sab__pool_t *p);
/* Slots of dead holders back to the pool (RECOVERED) when the epoch moved:
 * how many. */
int sab__sema_reclaim(const sab_sema_t *s, const sab__owners_t *o);
/* Take the free slot p found for `owner` (one CAS): the token, or
 * SAB_SEMA_NO_TOKEN when a racing take won it. */
uint32_t sab__sema_grant(const sab_sema_t *s, uint32_t owner, const sab__pool_t *p);
/* Search and grant until a CAS wins (bounded): the token, or SAB_SEMA_NO_TOKEN. */
uint32_t sab__sema_take(const sab_sema_t *s, uint32_t owner);
/* The slot `owner` holds: `slot` itself (< 0: its latest), or -1. */
int64_t sab__sema_held(const sab_sema_t *s, uint32_t owner, int64_t slot);
/* Hand a slot held by `from` to `to`: 0, or SAB_E_CORRUPT (the word moved). */
int sab__sema_hand(const sab_sema_t *s, int64_t slot, uint32_t from, uint32_t to);
/* Put a slot held by `owner` back in the pool: 0 or SAB_E_CORRUPT. */
int sab__sema_pool_put(const sab_sema_t *s, int64_t slot, uint32_t owner);

#endif /* SAB_SEMA_POOL_H */
