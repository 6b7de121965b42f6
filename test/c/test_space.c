/*
 * Tests of the shared space (src/core/space.c, space_lot.c, lifeline.c) as
 * plain C, with real processes: children are forked, wait in the space, hold
 * its locks, and are killed with SIGKILL at chosen points; the parent checks
 * that counts stay exact, order stays FIFO, and nothing wedges. Built and run
 * by test/c/Makefile (plain, ASan+UBSan, TSan, portable parker). Asserts here
 * survive NDEBUG.
 */
#define _GNU_SOURCE
#include "space_sema.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char names[16][64];
static int nnames;

static const char *name_of(const char *tag) {
  char *n = names[nnames++];
  snprintf(n, sizeof names[0], "ctest-%d-%s", (int)getpid(), tag);
  sab_space_unlink(n); /* a leftover of an earlier run that crashed */
  return n;
}

static sab_space_t *open_new(const char *tag) {
  sab_space_t *sp = NULL;
  int created = 0;
  int r = sab_space_open(name_of(tag), 0, 0600, &sp, &created);
  CHECK(r == 0 && created == 1);
  if (r != 0) exit(report("test_space"));
  return sp;
}

/* A zeroed array of n int32 cells, by key. */
static uint32_t cells(sab_space_t *sp, const char *key, uint32_t n) {
  uint32_t off = 0, params[SAB_SPACE_NPARAMS] = {n, 0, 0, 0};
  int r = sab_space_lookup(sp, sab__lock_id(sp), key, strlen(key), 1, params, n * 4, &off);
  if (r == SAB_SPACE_CREATE) sab_space_publish(sp, off);
  CHECK(r == SAB_SPACE_CREATE || r == SAB_SPACE_ATTACH);
  return off;
}

static int32_t *at(sab_space_t *sp, uint32_t off) {
  sab_space_info_t info;
  sab_space_info(sp, &info);
  return (int32_t *)(info.base + off);
}

static void await_waiters(sab_space_t *sp, uint32_t off, uint32_t n) {
  for (int i = 0; i < 5000 && sab_space_waiters(sp, off) != n; i++) sleep_ms(1);
  CHECK(sab_space_waiters(sp, off) == n);
}

static int exit_code(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  CHECK(exit_code(pid) == 128 + SIGKILL);
}

/* A child that registers and waits on the cell at `off` (while it holds 0)
 * for up to `ms`, and exits with the result. */
static pid_t child_waiting(sab_space_t *sp, uint32_t off, unsigned ms) {
  pid_t pid = fork();
  if (pid == 0) {
    uint32_t id;
    if (sab_space_register(sp, &id) != 0) _exit(100);
    int r = sab_space_wait(sp, id, off, 4, 0, (uint64_t)ms * MS);
    sab_space_unregister(sp, id);
    _exit(r);
  }
  return pid;
}

static void test_open_and_names(void) {
  sab_space_t *sp, *again;
  int created;
  const char *name = name_of("open");
  CHECK(sab_space_open("", 0, 0600, &sp, &created) == SAB_E_SPACE_NAME);
  CHECK(sab_space_open("a/b", 0, 0600, &sp, &created) == SAB_E_SPACE_NAME);
  CHECK(sab_space_open("..", 0, 0600, &sp, &created) == SAB_E_SPACE_NAME);
  CHECK(sab_space_open("a\nb", 0, 0600, &sp, &created) == SAB_E_SPACE_NAME);
  char long_name[SAB_SPACE_NAME_MAX + 2];
  memset(long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = 0;
  CHECK(sab_space_open(long_name, 0, 0600, &sp, &created) == SAB_E_SPACE_NAME);
  CHECK(sab_space_open(name, 4096, 0600, &sp, &created) == SAB_E_SPACE_SIZE);
  CHECK(sab_space_open(name, SAB_SPACE_MAX_SIZE + 1u, 0600, &sp, &created) == SAB_E_SPACE_SIZE);

  CHECK(sab_space_open(name, 0, 0640, &sp, &created) == 0 && created == 1);
  char path[300];
  struct stat st;
  snprintf(path, sizeof path, "/dev/shm/sabsync.%s", name);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640 &&
        st.st_size == SAB_SPACE_DEFAULT_SIZE);
  /* One mapping per name per process. */
  CHECK(sab_space_open(name, 0, 0600, &again, &created) == 0 && again == sp && created == 0);
  CHECK(sab_space_open(name, 2u << 20, 0600, &again, &created) == SAB_E_SPACE_SIZE);
  sab_space_close(again);
  /* Another process attaches to the same bytes. */
  uint32_t off = cells(sp, "shared", 1);
  at(sp, off)[0] = 42;
  for (int k = 0; k < 2; k++) {
    /* A fresh process (exec'd: it inherits no mapping) opens it by name
     * while this one holds it open, and finds the object. */
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", "test_space", "attach", name, (char *)NULL);
      _exit(127);
    }
    CHECK(exit_code(pid) == 0);
  }
  sab_space_close(sp);

  /* A file that is not a space, or of another version. */
  const char *bad = name_of("bad");
  snprintf(path, sizeof path, "/dev/shm/sabsync.%s", bad);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
  CHECK(fd >= 0 && ftruncate(fd, SAB_SPACE_DEFAULT_SIZE) == 0);
  uint32_t words[5] = {SPACE_MAGIC, SAB_SPACE_VERSION + 1, 0, 1, SAB_SPACE_DEFAULT_SIZE};
  CHECK(pwrite(fd, words, sizeof words, 0) == (ssize_t)sizeof words);
  close(fd);
  CHECK(sab_space_open(bad, 0, 0600, &sp, &created) == SAB_E_SPACE_VERSION);
  CHECK(sab_space_unlink(bad) == 0);
  CHECK(sab_space_unlink(name) == 0);
  CHECK(sab_space_unlink(name) == SAB_E_SPACE_SYS && errno == ENOENT);
}

