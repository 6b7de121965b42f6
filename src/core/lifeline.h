/*
 * Thread slots and their lifelines (lifeline.c): above space_sys.h.
 */
#ifndef SAB_LIFELINE_H
#define SAB_LIFELINE_H

#include "space_sys.h"

/* lifeline.c (slots): claim a slot whose lifeline `fd` takes (a dead
 * tenant found there is marked, and left in *unburied to tell, or with
 * unburied NULL in sp->untold), for the process's lock id at open
 * (space.c); give it up at the last close, with no burial (nothing but
 * bookkeeping locks names a lock id); */
int sab__slot_claim_fd(sab_space_t *sp, int fd, uint32_t *id, uint32_t *unburied);
void sab__slot_free_quietly(sab_space_t *sp, uint32_t id);
/* The process's lock id (made at the first lock of a forked child; 0: none
 * could be had, the caller answers SAB_E_CORRUPT). */
uint32_t sab__lock_id(sab_space_t *sp);
/* lifeline.c (slots): whether `id` lives (a probe, no burial: 1 alive, 0
 * dead and marked, or no id; -1 dead and not marked yet); mark it
 * dead (epoch, then the slot word: answers 1 if this call did); the id of
 * slot i's live tenant or 0; claim a free slot for the calling thread
 * (*unburied: a dead tenant this call marked, to tell); let it go. */
int sab__slot_alive(sab_space_t *sp, uint32_t id);
int sab__slot_mark_dead(sab_space_t *sp, uint32_t id);
uint32_t sab__slot_live_id(sab_space_t *sp, uint32_t i);
int sab__slot_claim(sab_space_t *sp, uint32_t *id, uint32_t *unburied);
void sab__slot_leave(sab_space_t *sp, uint32_t id);
/* Liveness for code that holds a bucket lock: probes without blocking; a
 * death found is added to `dead`, for the caller's caller to bury. */
int sab__space_alive_locked(sab_space_t *sp, uint32_t id, sab__deaths_t *dead);

#endif /* SAB_LIFELINE_H */
