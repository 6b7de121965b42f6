/*
 * The death watcher of a space: a thread per mapping that notices at once
 * when a process holding slots of the space dies, without polling the
 * living.
 *
 * A lifeline (lifeline.c) says whether an owner lives when asked; nothing
 * tells anyone when a process is SIGKILLed. Each slot carries its tenant's
 * pid as a hint, which this thread turns into pidfds (pidfd_open), kept in
 * an epoll set: the kernel makes a pidfd readable when its process exits.
 * Then the thread reaps the space (sab_space_reap: every live slot probed
 * through its lifeline, the dead buried, their watchers woken), so a
 * waiter for a lock that a killed process held is woken within about a
 * millisecond. The hint is never trusted: only slots whose lifelines the
 * kernel holds are watched (see rescan), so a pid written by a co-tenant
 * into a free slot costs nothing, and one written into a held slot costs a
 * pidfd and, when that process exits, one reap that finds nobody dead; a
 * pid reused by another process, a pid overwritten by a co-tenant, or a
 * kernel without pidfds, falls back on the waiters' own periodic reaps
 * (the binding's WATCH_NS). New tenants are found, and gone ones
 * forgotten, by reading the slots again every RESCAN_NS. A reap the
 * watcher runs is bounded as every reap is (sab_space_reap: one lock
 * deadline for the pass), so a stop waits for at most that.
 *
 * Started with the first registration of this process in the space and
 * stopped with the last (the binding: each start is paired with a stop); a
 * forked child has no watcher (space.c's fork handler forgets it).
 */
#define _GNU_SOURCE
#include "space_lock.h"
#include "glibc_old.h"

#if defined(__linux__)

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define RESCAN_NS (100ull * 1000000ull)
#define REAP_NS   (50ull * 1000000ull)
#define MAX_PIDS  NSLOTS

struct sab__watch_s {
  pthread_t thread;
  int epfd, stopfd;
  /* The thread's own: pids it holds a pidfd of. */
  uint32_t npids;
  int32_t pids[MAX_PIDS];
  int fds[MAX_PIDS];
};

static void forget(struct sab__watch_s *w, uint32_t k) {
  sab__pidfd_close(w->fds[k]); /* leaves the epoll set with it */
  w->npids--;
  w->pids[k] = w->pids[w->npids];
  w->fds[k] = w->fds[w->npids];
}

/* Watch exactly the pids that slots whose lifelines the kernel holds
 * hint at: a pid no such slot names any more is forgotten (its pidfd
 * closed), and one a held slot names is added. A slot word is only a
 * claim: one that reads LIVE with its lifeline free (a forged word, or a
 * dead tenant a reap will bury) is not watched, so writing slot words
 * cannot fill the table or hold pidfds of long-lived processes; only
 * slots whose lifelines are held count, and there are NSLOTS of those at
 * most, so the table (one entry per distinct pid) never overflows and a
 * tenant that registers later is always watched. */
static void rescan(sab_space_t *sp, struct sab__watch_s *w) {
  int32_t self = (int32_t)getpid(), want[MAX_PIDS];
  uint32_t nwant = 0;
  for (uint32_t i = 0; i < NSLOTS; i++) {
    uint32_t id = sab__slot_live_id(sp, i);
    if (id == 0) continue;
    int32_t pid = (int32_t)__atomic_load_n(&sab__slot(sp, i)->pid, __ATOMIC_RELAXED);
    if (pid <= 0 || pid == self || sab__slot_alive(sp, id) <= 0) continue;
    uint32_t k = 0;
    while (k < nwant && want[k] != pid) k++;
    if (k == nwant) want[nwant++] = pid; /* nwant <= live slots <= NSLOTS */
  }
  for (uint32_t k = 0; k < w->npids;) {
    uint32_t j = 0;
    while (j < nwant && want[j] != w->pids[k]) j++;
    if (j == nwant) {
      forget(w, k); /* moves the last entry to k: look at k again */
    } else {
      k++;
    }
  }
  for (uint32_t j = 0; j < nwant && w->npids < MAX_PIDS; j++) {
    uint32_t k = 0;
    while (k < w->npids && w->pids[k] != want[j]) k++;
    if (k < w->npids) continue;
    int fd = sab__pidfd_open(want[j]);
    if (fd < 0) continue; /* gone already (a reap finds it), or no pidfds */
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.u32 = (uint32_t)want[j];
    if (sab__pidfd_watch(w->epfd, fd, &ev) != 0) {
      sab__pidfd_close(fd);
      continue;
    }
    w->pids[w->npids] = want[j];
    w->fds[w->npids] = fd;
    w->npids++;
  }
}