static void test_directory(void) {
  sab_space_t *sp = open_new("dir");
  uint32_t p3[SAB_SPACE_NPARAMS] = {3, 0, 0, 0}, p4[SAB_SPACE_NPARAMS] = {4, 0, 0, 0};
  uint32_t off, off2;
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "", 0, 1, p3, 8, &off) == SAB_E_SPACE_KEY);
  char long_key[SAB_SPACE_KEY_MAX + 1];
  memset(long_key, 'k', sizeof long_key);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), long_key, sizeof long_key, 1, p3, 8, &off) ==
        SAB_E_SPACE_KEY);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "sema", 4, 7, p3, 64, &off) == SAB_SPACE_CREATE);
  CHECK(off % 64 == 0);
  sab_space_publish(sp, off);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "sema", 4, 7, p3, 64, &off2) == SAB_SPACE_ATTACH &&
        off2 == off);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "sema", 4, 7, p4, 64, &off2) ==
        SAB_E_SPACE_MISMATCH);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "sema", 4, 8, p3, 64, &off2) ==
        SAB_E_SPACE_MISMATCH);
  /* What a mismatch found: the entry as it was made. */
  sab_space_entry_t e;
  CHECK(sab_space_entry(sp, sab__lock_id(sp), "sema", 4, &e) == 1);
  CHECK(e.kind == 7 && e.bytes == 64 && e.params[0] == 3 && e.params[3] == 0);
  CHECK(sab_space_entry(sp, sab__lock_id(sp), "none", 4, &e) == 0);
  CHECK(sab_space_entry(sp, sab__lock_id(sp), "", 0, &e) == SAB_E_SPACE_KEY);
  /* Abandoned: the next caller creates it again, at the same place. */
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "gone", 4, 1, p3, 8, &off) == SAB_SPACE_CREATE);
  at(sp, off)[0] = 7;
  sab_space_abandon(sp);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "gone", 4, 1, p3, 8, &off2) == SAB_SPACE_CREATE &&
        off2 == off);
  CHECK(at(sp, off)[0] == 0); /* zeroed again */
  sab_space_publish(sp, off);
  /* A creator killed before it published: the key is made again. */
  pid_t pid = fork();
  if (pid == 0) {
    uint32_t o;
    if (sab_space_lookup(sp, sab__lock_id(sp), "killed", 6, 1, p3, 8, &o) != SAB_SPACE_CREATE)
      _exit(1);
    at(sp, o)[0] = 99;
    for (;;) pause(); /* holds the directory lock until killed */
  }
  for (int i = 0; i < 5000 && __atomic_load_n(sab__dir_lock(sp), __ATOMIC_ACQUIRE) == 0; i++) {
    sleep_ms(1);
  }
  kill_and_reap(pid);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "killed", 6, 1, p3, 8, &off) == SAB_SPACE_CREATE);
  CHECK(at(sp, off)[0] == 0);
  sab_space_publish(sp, off);
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "killed", 6, 1, p3, 8, &off2) == SAB_SPACE_ATTACH &&
        off2 == off);
  /* Full: the heap runs out. */
  int full = 0;
  for (int i = 0; i < 100000 && !full; i++) {
    char key[32];
    int n = snprintf(key, sizeof key, "fill-%d", i);
    int r = sab_space_lookup(sp, sab__lock_id(sp), key, (size_t)n, 1, p3, 64 * 1024, &off);
    if (r == SAB_SPACE_CREATE) sab_space_publish(sp, off);
    full = r == SAB_E_SPACE_FULL;
  }
  CHECK(full);
  sab_space_close(sp);
}

static void test_wait_notify_across_processes(void) {
  sab_space_t *sp = open_new("wait");
  uint32_t me, off = cells(sp, "c", 4);
  CHECK(sab_space_register(sp, &me) == 0);
  /* not-equal, timed-out, bad cells */
  at(sp, off)[0] = 5;
  CHECK(sab_space_wait(sp, me, off, 4, 0, 10 * MS) == SAB_NOT_EQUAL);
  CHECK(sab_space_wait(sp, me, off, 4, 5, 10 * MS) == SAB_TIMED_OUT);
  CHECK(sab_space_wait(sp, me, 0, 4, 0, MS) == SAB_E_INVAL);       /* private part */
  CHECK(sab_space_wait(sp, me, off + 2, 4, 0, MS) == SAB_E_INVAL); /* misaligned */
  at(sp, off)[0] = 0;
  /* Three waiters in three processes; notify(2) wakes exactly two, the
   * oldest; the third times out. */
  pid_t kids[3];
  for (int k = 0; k < 3; k++) {
    kids[k] = child_waiting(sp, off, k < 2 ? 10000 : 300);
    await_waiters(sp, off, (uint32_t)k + 1);
  }
  CHECK(sab_space_notify(sp, off, 2) == 2);
  CHECK(exit_code(kids[0]) == SAB_OK);
  CHECK(exit_code(kids[1]) == SAB_OK);
  CHECK(exit_code(kids[2]) == SAB_TIMED_OUT);
  CHECK(sab_space_waiters(sp, off) == 0);
  CHECK(sab_space_notify(sp, off, 1) == 0);
  /* FIFO across processes: each child records its turn when woken. */
  int32_t *order = at(sp, off) + 1;
  order[0] = 0;
  pid_t fifo[6];
  for (int k = 0; k < 6; k++) {
    fifo[k] = fork();
    if (fifo[k] == 0) {
      uint32_t id;
      if (sab_space_register(sp, &id) != 0) _exit(100);
      int r = sab_space_wait(sp, id, off, 4, 0, 10000 * MS);
      int turn = __atomic_fetch_add(&order[0], 1, __ATOMIC_SEQ_CST);
      sab_space_unregister(sp, id);
      _exit(r == SAB_OK ? turn : 99);
    }
    await_waiters(sp, off, (uint32_t)k + 1);
  }
  for (int k = 0; k < 6; k++) {
    CHECK(sab_space_notify(sp, off, 1) == 1);
    CHECK(exit_code(fifo[k]) == k);
  }
  sab_space_unregister(sp, me);
  sab_space_close(sp);
}

