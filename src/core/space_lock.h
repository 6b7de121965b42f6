/*
 * Bookkeeping locks (space_lock.c): above lifeline.h, whose probes say whether a holder lives.
 */
#ifndef SAB_SPACE_LOCK_H
#define SAB_SPACE_LOCK_H

#include "lifeline.h"

/* The space's bookkeeping locks. sab__slock takes the lock word `w` for
 * the owner `me`: 0, or 1 when the previous holder died holding it (the
 * caller repairs what it guards), or -1 when it could not be had by the
 * lock's deadline (sab_space_deadline, else SAB_SLOCK_BOUND_NS from now):
 * the word names a holder that lives and does not let go (the caller
 * answers SAB_E_SPACE_BUSY). sab__sunlock lets it go. */
#define SLOCK_WAITERS 0x80000000u
int sab__slock(sab_space_t *sp, uint32_t *w, uint32_t me);
void sab__sunlock(uint32_t *w);
/* The deadline of this thread's bookkeeping locks (sab_space_deadline). */
uint64_t sab__slock_deadline(void);

#endif /* SAB_SPACE_LOCK_H */