static void *watch_main(void *arg) {
  sab_space_t *sp = arg;
  struct sab__watch_s *w = sp->watch;
  uint64_t last = 0;
  for (;;) {
    uint64_t now = sab_now();
    if (now - last >= RESCAN_NS) {
      rescan(sp, w);
      last = now;
    }
    struct epoll_event evs[16];
    int n = epoll_wait(w->epfd, evs, 16, (int)(RESCAN_NS / 1000000u));
    int exited = 0;
    for (int e = 0; e < n; e++) {
      int32_t pid = (int32_t)evs[e].data.u32;
      if (pid == 0) return NULL; /* the stop event */
      for (uint32_t k = 0; k < w->npids; k++) {
        if (w->pids[k] == pid) {
          forget(w, k);
          exited = 1;
          break;
        }
      }
    }
    if (exited) {
      /* A pass bounded well within a close's second: a stop waits for it. */
      sab_space_deadline(sab_now() + REAP_NS);
      sab_space_reap(sp);
      sab_space_deadline(UINT64_MAX);
    }
  }
}

/* Guards every mapping's watch and watch_users (starts and stops are
 * rare: a thread's first and last use of a space). */
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;

static int start(sab_space_t *sp) {
  struct sab__watch_s *w = calloc(1, sizeof *w);
  if (w == NULL) return SAB_E_SPACE_SYS;
  w->epfd = epoll_create1(EPOLL_CLOEXEC);
  w->stopfd = eventfd(0, EFD_CLOEXEC);
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.u32 = 0;
  if (w->epfd < 0 || w->stopfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->stopfd, &ev) != 0) {
    goto fail;
  }
  sp->watch = w;
  if (pthread_create(&w->thread, NULL, watch_main, sp) != 0) {
    sp->watch = NULL;
    goto fail;
  }
  return 0;
fail:
  if (w->epfd >= 0) close(w->epfd);
  if (w->stopfd >= 0) close(w->stopfd);
  free(w);
  return SAB_E_SPACE_SYS;
}

static void stop(sab_space_t *sp) {
  struct sab__watch_s *w = sp->watch;
  if (w == NULL) return;
  uint64_t one = 1;
  if (write(w->stopfd, &one, sizeof one) != sizeof one) abort(); /* an eventfd takes it */
  pthread_join(w->thread, NULL);
  while (w->npids > 0) forget(w, 0);
  close(w->epfd);
  close(w->stopfd);
  free(w);
  sp->watch = NULL;
}

int sab_space_watch_start(sab_space_t *sp) {
  int r = 0;
  if (pthread_mutex_lock(&watch_mu) != 0) abort();
  if (sp->watch_users++ == 0) r = start(sp);
  if (r != 0) sp->watch_users = 0;
  pthread_mutex_unlock(&watch_mu);
  return r;
}

void sab_space_watch_stop(sab_space_t *sp) {
  if (pthread_mutex_lock(&watch_mu) != 0) abort();
  if (sp->watch_users > 0 && --sp->watch_users == 0) stop(sp);
  pthread_mutex_unlock(&watch_mu);
}

#endif /* __linux__ */