/* Waiters killed while queued (between enqueue and park, or parked) are
 * dropped by notify, uncounted; their records come back. */
static void test_killed_waiters(void) {
  sab_space_t *sp = open_new("killw");
  uint32_t off = cells(sp, "c", 1), me;
  CHECK(sab_space_register(sp, &me) == 0);
  uint32_t base = sab_space_records_used(sp);
  for (int round = 0; round < 20; round++) {
    pid_t a = child_waiting(sp, off, 10000);
    pid_t b = child_waiting(sp, off, 10000);
    await_waiters(sp, off, 2);
    /* Some rounds kill at once (the child may still spin before it parks). */
    kill_and_reap(round % 2 == 0 ? a : b);
    CHECK(sab_space_notify(sp, off, 1) == 1); /* the live one, not the dead */
    CHECK(exit_code(round % 2 == 0 ? b : a) == SAB_OK);
    CHECK(sab_space_waiters(sp, off) == 0);
  }
  /* Killed before it was seen in the queue at all. */
  for (int round = 0; round < 20; round++) {
    pid_t a = child_waiting(sp, off, 10000);
    sleep_ms((unsigned)(round % 3));
    kill_and_reap(a);
    CHECK(sab_space_notify(sp, off, 1) == 0);
  }
  sab_space_reap(sp);
  CHECK(sab_space_records_used(sp) == base);
  sab_space_unregister(sp, me);
  sab_space_close(sp);
}

/* A process killed while it holds a bucket lock: the next locker repairs
 * the queue, which keeps every waiter in order. */
static void test_killed_in_bucket(void) {
  sab_space_t *sp = open_new("killb");
  uint32_t off = cells(sp, "c", 1);
  int32_t *order = at(sp, cells(sp, "order", 1));
  pid_t kids[4];
  for (int k = 0; k < 4; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      uint32_t id;
      if (sab_space_register(sp, &id) != 0) _exit(100);
      int r = sab_space_wait(sp, id, off, 4, 0, 10000 * MS);
      int turn = __atomic_fetch_add(order, 1, __ATOMIC_SEQ_CST);
      _exit(r == SAB_OK ? turn : 99);
    }
    await_waiters(sp, off, (uint32_t)k + 1);
  }
  /* Scramble the links, as a holder killed mid-update could, then die
   * holding the lock. */
  uint32_t b = sab__sbucket_of(off);
  pid_t killer = fork();
  if (killer == 0) {
    sab__sbucket_t *bk = sab__sbucket(sp, b);
    if (sab__slock(sp, &bk->lock, sab__lock_id(sp)) != 0) _exit(1);
    uint32_t head = bk->head;
    bk->head = bk->tail;
    bk->tail = head;
    sab__record(sp, head)->next = 12345;
    for (;;) pause();
  }
  sleep_ms(50);
  kill_and_reap(killer);
  CHECK(sab_space_waiters(sp, off) == 4);
  for (int k = 0; k < 4; k++) {
    CHECK(sab_space_notify(sp, off, 1) == 1);
    CHECK(exit_code(kids[k]) == k);
  }
  CHECK(*sab__count(sp, b) == 0);
  sab_space_close(sp);
}

/* Owners: ids across processes, a death seen by a probe, slots reused with
 * a new generation, watchers woken at a death. */
typedef struct {
  sab_space_t *sp;
  uint32_t off, watch, epoch;
  int result;
} watcher_t;

static void *watcher(void *arg) {
  watcher_t *w = arg;
  uint32_t id, rec;
  if (sab_space_register(w->sp, &id) != 0) return NULL;
  w->result = sab_space_enqueue(w->sp, id, w->off, 4, 0, w->watch, w->epoch, 0, &rec);
  if (w->result == SAB_PENDING) {
    sab_space_park(w->sp, rec, sab_now() + 10000 * MS);
    w->result = sab_space_settle(w->sp, id, rec, w->off, SAB_TIMED_OUT, NULL);
  }
  sab_space_unregister(w->sp, id);
  return NULL;
}

