/*
 * The process's list of lock waits (src/core/lockwaits.c): the holders
 * read from a Mutex's and an RWLock's cells, counts that do not fit the
 * view clamped to it, entries left in any order; then threads entering
 * and leaving while another walks the list and others write the cells
 * (TSan sees the list's lock and the cells' atomics).
 */
#define _POSIX_C_SOURCE 200809L
#include "sabsync_inspect.h"
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define PARKED 0x40000000
#define DIED   ((int32_t)0x80000000)

typedef struct {
  int count;
  const sab_lockwait_t *w[16];
  uint32_t holders[16][SAB_LOCKWAIT_HOLDERS];
  size_t n[16];
  int more[16];
} seen_t;

static void record(void *u, const sab_lockwait_t *w, const uint32_t *holders, size_t n, int more) {
  seen_t *s = u;
  if (s->count < 16) {
    s->w[s->count] = w;
    memcpy(s->holders[s->count], holders, n * sizeof *holders);
    s->n[s->count] = n;
    s->more[s->count] = more;
  }
  s->count++;
}

static seen_t look(void) {
  seen_t s;
  memset(&s, 0, sizeof s);
  sab_lockwaits_each(record, &s);
  return s;
}

static void set(int32_t *cells, size_t i, int32_t v) {
  __atomic_store_n(&cells[i], v, __ATOMIC_RELEASE);
}

static void shapes(void) {
  int32_t mutex[4] = {0};
  int32_t rw[12 + 80] = {0};
  sab_lockwait_t a = {.cells = mutex, .ncells = 4, .kind = SAB_LOCKWAIT_MUTEX, .waiter = 1};
  sab_lockwait_t b = {.cells = rw, .ncells = 12 + 80, .kind = SAB_LOCKWAIT_RWLOCK, .waiter = 2};
  sab_lockwait_t c = {.cells = mutex, .ncells = 1, .kind = SAB_LOCKWAIT_MUTEX, .waiter = 3};
  sab_lockwait_t d = {.cells = rw, .ncells = 11, .kind = SAB_LOCKWAIT_RWLOCK, .waiter = 4};
  sab_lockwait_t e = {.cells = mutex, .ncells = 4, .kind = 99, .waiter = 5};

  seen_t s = look();
  CHECK(s.count == 0);
  sab_lockwaits_enter(&a);
  sab_lockwaits_enter(&b);
  sab_lockwaits_enter(&c);
  sab_lockwaits_enter(&d);
  sab_lockwaits_enter(&e);

  /* Free locks: no holders. */
  s = look();
  CHECK(s.count == 5);
  CHECK(s.w[0] == &a && s.w[1] == &b && s.w[4] == &e);
  for (int i = 0; i < 5; i++) CHECK(s.n[i] == 0 && s.more[i] == 0);

  /* A Mutex's owner, whatever its flags. */
  set(mutex, 1, 7 | PARKED | DIED);
  /* An RWLock: its writers' Mutex, then the reader slots below HWM. */
  set(rw, 9, 9 | PARKED);
  set(rw, 4, 64);
  set(rw, 5, 3);
  set(rw, 12, 11);
  set(rw, 13, 0);
  set(rw, 14, 12);
  set(rw, 15, 13); /* at HWM: never used, not read */
  s = look();
  CHECK(s.n[0] == 1 && s.holders[0][0] == 7);
  CHECK(s.n[1] == 3 && s.holders[1][0] == 9 && s.holders[1][1] == 11 && s.holders[1][2] == 12);
  CHECK(s.n[2] == 0); /* a view too short for a Mutex */
  CHECK(s.n[3] == 0); /* too short for an RWLock */
  CHECK(s.n[4] == 0); /* no kind the list knows */

  /* Counts past the view are clamped to it: N and HWM written huge. */
  set(rw, 4, 0x7fffffff);
  set(rw, 5, -1);
  for (int i = 0; i < 80; i++) set(rw, 12 + i, 100 + i);
  s = look();
  CHECK(s.n[1] == SAB_LOCKWAIT_HOLDERS && s.more[1] == 1);
  CHECK(s.holders[1][0] == 9 && s.holders[1][1] == 100);
  sab_lockwait_t f = {.cells = rw, .ncells = 12 + 5, .kind = SAB_LOCKWAIT_RWLOCK, .waiter = 6};
  sab_lockwaits_enter(&f);
  s = look();
  CHECK(s.count == 6 && s.w[5] == &f && s.n[5] == 6 && s.more[5] == 0);

  /* Leaving from the middle, the head and the tail. */
  sab_lockwaits_leave(&c);
  sab_lockwaits_leave(&a);
  sab_lockwaits_leave(&f);
  s = look();
  CHECK(s.count == 3 && s.w[0] == &b && s.w[1] == &d && s.w[2] == &e);
  sab_lockwaits_leave(&b);
  sab_lockwaits_leave(&d);
  sab_lockwaits_leave(&e);
  s = look();
  CHECK(s.count == 0);
}

