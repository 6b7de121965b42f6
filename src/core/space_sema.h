/*
 * The semaphore and the RateLimit grant in a space (space_sema.c): above space_lot.h.
 */
#ifndef SAB_SPACE_SEMA_H
#define SAB_SPACE_SEMA_H

#include "space_lot.h"

/* space_sema.c: the semaphore's calls (include/sabsync_space.h) with the
 * dead they met, and its death hook. */
int sab__sema_in_acquire(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t flags,
                         uint32_t *token, uint32_t *rec, sab__deaths_t *dead);
int sab__sema_in_release(sab_space_t *sp, uint32_t id, uint32_t off, int64_t slot, uint32_t *info,
                         sab__deaths_t *dead);
int sab__sema_in_available(sab_space_t *sp, uint32_t off, sab__deaths_t *dead);
/* A wake to try again that `id` will not use (F4): its place goes, and free
 * slots go to the oldest waiters. */
void sab__sema_in_pass_on(sab_space_t *sp, uint32_t id, uint32_t off, sab__deaths_t *dead);
/* Waiters of the semaphore at off: queued, and woken to try again. */
uint32_t sab__sema_in_waiting(sab_space_t *sp, uint32_t off, sab__deaths_t *dead);
/* space_sema.c: a RateLimit's grant under its turn's bucket lock. */
int sab__space_rate_in_take(sab_space_t *sp, uint32_t turn_off, uint32_t rate_off,
                            int turn_free_only, uint64_t *at, uint64_t *wait_ns,
                            sab__deaths_t *dead);
void sab__space_sema_died(sab_space_t *sp, uint32_t b, uint32_t off, sab__wakes_t *w,
                          sab__deaths_t *dead);

#endif /* SAB_SPACE_SEMA_H */