static void test_owners(void) {
  sab_space_t *sp = open_new("owners");
  uint32_t me, off = cells(sp, "c", 2);
  int32_t *ids = at(sp, off) + 1;
  CHECK(sab_space_register(sp, &me) == 0);
  CHECK(me != 0 && me < (1u << 30) && sab_space_alive(sp, me));
  CHECK(!sab_space_alive(sp, 0) && !sab_space_alive(sp, 12345u << SLOT_BITS));
  for (int round = 0; round < 10; round++) {
    pid_t pid = fork();
    if (pid == 0) {
      uint32_t id;
      if (sab_space_register(sp, &id) != 0) _exit(100);
      __atomic_store_n(ids, (int32_t)id, __ATOMIC_SEQ_CST);
      for (;;) pause();
    }
    while (__atomic_load_n(ids, __ATOMIC_SEQ_CST) == 0) sleep_ms(1);
    uint32_t child = (uint32_t)*ids;
    CHECK(child != me && sab_space_alive(sp, child));
    /* A watcher of the child, parked; the child dies; a probe finds it and
     * wakes the watcher. */
    watcher_t w = {sp, off, child, sab_space_epoch(sp), -1};
    pthread_t t;
    pthread_create(&t, NULL, watcher, &w);
    await_waiters(sp, off, 1);
    uint32_t epoch = sab_space_epoch(sp);
    kill_and_reap(pid);
    CHECK(!sab_space_alive(sp, child));
    CHECK(sab_space_epoch(sp) != epoch);
    pthread_join(t, NULL);
    CHECK(w.result == SAB_OK);
    /* A watch with a stale epoch is refused at once. */
    w.epoch = epoch;
    w.result = -1;
    pthread_create(&t, NULL, watcher, &w);
    pthread_join(t, NULL);
    CHECK(w.result == SAB_OWNER_DEAD);
    *ids = 0;
  }
  /* Every slot taken (but `me` and the process's lock id), then given
   * back. */
  uint32_t *taken = malloc(NSLOTS * sizeof *taken);
  int n = 0;
  while (n < (int)NSLOTS && sab_space_register(sp, &taken[n]) == 0) n++;
  CHECK(n == (int)NSLOTS - 2);
  uint32_t extra;
  CHECK(sab_space_register(sp, &extra) == SAB_E_SPACE_FULL);
  for (int i = 0; i < n; i++) sab_space_unregister(sp, taken[i]);
  for (int i = 0; i < n; i++) CHECK(!sab_space_alive(sp, taken[i]));
  free(taken);
  CHECK(sab_space_register(sp, &extra) == 0);
  sab_space_unregister(sp, extra);
  sab_space_unregister(sp, me);
  CHECK(!sab_space_alive(sp, me));
  sab_space_close(sp);
}

/* Notify racing timeouts across threads: the count notify answers equals
 * the number of waiters that say they were woken. */
typedef struct {
  sab_space_t *sp;
  uint32_t off;
  int ok;
} racer_t;

static void *racer(void *arg) {
  racer_t *r = arg;
  uint32_t id;
  if (sab_space_register(r->sp, &id) != 0) return NULL;
  r->ok = sab_space_wait(r->sp, id, r->off, 4, 0, 2 * MS) == SAB_OK;
  sab_space_unregister(r->sp, id);
  return NULL;
}

static void test_notify_races_timeout(void) {
  sab_space_t *sp = open_new("race");
  uint32_t off = cells(sp, "c", 1);
  for (int round = 0; round < 50; round++) {
    racer_t rs[4];
    pthread_t ts[4];
    for (int k = 0; k < 4; k++) {
      rs[k] = (racer_t){sp, off, 0};
      pthread_create(&ts[k], NULL, racer, &rs[k]);
    }
    sleep_ms(1 + round % 3);
    uint64_t woken = sab_space_notify(sp, off, 2);
    int oks = 0;
    for (int k = 0; k < 4; k++) {
      pthread_join(ts[k], NULL);
      oks += rs[k].ok;
    }
    CHECK(woken == (uint64_t)oks);
  }
  sab_space_close(sp);
}

/* A process that writes random bytes over the public part and the records
 * while others wait and notify: they get results, errors or timeouts. */
static void test_scribbler(void) {
  sab_space_t *sp = open_new("scribble");
  uint32_t off = cells(sp, "c", 16);
  pid_t pid = fork();
  if (pid == 0) {
    uint32_t seed = 12345;
    sab_space_info_t info;
    sab_space_info(sp, &info);
    for (;;) {
      seed = seed * 1103515245u + 12345u;
      uint32_t r = seed >> 8;
      if (r & 1) {
        /* the public part: epoch, counters, objects */
        uint32_t o = info.pub_off + (r % (info.size - info.pub_off)) / 4 * 4;
        *(volatile uint32_t *)(info.base + o) = seed;
      } else {
        /* a record's words (never its futex-free neighbours: the mutexes) */
        uint32_t i = 1 + (r >> 1) % NRECORDS, w = (r >> 13) % 9;
        ((volatile uint32_t *)sab__record(sp, i))[w] = seed ^ (seed >> 16);
      }
    }
  }
  uint32_t me;
  CHECK(sab_space_register(sp, &me) == 0);
  int bad = 0;
  for (int i = 0; i < 3000; i++) {
    uint32_t cell = off + 4 * (uint32_t)(i % 16);
    int r = sab_space_wait(sp, me, cell, 4, at(sp, cell)[0], (uint64_t)(i % 2) * MS);
    if (r != SAB_OK && r != SAB_NOT_EQUAL && r != SAB_TIMED_OUT && r != SAB_CANCELLED &&
        r != SAB_E_SPACE_FULL) {
      bad++;
    }
    sab_space_notify(sp, cell, 1);
    sab_space_waiters(sp, cell);
  }
  kill_and_reap(pid);
  CHECK(bad == 0);
  sab_space_unregister(sp, me);
  sab_space_close(sp);
}

/* A semaphore of nr slots in the space, by key. */
static uint32_t sema_in(sab_space_t *sp, const char *key, uint32_t nr) {
  uint32_t off = 0, params[SAB_SPACE_NPARAMS] = {nr, 0, 0, 0};
  uint32_t bytes = (uint32_t)sab_sema_bytes(nr);
  int r = sab_space_lookup(sp, sab__lock_id(sp), key, strlen(key), 10, params, bytes, &off);
  if (r == SAB_SPACE_CREATE) {
    sab_sema_t s;
    CHECK(sab_sema_init(&s, (char *)at(sp, off), bytes, nr) == 0);
    sab_space_publish(sp, off);
  }
  CHECK(r == SAB_SPACE_CREATE || r == SAB_SPACE_ATTACH);
  return off;
}

