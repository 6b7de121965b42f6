/*
 * Named locks of the Web Locks API for the threads of one process
 * (src/core/locks.c): one table per process of the names in use, each with
 * its holders and its queue of requests, FIFO per name.
 *
 * A name is any sequence of UTF-16 code units (lone surrogates included:
 * two different JS strings are two names). A name takes room only while a
 * request holds it or waits for it; the last one out frees it.
 *
 * Every request names its agent (a sab_lclient_t: one per JS thread) and
 * gets a ticket, a number unique for the process's life. A request that
 * waits carries `ctx`, which the table hands to its agent's `granted` hook
 * when the request is granted; a holder robbed by a steal is told through
 * its agent's `stolen` hook, with the `watch` it armed. Both hooks run
 * under the table's lock, and must not call back into the table.
 */
#ifndef SABSYNC_LOCKS_H
#define SABSYNC_LOCKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest name, in UTF-16 code units. */
#define SAB_LOCKS_NAME_MAX 1024
/* The most requests held or waiting at once in a process. */
#define SAB_LOCKS_MAX (1u << 20)

/* How a request asks (request's `how`). */
enum {
  SAB_LOCKS_WAIT = 0,         /* queue behind the others */
  SAB_LOCKS_IF_AVAILABLE = 1, /* granted now, or not at all */
  SAB_LOCKS_STEAL = 2         /* every holder of the name loses it; granted now */
};

/* What sab_locks_request answers (negative: an error). */
enum {
  SAB_LOCKS_UNAVAILABLE = 0, /* SAB_LOCKS_IF_AVAILABLE, and not grantable now */
  SAB_LOCKS_GRANTED = 1,     /* held: *ticket */
  SAB_LOCKS_QUEUED = 2,      /* waits: *ticket, ctx goes to `granted` later */
  SAB_LOCKS_WOULD_WAIT = 3,  /* not grantable, and no ctx given: nothing done */
  SAB_LOCKS_E_FULL = -1,     /* SAB_LOCKS_MAX requests already */
  SAB_LOCKS_E_NOMEM = -2,
  SAB_LOCKS_E_NAME = -3 /* longer than SAB_LOCKS_NAME_MAX */
};

typedef struct sab_lclient_s sab_lclient_t;
struct sab_lclient_s {
  /* Set by the caller before its first request, then read only. */
  void (*granted)(void *ctx);  /* a waiting request of this agent is held */
  void (*stolen)(void *watch); /* a holding one was robbed (take_stolen) */
  uint32_t pid, thread;        /* what query() says of it */
  /* The table's, under its lock. */
  void *held;  /* its held requests, for sab_locks_leave */
  void *watch; /* armed by sab_locks_watch; NULL once `stolen` took it */
  uint64_t *robbed;
  size_t nrobbed, caprobbed;
};

/* Ask for `name` (`len` code units) in shared or exclusive mode. With
 * `ctx` NULL, a request that would wait answers SAB_LOCKS_WOULD_WAIT and
 * leaves no trace (the caller makes its ctx and asks again); *ticket is
 * written under the table's lock, before any `granted` can run. */
int sab_locks_request(sab_lclient_t *cl, const uint16_t *name, size_t len, int shared, int how,
                      void *ctx, uint64_t *ticket);
/* Let go of a held ticket of `cl`: 1, or 0 when it holds no such ticket
 * (robbed by a steal meanwhile, or never its own). Grants the next. */
int sab_locks_release(sab_lclient_t *cl, uint64_t ticket);
/* Take a waiting ticket out of its queue: 1, or 0 when it is not waiting
 * (granted: its `granted` has run or is running). */
int sab_locks_cancel(uint64_t ticket);
/* Arm `watch`, handed to `stolen` at the next robbery: 1, or 0 (not
 * armed) when tickets were robbed since take_stolen last took them all. */
int sab_locks_watch(sab_lclient_t *cl, void *watch);
/* Disarm `watch`: 1, or 0 when `stolen` took it first. */
int sab_locks_unwatch(sab_lclient_t *cl, void *watch);
/* The tickets of `cl` robbed since the last call, up to `cap`; how many. */
size_t sab_locks_take_stolen(sab_lclient_t *cl, uint64_t *out, size_t cap);
/* The agent is gone: every lock it holds is released (its waiting
 * requests are its caller's to cancel first). */
void sab_locks_leave(sab_lclient_t *cl);

/* A snapshot, under the table's lock: `each` for every held request in
 * the order they were granted (held = 1), then every waiting one, name by
 * name in the order the names came into use, each name's in queue order. */
typedef void (*sab_locks_each_fn)(void *u, int held, const uint16_t *name, size_t len, int shared,
                                  const sab_lclient_t *cl);
void sab_locks_query(sab_locks_each_fn each, void *u);

/* How many requests are held or waiting, and how many names are in use. */
void sab_locks_counts(size_t *requests, size_t *names);

#ifdef __cplusplus
}
#endif

#endif /* SABSYNC_LOCKS_H */