/* Threads racing: each enters and leaves its own entries; a writer
 * changes the cells; a reader walks the list. The waiters go on past
 * their 2000 rounds until the reader has made WALKS walks, so that walks
 * overlap with entering and leaving however the threads are scheduled (a
 * loaded machine may run the reader only once the waiters are done). */
#define WALKS 50
static int32_t shared_cells[12 + 8];
static volatile int stop;
static long walks_done;

static void *waiter_thread(void *arg) {
  uint32_t id = (uint32_t)(uintptr_t)arg;
  sab_lockwait_t w[4];
  for (int round = 0; round < 2000 || __atomic_load_n(&walks_done, __ATOMIC_ACQUIRE) < WALKS;
       round++) {
    for (int i = 0; i < 4; i++) {
      w[i] =
          (sab_lockwait_t){.cells = shared_cells, .ncells = 20, .kind = 1 + (i & 1), .waiter = id};
      sab_lockwaits_enter(&w[i]);
    }
    for (int i = 3; i >= 0; i -= 2) sab_lockwaits_leave(&w[i]);
    for (int i = 0; i < 4; i += 2) sab_lockwaits_leave(&w[i]);
  }
  return NULL;
}

static void *writer_thread(void *arg) {
  (void)arg;
  for (uint32_t i = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); i++) {
    set(shared_cells, 1, (int32_t)(i & 0x3fffffff));
    set(shared_cells, 4, (int32_t)(i % 16));
    set(shared_cells, 5, (int32_t)(i % 9));
    set(shared_cells, 12 + i % 8, (int32_t)i);
  }
  return NULL;
}

typedef struct {
  long walks, entries;
  int bad;
} walk_t;

static void count(void *u, const sab_lockwait_t *w, const uint32_t *holders, size_t n, int more) {
  walk_t *k = u;
  (void)holders;
  k->entries++;
  if (w->waiter < 1 || w->waiter > 4 || n > 9 || more) k->bad++;
}

static void *reader_thread(void *arg) {
  walk_t *k = arg;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    sab_lockwaits_each(count, k);
    k->walks++;
    __atomic_store_n(&walks_done, k->walks, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void racing(void) {
  pthread_t waiters[4], writer, reader;
  walk_t k = {0};
  CHECK(pthread_create(&writer, NULL, writer_thread, NULL) == 0);
  CHECK(pthread_create(&reader, NULL, reader_thread, &k) == 0);
  for (uintptr_t i = 0; i < 4; i++)
    CHECK(pthread_create(&waiters[i], NULL, waiter_thread, (void *)(i + 1)) == 0);
  for (int i = 0; i < 4; i++) pthread_join(waiters[i], NULL);
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  pthread_join(writer, NULL);
  pthread_join(reader, NULL);
  CHECK(k.bad == 0);
  CHECK(k.walks >= WALKS);
  seen_t s = look();
  CHECK(s.count == 0); /* every entry left */
}

int main(void) {
  shapes();
  racing();
  return report("test_lockwaits");
}