/* A blocking acquire: queue, sleep (probing lifelines as the binding does),
 * take the slot the wake carries. */
static int sema_get(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t *token) {
  for (;;) {
    uint32_t rec;
    int r = sab_space_sema_acquire(sp, id, off, 0, token, &rec);
    if (r != SAB_PENDING) return r;
    while (sab_space_park(sp, rec, sab_now() + 200 * MS) == SAB_PENDING) sab_space_reap(sp);
    r = sab_space_settle(sp, id, rec, off, SAB_TIMED_OUT, token);
    if (r != SAB_OK || *token != SAB_SEMA_NO_TOKEN) return r;
  }
}

static void test_sema(void) {
  sab_space_t *sp = open_new("sema");
  uint32_t off = sema_in(sp, "s", 2), me, tok;
  int32_t *stats = at(sp, cells(sp, "stats", 4)); /* inside, most, rounds */
  CHECK(sab_space_register(sp, &me) == 0);
  /* Never more than nr holders across processes. */
  pid_t kids[4];
  for (int k = 0; k < 4; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      uint32_t id, t;
      if (sab_space_register(sp, &id) != 0) _exit(100);
      for (int i = 0; i < 300; i++) {
        if (sema_get(sp, id, off, &t) != SAB_OK) _exit(101);
        int now = __atomic_add_fetch(&stats[0], 1, __ATOMIC_SEQ_CST);
        for (int m = __atomic_load_n(&stats[1], __ATOMIC_SEQ_CST); now > m;) {
          if (__atomic_compare_exchange_n(&stats[1], &m, now, 0, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST))
            break;
        }
        __atomic_fetch_sub(&stats[0], 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&stats[2], 1, __ATOMIC_SEQ_CST);
        if (sab_space_sema_release(sp, id, off, (int64_t)t, NULL) != (int)t) _exit(102);
      }
      sab_space_unregister(sp, id);
      _exit(0);
    }
  }
  for (int k = 0; k < 4; k++) CHECK(exit_code(kids[k]) == 0);
  CHECK(stats[1] >= 1 && stats[1] <= 2);
  CHECK(stats[2] == 4 * 300);
  CHECK(sab_space_sema_available(sp, off) == 2);
  /* A holder killed: its slots come back RECOVERED, to a try at once (it
   * probes the holders when the pool is empty) and to a queued waiter. */
  for (int round = 0; round < 2; round++) {
    pid_t holder = fork();
    if (holder == 0) {
      uint32_t id, t;
      if (sab_space_register(sp, &id) != 0) _exit(100);
      sema_get(sp, id, off, &t);
      sema_get(sp, id, off, &t);
      stats[3] = 1;
      for (;;) pause();
    }
    while (__atomic_load_n(&stats[3], __ATOMIC_SEQ_CST) == 0) sleep_ms(1);
    stats[3] = 0;
    CHECK(sab_space_sema_acquire(sp, me, off, 0, &tok, NULL) == SAB_TIMED_OUT);
    kill_and_reap(holder);
    if (round == 0) {
      CHECK(sab_space_sema_acquire(sp, me, off, 0, &tok, NULL) == SAB_OK);
    } else {
      CHECK(sema_get(sp, me, off, &tok) == SAB_OK);
    }
    CHECK((tok & SAB_SEMA_RECOVERED) != 0);
    CHECK(sab_space_sema_release(sp, me, off, tok & ~SAB_SEMA_RECOVERED, NULL) >= 0);
    CHECK(sab_space_sema_available(sp, off) == 2);
  }
  /* Releasing a slot held by another owner, or none. */
  CHECK(sab_space_sema_release(sp, me, off, 0, NULL) == SAB_E_BAD_TOKEN);
  CHECK(sab_space_sema_release(sp, me, off, 7, NULL) == SAB_E_BAD_TOKEN);
  CHECK(sab_space_sema_acquire(sp, me, off + 8, 0, &tok, NULL) == SAB_E_CORRUPT);
  sab_space_unregister(sp, me);
  sab_space_close(sp);
}

/* The Sema's bounded fairness in a space: the rules of src/core/sema.c
 * (F1-F5), which src/core/sema_fair.h writes once for both memories, row by
 * row as test_sema.c plays them in one process, with async records (nothing
 * runs on their wake) of several ids of this thread. Built with a bound of
 * 200 ms (the Makefile): a young waiter's rows act well within it, and a
 * waiter that must have waited the bound has its record's since dated back. */
static int f_ask(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t flags, uint32_t *rec,
                 uint32_t *tok) {
  return sab_space_sema_acquire(sp, id, off, SAB_SPACE_ASYNC | flags, tok, rec);
}
static int f_woken(sab_space_t *sp, uint32_t id, uint32_t rec, uint32_t off) {
  return sab_space_peek(sp, id, rec, off) == SAB_OK;
}
/* The token a woken record was handed (SAB_SEMA_NO_TOKEN: try again). */
static uint32_t f_token(sab_space_t *sp, uint32_t id, uint32_t rec, uint32_t off) {
  uint32_t tok = 7;
  CHECK(sab_space_settle(sp, id, rec, off, SAB_CANCELLED, &tok) == SAB_OK);
  return tok;
}
static void f_age(sab_space_t *sp, uint32_t rec, uint64_t ns) {
  uint64_t since = sab_now() - ns;
  sab__st(&sab__record(sp, rec)->since_lo, (uint32_t)since);
  sab__st(&sab__record(sp, rec)->since_hi, (uint32_t)(since >> 32));
}

