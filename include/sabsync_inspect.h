/*
 * sabsync core: seeing inside. Who holds and who waits, read for a person
 * or a tool (Mutex.holder, space.inspect(), `npx sabsync`), never used to
 * decide anything: every answer is a claim as the memory states it at the
 * moment of reading, checked only so far as reading it is safe.
 *
 * This header never includes node_api.h.
 */
#ifndef SABSYNC_INSPECT_H
#define SABSYNC_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "sabsync_space.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * In-process owner ids (include/sabsync.h) and the threads they name: the
 * binding tells which JS thread id (worker_threads.threadId) each owner is
 * when the thread loads it. sab_owner_thread answers 1 and the thread id
 * for an id that was told and lives, else 0. Process-wide; dead ids are
 * forgotten as the table grows. sab_owner_thread_set answers 0, or -1
 * when no memory was left (the thread is then not known).
 */
int sab_owner_thread_set(uint32_t id, uint32_t thread_id);
int sab_owner_thread(uint32_t id, uint32_t *thread_id);

/*
 * A party of a space: the process and thread behind an owner id, as its
 * slot claims them. A slot's pid and thread id are written by its tenant
 * and by anyone who can write the space: a hint for a person, never proof.
 * Only the liveness is the kernel's (the slot's lifeline).
 */
typedef struct {
  uint32_t id;
  uint32_t pid;       /* 0: unknown (not in 1 .. SAB_PID_MAX) */
  uint32_t thread_id; /* valid when has_thread */
  int has_thread;
  int bookkeeping; /* the id a process holds the space's locks with, not a JS thread's */
} sab_space_party_t;
#define SAB_PID_MAX 4194304u /* the kernel's PID_MAX_LIMIT */

/* The calling thread (owner `id`, registered in this process) tells its
 * JS thread id; the process's bookkeeping id is marked as such too. */
void sab_space_thread_set(sab_space_t *sp, uint32_t id, uint32_t thread_id);
/* 1 and *out filled when `id` is an owner id whose slot says so and whose
 * lifeline the kernel holds; 0 otherwise. One probe (a system call). */
int sab_space_party(sab_space_t *sp, uint32_t id, sab_space_party_t *out);
/* The live parties of the space, up to `max`: answers how many. One probe
 * per slot that says LIVE. */
uint32_t sab_space_parties(sab_space_t *sp, sab_space_party_t *out, uint32_t max);

/*
 * The directory as it reads now, without taking its lock (so a reader is
 * never held up by a stuck holder, and never holds up a caller): each
 * entry's words read once and checked. `bad` says what could not be
 * believed: SAB_INSPECT_BAD_STATE (a state no entry has), _KEY (a length
 * past SAB_SPACE_KEY_MAX, or a NUL inside), _PLACE (an offset or size
 * outside the heap). An entry with a bad place has off and bytes 0.
 * `waiting` counts the waiter records queued on cells inside the object,
 * found by one pass over the records (their words read once each).
 */
enum { SAB_INSPECT_BAD_STATE = 1, SAB_INSPECT_BAD_KEY = 2, SAB_INSPECT_BAD_PLACE = 4 };
enum { SAB_INSPECT_CREATING = 1, SAB_INSPECT_READY = 2, SAB_INSPECT_RETIRED = 3 };
typedef struct {
  uint32_t index; /* in the directory */
  uint32_t state; /* SAB_INSPECT_* (or the word as read, with BAD_STATE) */
  uint32_t kind;  /* as the entry says; lib/space.js names them */
  uint32_t off, bytes;
  uint32_t params[SAB_SPACE_NPARAMS];
  uint32_t keylen;
  char key[SAB_SPACE_KEY_MAX];
  uint32_t bad;
  uint32_t waiting;       /* records queued on its cells */
  uint32_t waiter_ids[8]; /* the owners of the first of them */
  uint32_t nwaiter_ids;
} sab_space_object_t;
typedef struct {
  uint32_t size, heap_off, heap_bytes;
  uint32_t heap_used, dir_count; /* as the header says, clamped */
  uint32_t epoch;                /* deaths so far */
  uint32_t records_used;         /* records taken, in any state */
  uint32_t queued_elsewhere;     /* records queued on cells of no object */
} sab_space_summary_t;
/* Fills up to `max` objects (entries that are not empty or free); answers
 * how many. */
uint32_t sab_space_objects(sab_space_t *sp, sab_space_object_t *out, uint32_t max,
                           sab_space_summary_t *sum);

/*
 * Lock waits on memory of this process (Mutex and RWLock outside a space),
 * for finding deadlocks among its threads: a process-wide list of who
 * waits for which lock, under one mutex. A thread links an entry once its
 * wait has lasted a while (50 ms: lib/waiting.js) and unlinks it when the
 * wait ends: a deadlock lasts, and the many short waits of a contended
 * lock cost nothing here.
 *
 * The entry names the lock's cells (its Int32 view), which the caller
 * keeps alive while the entry is linked; sab_lockwaits_each reads them
 * then, under the list's mutex, so no cell is read after its memory could
 * be freed. What it reads is any thread's writing: each cell is read once,
 * and a count that does not fit the view is clamped to it.
 */
enum { SAB_LOCKWAIT_MUTEX = 1, SAB_LOCKWAIT_RWLOCK = 2 };
typedef struct sab_lockwait_s sab_lockwait_t;
struct sab_lockwait_s {
  const int32_t *cells; /* the lock's view: a Mutex's 4 cells, an RWLock's */
  size_t ncells;
  int kind;                    /* SAB_LOCKWAIT_* */
  uint32_t waiter;             /* the waiting thread's owner id */
  sab_lockwait_t *prev, *next; /* the list's */
};
/* The most holders sab_lockwaits_each reports of one lock (an RWLock's
 * readers past it are left out, and `more` says so). */
#define SAB_LOCKWAIT_HOLDERS 64
void sab_lockwaits_enter(sab_lockwait_t *w);
void sab_lockwaits_leave(sab_lockwait_t *w);
/* For each linked entry, in the order they were linked: the owner ids
 * holding its lock as its cells read now (a Mutex's owner; an RWLock's
 * writer, then its readers), and `more` when there were more than
 * SAB_LOCKWAIT_HOLDERS. Under the list's mutex: `each` must not enter or
 * leave. */
typedef void (*sab_lockwaits_each_fn)(void *u, const sab_lockwait_t *w, const uint32_t *holders,
                                      size_t n, int more);
void sab_lockwaits_each(sab_lockwaits_each_fn each, void *u);

#ifdef __cplusplus
}
#endif
#endif /* SABSYNC_INSPECT_H */
