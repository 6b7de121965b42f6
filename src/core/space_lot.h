/*
 * Wait queues in a space (space_lot.c): above space_lock.h.
 */
#ifndef SAB_SPACE_LOT_H
#define SAB_SPACE_LOT_H

#include "space_lock.h"

/* Wake the futex words collected under a bucket lock, after it is released. */
void sab__wakes_run(sab__wakes_t *w);
/* Bucket locks (NULL: unusable), for space_sema.c. */
sab__sbucket_t *sab__space_lock(sab_space_t *sp, uint32_t b);
void sab__space_unlock(sab__sbucket_t *bk);
/* A free record for `id` (0: none), and giving it back. */
uint32_t sab__space_take(sab_space_t *sp, uint32_t id);
void sab__space_free(sab_space_t *sp, uint32_t i, uint32_t id);
/* Under bucket b's lock: queue record i with key `off` (| 1 with
 * SAB_SPACE_SEMA, then among the key's records in order of `since`, else
 * at the tail); `raised`: increments of b's counter the caller made and
 * will take back. */
void sab__space_queue(sab_space_t *sp, uint32_t b, uint32_t i, uint32_t off, uint32_t watch,
                      uint32_t flags, uint64_t since, uint32_t raised);
/* Under the lock: when record i's acquire first asked (any value: an order). */
uint64_t sab__space_since(sab_space_t *sp, uint32_t i);
/* Under the lock: the oldest record queued with `key` whose owner lives
 * (those of dead owners are dropped on the way), or 0. */
uint32_t sab__space_oldest(sab_space_t *sp, uint32_t b, uint32_t key, sab__deaths_t *dead);
uint32_t sab__space_owner(sab_space_t *sp, uint32_t i);
/* Under the lock: records queued with `key` whose owners live. */
uint32_t sab__space_waiters_locked(sab_space_t *sp, uint32_t b, uint32_t key, sab__deaths_t *dead);
/* Under the lock: record i leaves its queue NOTIFIED, carrying `token`. */
void sab__space_notify_token(sab_space_t *sp, uint32_t b, uint32_t i, uint32_t token,
                             sab__wakes_t *w);
/* notify and waiters (include/sabsync_space.h), with the dead they met. */
uint64_t sab__lot_notify(sab_space_t *sp, uint32_t off, uint64_t count, sab__deaths_t *dead);
uint32_t sab__lot_waiters(sab_space_t *sp, uint32_t off, sab__deaths_t *dead);
/* At the death of `id` (marked already): wake every record watching it (or
 * any owner), drop the records it left queued, free those it left taken;
 * `hook` (under each bucket's lock) gives a semaphore with waiters there
 * the slots of the dead. Deaths found meanwhile go to `dead`. */
typedef void (*sab__sema_hook_t)(sab_space_t *sp, uint32_t b, uint32_t off, sab__wakes_t *w,
                                 sab__deaths_t *dead);
void sab__space_wake_watchers(sab_space_t *sp, uint32_t id, sab__sema_hook_t hook,
                              sab__deaths_t *dead);

#endif /* SAB_SPACE_LOT_H */