static void test_sema_fairness(void) {
  sab_space_t *sp = open_new("fair");
  uint32_t off = sema_in(sp, "f", 1), a, n, q1, q2, d, r1, r2, r3, tok, info;
  CHECK(sab_space_register(sp, &a) == 0 && sab_space_register(sp, &n) == 0);
  CHECK(sab_space_register(sp, &q1) == 0 && sab_space_register(sp, &q2) == 0);

  /* F2: a release whose oldest waiter has not waited the bound pools the
   * slot and wakes that waiter to try again; a running thread takes the
   * slot meanwhile (the barge); the waiter asks again and queues in its
   * old place, ahead of a later waiter. */
  CHECK(sab_space_sema_acquire(sp, a, off, 0, &tok, NULL) == SAB_OK && tok == 0);
  CHECK(f_ask(sp, q1, off, 0, &r1, &tok) == SAB_PENDING);
  CHECK(sab_space_sema_release(sp, a, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(f_woken(sp, q1, r1, off) && f_token(sp, q1, r1, off) == SAB_SEMA_NO_TOKEN);
  CHECK(sab_space_sema_waiting(sp, off) == 1); /* off the queue, still waiting (F5) */
  CHECK(sab_space_sema_acquire(sp, n, off, 0, &tok, NULL) == SAB_OK && tok == 0); /* the barge */
  CHECK(f_ask(sp, q2, off, 0, &r2, &tok) == SAB_PENDING); /* later than q1 */
  CHECK(f_ask(sp, q1, off, 0, &r1, &tok) == SAB_PENDING); /* back, in its place */
  CHECK(sab_space_sema_waiting(sp, off) == 2);
  CHECK(sab_space_sema_release(sp, n, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(f_woken(sp, q1, r1, off) && !f_woken(sp, q2, r2, off)); /* q1 first */
  CHECK(f_token(sp, q1, r1, off) == SAB_SEMA_NO_TOKEN);
  /* F3: the woken waiter, older than every queued one, is first in line. */
  CHECK(f_ask(sp, q1, off, 0, &r1, &tok) == SAB_OK && tok == 0);
  CHECK(sab_space_sema_waiting(sp, off) == 1);
  /* F4: a wake to try again that will not be used is passed on: the slot
   * goes to the next waiter directly. */
  CHECK(f_ask(sp, n, off, 0, &r3, &tok) == SAB_PENDING); /* behind q2 */
  CHECK(sab_space_sema_release(sp, q1, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(f_woken(sp, q2, r2, off) && f_token(sp, q2, r2, off) == SAB_SEMA_NO_TOKEN);
  CHECK(!f_woken(sp, n, r3, off) && sab_space_sema_waiting(sp, off) == 2);
  sab_space_sema_give_back(sp, q2, off, SAB_SEMA_NO_TOKEN); /* q2 gives up */
  CHECK(f_woken(sp, n, r3, off) && f_token(sp, n, r3, off) == 0);
  CHECK(sab_space_sema_waiting(sp, off) == 0);
  CHECK(sab_space_sema_release(sp, n, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);

  /* F1: a waiter that asked the bound ago is handed the released slot
   * directly, and no newcomer takes a slot past it. */
  CHECK(sab_space_sema_acquire(sp, a, off, 0, &tok, NULL) == SAB_OK);
  CHECK(f_ask(sp, q1, off, 0, &r1, &tok) == SAB_PENDING);
  f_age(sp, r1, 400 * MS);
  CHECK(sab_space_sema_release(sp, a, off, 0, &info) == 0 && info == 0); /* handed */
  CHECK(f_woken(sp, q1, r1, off) && f_token(sp, q1, r1, off) == 0);
  CHECK(f_ask(sp, q2, off, 0, &r2, &tok) == SAB_PENDING);
  f_age(sp, r2, 400 * MS);
  CHECK(sab_space_sema_acquire(sp, n, off, 0, &tok, NULL) == SAB_TIMED_OUT);
  CHECK(sab_space_sema_release(sp, q1, off, 0, &info) == 0 && info == 0); /* to q2 */
  CHECK(f_woken(sp, q2, r2, off) && f_token(sp, q2, r2, off) == 0);
  CHECK(sab_space_sema_release(sp, q2, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);

  /* F5: a record woken to try again keeps its place while it is off the
   * queue: a death meanwhile (which hands free slots to queued records)
   * does not hand its slot to a younger queued record; a give-up passes
   * its place on. */
  for (int round = 0; round < 2; round++) {
    CHECK(sab_space_sema_acquire(sp, a, off, 0, &tok, NULL) == SAB_OK && tok == 0);
    CHECK(f_ask(sp, q1, off, 0, &r1, &tok) == SAB_PENDING);
    CHECK(f_ask(sp, q2, off, 0, &r2, &tok) == SAB_PENDING);
    CHECK(sab_space_sema_release(sp, a, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);
    CHECK(f_woken(sp, q1, r1, off) && f_token(sp, q1, r1, off) == SAB_SEMA_NO_TOKEN);
    CHECK(sab_space_sema_waiting(sp, off) == 2); /* q2 queued, q1 on its way back */
    if (round == 0) {
      CHECK(sab_space_register(sp, &d) == 0);
      sab_space_unregister(sp, d);      /* a death elsewhere visits the queues */
      CHECK(!f_woken(sp, q2, r2, off)); /* not past q1 */
      CHECK(f_ask(sp, q1, off, 0, &r1, &tok) == SAB_OK && tok == 0);
      CHECK(sab_space_sema_release(sp, q1, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);
      CHECK(f_woken(sp, q2, r2, off) && f_token(sp, q2, r2, off) == SAB_SEMA_NO_TOKEN);
      CHECK(f_ask(sp, q2, off, 0, &r2, &tok) == SAB_OK && tok == 0);
      CHECK(sab_space_sema_release(sp, q2, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);
    } else {
      sab_space_sema_give_back(sp, q1, off, SAB_SEMA_NO_TOKEN); /* the slot to q2 */
      CHECK(f_woken(sp, q2, r2, off) && f_token(sp, q2, r2, off) == 0);
      CHECK(sab_space_sema_release(sp, q2, off, 0, &info) == 0 && info == SAB_SEMA_POOLED);
    }
    CHECK(sab_space_sema_waiting(sp, off) == 0 && sab_space_sema_available(sp, off) == 1);
  }
  sab_space_unregister(sp, q2);
  sab_space_unregister(sp, q1);
  sab_space_unregister(sp, n);
  sab_space_unregister(sp, a);
  CHECK(sab_space_records_used(sp) == 0);
  sab_space_close(sp);
}

/* A RateLimit in a space: its grants under its turn's bucket lock, and a
 * caller without the turn granted only while the turn is free with nobody
 * queued for it (sab_space_rate_take's turn_free_only). */
static void test_rate(void) {
  sab_space_t *sp = open_new("rate");
  size_t rbytes = sab_rate_bytes(2), bytes = rbytes + sab_sema_bytes(1);
  uint32_t params[SAB_SPACE_NPARAMS] = {2, 0, 0, 0}, off, me, tok, info;
  CHECK(sab_space_lookup(sp, sab__lock_id(sp), "limit", 5, 11, params, (uint32_t)bytes, &off) ==
        SAB_SPACE_CREATE);
  sab_rate_t r;
  sab_sema_t s;
  CHECK(sab_rate_init(&r, at(sp, off), rbytes, 2, 1000 * MS, 0) == 0);
  CHECK(sab_sema_init(&s, (char *)at(sp, off) + rbytes, bytes - rbytes, 1) == 0);
  sab_space_publish(sp, off);
  uint32_t turn = off + (uint32_t)rbytes;
  uint64_t when = 0, wait = 0;
  CHECK(sab_space_register(sp, &me) == 0);
  /* Nobody holds the turn, nobody waits: granted without it. */
  CHECK(sab_space_rate_take(sp, turn, off, 1, &when, &wait) == SAB_OK && when > 0);
  /* The turn held: a caller without it is told to queue; its holder is
   * granted, then told how long to wait (2 grants a second). */
  CHECK(sab_space_sema_acquire(sp, me, turn, 0, &tok, NULL) == SAB_OK);
  CHECK(sab_space_rate_take(sp, turn, off, 1, &when, &wait) == SAB_TIMED_OUT);
  CHECK(sab_space_rate_take(sp, turn, off, 0, &when, &wait) == SAB_OK);
  CHECK(sab_space_rate_take(sp, turn, off, 0, &when, &wait) == SAB_PENDING);
  CHECK(wait > 0 && wait <= 1000 * MS);
  /* Handed to a waiter in another process: still not free. */
  int32_t *flag = at(sp, cells(sp, "rate-flag", 1));
  pid_t kid = fork();
  if (kid == 0) {
    uint32_t id, t;
    if (sab_space_register(sp, &id) != 0) _exit(100);
    if (sema_get(sp, id, turn, &t) != SAB_OK) _exit(101);
    __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
    for (;;) pause();
  }
  while (sab_space_sema_waiting(sp, turn) == 0) sleep_ms(1);
  /* A turn's hand-off is strict, as in one process (its first rate take
   * marked it): handed to the waiter however young, never pooled (F2). */
  CHECK(sab_space_sema_release(sp, me, turn, (int64_t)tok, &info) == (int)tok && info == 0);
  while (__atomic_load_n(flag, __ATOMIC_SEQ_CST) == 0) sleep_ms(1);
  CHECK(sab_space_rate_take(sp, turn, off, 1, &when, &wait) == SAB_TIMED_OUT);
  kill_and_reap(kid);
  /* Its holder killed: the turn comes back (to an acquire, which probes),
   * and the window still holds. */
  CHECK(sab_space_sema_acquire(sp, me, turn, 0, &tok, NULL) == SAB_OK);
  CHECK((tok & SAB_SEMA_RECOVERED) != 0);
  CHECK(sab_space_sema_release(sp, me, turn, tok & ~SAB_SEMA_RECOVERED, NULL) >= 0);
  CHECK(sab_space_rate_take(sp, turn, off, 1, &when, &wait) == SAB_PENDING);
  /* Offsets that are no RateLimit and its turn. */
  CHECK(sab_space_rate_take(sp, off, turn, 1, &when, &wait) == SAB_E_CORRUPT);
  CHECK(sab_space_rate_take(sp, turn, turn, 1, &when, &wait) == SAB_E_CORRUPT);
  CHECK(sab_space_rate_take(sp, turn + 8, off, 1, &when, &wait) == SAB_E_CORRUPT);
  sab_space_unregister(sp, me);
  sab_space_close(sp);
}

/* The exec'd half of test_open_and_names: attach, find "shared" = 42. */
static int attach_main(const char *name) {
  sab_space_t *sp;
  int created = 1;
  uint32_t off, params[SAB_SPACE_NPARAMS] = {1, 0, 0, 0};
  if (sab_space_open(name, 0, 0600, &sp, &created) != 0 || created) return 1;
  if (sab_space_lookup(sp, sab__lock_id(sp), "shared", 6, 1, params, 4, &off) != SAB_SPACE_ATTACH)
    return 2;
  return at(sp, off)[0] == 42 ? 0 : 3;
}

/* Freeing (sab_space_retire): a freed entry's room goes to the next object
 * that fits; a live user in another process keeps it until it dies; words
 * a co-tenant scribbles over a freed entry or the users table never make
 * a lookup hand out memory outside the heap. */
static void test_free(void) {
  sab_space_t *sp = open_new("free");
  uint32_t p[SAB_SPACE_NPARAMS] = {1, 0, 0, 0}, me, off, off2, freed;
  CHECK(sab_space_register(sp, &me) == 0);
  CHECK(sab_space_lookup(sp, me, "a", 1, 1, p, 100, &off) == SAB_SPACE_CREATE);
  sab_space_publish(sp, off);
  CHECK(sab_space_retire(sp, me, "a", 1, SAB_RETIRE_SELF, 0, &freed) == 1 && freed == 1);
  CHECK(sab_space_entry(sp, me, "a", 1, &(sab_space_entry_t){0}) == 0);
  CHECK(sab_space_lookup(sp, me, "b", 1, 1, p, 64, &off2) == SAB_SPACE_CREATE && off2 == off);
  sab_space_publish(sp, off2);
  CHECK(sab_space_lookup(sp, me, "c", 1, 1, p, 200, &off2) == SAB_SPACE_CREATE && off2 != off);
  sab_space_publish(sp, off2);
  /* Versions: "k" and "k\2..." go together; "kk" stays. */
  const char *keys[] = {"k", "k\002v1", "k\002v2", "kk"};
  for (int i = 0; i < 4; i++) {
    CHECK(sab_space_lookup(sp, me, keys[i], strlen(keys[i]), 1, p, 8, &off) == SAB_SPACE_CREATE);
    sab_space_publish(sp, off);
  }
  CHECK(sab_space_retire(sp, me, "k", 1, SAB_RETIRE_VERSIONS | SAB_RETIRE_SELF, 0, &freed) == 3 &&
        freed == 3);
  CHECK(sab_space_entry(sp, me, "kk", 2, &(sab_space_entry_t){0}) == 1);
  /* A user in another process keeps the room until it dies. */
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    uint32_t id, o;
    if (sab_space_register(sp, &id) != 0) _exit(100);
    int r = sab_space_lookup(sp, id, "held", 4, 1, p, 8, &o);
    if (r < 0) _exit(101);
    if (r == SAB_SPACE_CREATE) sab_space_publish(sp, o);
    if (write(ready[1], "x", 1) != 1) _exit(102);
    for (;;) pause();
  }
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  CHECK(sab_space_lookup(sp, me, "held", 4, 1, p, 8, &off) == SAB_SPACE_ATTACH);
  CHECK(sab_space_retire(sp, me, "held", 4, SAB_RETIRE_SELF, 0, &freed) == 1 && freed == 0);
  CHECK(sab_space_lookup(sp, me, "held", 4, 1, p, 8, &off2) == SAB_SPACE_ATTACH && off2 == off);
  CHECK(sab_space_retire(sp, me, "held", 4, SAB_RETIRE_SELF, 0, &freed) == 1 && freed == 0);
  kill_and_reap(pid);
  CHECK(sab_space_retire(sp, me, "held", 4, SAB_RETIRE_SELF, 0, &freed) == 1 && freed == 1);
  sab_space_usage_t u;
  sab_space_usage(sp, &u);
  CHECK(u.retired == 0 && u.objects_max == NDIR);
  /* Scribbles: every free entry's cap and off, and the users table. */
  uint32_t count = __atomic_load_n(&sab__hdr(sp)[HDR_DIR_COUNT], __ATOMIC_RELAXED);
  const uint32_t junk[] = {0xFFFFFFC0u, 64, 0x80000000u, 7, 0};
  for (unsigned j = 0; j < sizeof junk / sizeof junk[0]; j++) {
    for (uint32_t i = 0; i < count; i++) {
      sab__dirent_t *e = sab__dirent(sp, i);
      if (__atomic_load_n(&e->state, __ATOMIC_RELAXED) != DIR_FREE) continue;
      __atomic_store_n(&e->cap, junk[j], __ATOMIC_RELAXED);
      __atomic_store_n(&e->off, junk[(j + 1) % 5], __ATOMIC_RELAXED);
    }
    for (uint32_t i = 0; i < NDIR * USERS_BYTES / 4; i++) sab__users(sp, 0)[i] = junk[j] ^ i;
    char key[16];
    int n = snprintf(key, sizeof key, "after-%u", j);
    int r = sab_space_lookup(sp, me, key, (size_t)n, 1, p, 128, &off);
    CHECK(r == SAB_SPACE_CREATE);
    CHECK(off >= sp->heap_off && off % 64 == 0 && off + 128 <= sp->size);
    if (r == SAB_SPACE_CREATE) sab_space_publish(sp, off);
    CHECK(sab_space_retire(sp, me, key, (size_t)n, SAB_RETIRE_SELF, 0, &freed) >= 0);
  }
  __atomic_store_n(&sab__hdr(sp)[HDR_DIR_COUNT], NDIR + 1, __ATOMIC_RELAXED);
  CHECK(sab_space_retire(sp, me, "b", 1, SAB_RETIRE_SELF, 0, &freed) == SAB_E_CORRUPT);
  __atomic_store_n(&sab__hdr(sp)[HDR_DIR_COUNT], count, __ATOMIC_RELAXED);
  sab_space_unregister(sp, me);
  sab_space_close(sp);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "attach") == 0) return attach_main(argv[2]);
  test_open_and_names();
  test_directory();
  test_free();
  test_wait_notify_across_processes();
  test_killed_waiters();
  test_killed_in_bucket();
  test_owners();
  test_notify_races_timeout();
  test_sema();
  test_sema_fairness();
  test_rate();
  test_scribbler();
  for (int i = 0; i < nnames; i++) sab_space_unlink(names[i]);
  return report("test_space");
}
