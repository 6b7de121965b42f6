/*
 * Lock waits on memory of this process, for deadlock reports
 * (sabsync_inspect.h). A doubly linked list under one mutex: waits that
 * park are few next to the parks themselves, and only a deadlock look
 * walks the list.
 *
 * The layouts read here are lib/mutex.js's and lib/rwlock.js's:
 *   Mutex  [1] WORD: bits 0-29 the holder's owner id
 *   RWLock [4] N reader slots, [5] HWM (slots at or above it never used),
 *          [9] the writers' Mutex WORD, [12..12+N) reader slots (owner ids)
 */
#include "internal.h"
#include "sabsync_inspect.h"

#include <stdlib.h>

#define OWNER_BITS 0x3FFFFFFFu
#define RW_NSLOTS  4
#define RW_HWM     5
#define RW_WRITER  9
#define RW_SLOT0   12

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static sab_lockwait_t *head, *tail; /* guarded by mu */

void sab_lockwaits_enter(sab_lockwait_t *w) {
  if (pthread_mutex_lock(&mu) != 0) abort();
  w->next = NULL;
  w->prev = tail;
  if (tail != NULL) {
    tail->next = w;
  } else {
    head = w;
  }
  tail = w;
  if (pthread_mutex_unlock(&mu) != 0) abort();
}

void sab_lockwaits_leave(sab_lockwait_t *w) {
  if (pthread_mutex_lock(&mu) != 0) abort();
  if (w->prev != NULL) {
    w->prev->next = w->next;
  } else {
    head = w->next;
  }
  if (w->next != NULL) {
    w->next->prev = w->prev;
  } else {
    tail = w->prev;
  }
  w->prev = w->next = NULL;
  if (pthread_mutex_unlock(&mu) != 0) abort();
}

static uint32_t cell(const sab_lockwait_t *w, size_t i) {
  return (uint32_t)__atomic_load_n(&w->cells[i], __ATOMIC_ACQUIRE);
}

/* The holders of w's lock into out (SAB_LOCKWAIT_HOLDERS room): how many;
 * *more when some did not fit. */
static size_t holders(const sab_lockwait_t *w, uint32_t *out, int *more) {
  size_t n = 0;
  *more = 0;
  if (w->kind == SAB_LOCKWAIT_MUTEX) {
    if (w->ncells < 2) return 0;
    uint32_t owner = cell(w, 1) & OWNER_BITS;
    if (owner != 0) out[n++] = owner;
    return n;
  }
  if (w->kind != SAB_LOCKWAIT_RWLOCK || w->ncells < RW_SLOT0) return 0;
  uint32_t writer = cell(w, RW_WRITER) & OWNER_BITS;
  if (writer != 0) out[n++] = writer;
  uint32_t slots = cell(w, RW_NSLOTS), hwm = cell(w, RW_HWM);
  size_t used = hwm < slots ? hwm : slots;
  if (used > w->ncells - RW_SLOT0) used = w->ncells - RW_SLOT0;
  for (size_t i = 0; i < used; i++) {
    uint32_t id = cell(w, RW_SLOT0 + i);
    if (id == 0) continue;
    if (n == SAB_LOCKWAIT_HOLDERS) {
      *more = 1;
      break;
    }
    out[n++] = id;
  }
  return n;
}

void sab_lockwaits_each(sab_lockwaits_each_fn each, void *u) {
  uint32_t found[SAB_LOCKWAIT_HOLDERS];
  if (pthread_mutex_lock(&mu) != 0) abort();
  for (const sab_lockwait_t *w = head; w != NULL; w = w->next) {
    int more;
    size_t n = holders(w, found, &more);
    each(u, w, found, n, more);
  }
  if (pthread_mutex_unlock(&mu) != 0) abort();
}
