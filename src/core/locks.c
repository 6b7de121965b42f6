/*
 * The named locks of one process (sabsync_locks.h): a table of the names
 * in use, and of the tickets held or waiting, under one mutex.
 *
 * A name's state is its held list (in grant order) and its queue (FIFO). A
 * request is grantable when it heads the queue and, exclusive, nobody holds
 * the name, or, shared, no holder is exclusive: the queue is granted from
 * its head for as long as its head is grantable (several shared at once).
 * This is the Web Locks spec's "process the lock request queue", run after
 * every change that can make a head grantable: a release, a cancel, a
 * request that joins an empty queue.
 *
 * Room: a name exists while it has a holder or a waiter; both hash tables
 * shrink again as they empty, so that a process that used a million names
 * keeps nothing of them at rest.
 */
#include "sabsync_locks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct lname_s lname_t;
typedef struct lreq_s lreq_t;

struct lreq_s {
  uint64_t ticket;
  lreq_t *tnext;         /* chain in the tickets' table */
  lname_t *nm;           /* its name */
  lreq_t *prev, *next;   /* in the name's held list or queue */
  lreq_t *gprev, *gnext; /* held: in the process's grant order */
  lreq_t *cprev, *cnext; /* held: in its agent's list */
  sab_lclient_t *cl;
  void *ctx;
  uint8_t shared, held;
};

struct lname_s {
  lname_t *hnext; /* chain in the names' table */
  uint64_t hash;
  lname_t *prev, *next; /* in the order names came into use */
  lreq_t *held, *held_tail, *queue, *queue_tail;
  uint32_t nheld, nexclusive;
  size_t len;
  uint16_t units[]; /* the name */
};

/* A chained hash table whose buckets double when it fills and halve when
 * it is an eighth full (never below MIN_BUCKETS, which stay once made). */
#define MIN_BUCKETS 64
typedef struct {
  void **b;
  size_t cap, len;
} table_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static table_t names, tickets;
static lname_t *first_name, *last_name;
static lreq_t *first_held, *last_held;
static uint64_t next_ticket = 1;

static void lock(void) {
  if (pthread_mutex_lock(&mu) != 0) abort();
}
static void unlock(void) {
  if (pthread_mutex_unlock(&mu) != 0) abort();
}

static uint64_t hash_units(const uint16_t *u, size_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the code units */
  for (size_t i = 0; i < len; i++) {
    h ^= u[i];
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}
static uint64_t hash_ticket(uint64_t t) { return t * 0x9e3779b97f4a7c15ull; }

/* The chain link of each table's items, and their hash. */
static void **name_link(void *p) { return (void **)&((lname_t *)p)->hnext; }
static uint64_t name_hash(void *p) { return ((lname_t *)p)->hash; }
static void **ticket_link(void *p) { return (void **)&((lreq_t *)p)->tnext; }
static uint64_t ticket_hash(void *p) { return hash_ticket(((lreq_t *)p)->ticket); }

/* Rehash into `cap` buckets: 0, or -1 (out of memory: the table stays as
 * it was, which still works, only with longer chains). */
static int resize(table_t *t, size_t cap, void **(*link)(void *), uint64_t (*hash)(void *)) {
  void **nb = calloc(cap, sizeof *nb);
  if (nb == NULL) return -1;
  for (size_t i = 0; i < t->cap; i++) {
    for (void *p = t->b[i], *next; p != NULL; p = next) {
      next = *link(p);
      size_t j = (size_t)hash(p) & (cap - 1);
      *link(p) = nb[j];
      nb[j] = p;
    }
  }
  free(t->b);
  t->b = nb;
  t->cap = cap;
  return 0;
}

static int table_add(table_t *t, void *p, void **(*link)(void *), uint64_t (*hash)(void *)) {
  if (t->cap == 0 && resize(t, MIN_BUCKETS, link, hash) != 0) return -1;
  if (t->len >= t->cap) (void)resize(t, t->cap * 2, link, hash);
  size_t j = (size_t)hash(p) & (t->cap - 1);
  *link(p) = t->b[j];
  t->b[j] = p;
  t->len++;
  return 0;
}

static void table_remove(table_t *t, void *p, void **(*link)(void *), uint64_t (*hash)(void *)) {
  void **at = &t->b[(size_t)hash(p) & (t->cap - 1)];
  while (*at != p) at = link(*at);
  *at = *link(p);
  t->len--;
  if (t->cap > MIN_BUCKETS && t->len < t->cap / 8) {
    (void)resize(t, t->cap / 2, link, hash);
  }
}

static lname_t *find_name(const uint16_t *u, size_t len, uint64_t h) {
  if (names.cap == 0) return NULL;
  for (lname_t *n = names.b[(size_t)h & (names.cap - 1)]; n != NULL; n = n->hnext) {
    if (n->hash == h && n->len == len && memcmp(n->units, u, len * sizeof *u) == 0) return n;
  }
  return NULL;
}

static lreq_t *find_ticket(uint64_t ticket) {
  if (tickets.cap == 0) return NULL;
  for (lreq_t *r = tickets.b[(size_t)hash_ticket(ticket) & (tickets.cap - 1)]; r != NULL;
       r = r->tnext) {
    if (r->ticket == ticket) return r;
  }
  return NULL;
}

/* ---- a name's lists ---- */

static void list_append(lreq_t **head, lreq_t **tail, lreq_t *r) {
  r->next = NULL;
  r->prev = *tail;
  if (*tail != NULL)
    (*tail)->next = r;
  else
    *head = r;
  *tail = r;
}

static void list_remove(lreq_t **head, lreq_t **tail, lreq_t *r) {
  if (r->prev != NULL)
    r->prev->next = r->next;
  else
    *head = r->next;
  if (r->next != NULL)
    r->next->prev = r->prev;
  else
    *tail = r->prev;
  r->prev = r->next = NULL;
}

static int grantable(const lname_t *n, const lreq_t *r) {
  return r->shared ? n->nexclusive == 0 : n->nheld == 0;
}

/* r (in no list) holds its name. */
static void hold(lreq_t *r) {
  lname_t *n = r->nm;
  r->held = 1;
  list_append(&n->held, &n->held_tail, r);
  n->nheld++;
  if (!r->shared) n->nexclusive++;
  r->gnext = NULL;
  r->gprev = last_held;
  if (last_held != NULL)
    last_held->gnext = r;
  else
    first_held = r;
  last_held = r;
  lreq_t *c = r->cl->held;
  r->cprev = NULL;
  r->cnext = c;
  if (c != NULL) c->cprev = r;
  r->cl->held = r;
}

/* r (held) holds its name no more. */
static void unhold(lreq_t *r) {
  lname_t *n = r->nm;
  list_remove(&n->held, &n->held_tail, r);
  n->nheld--;
  if (!r->shared) n->nexclusive--;
  if (r->gprev != NULL)
    r->gprev->gnext = r->gnext;
  else
    first_held = r->gnext;
  if (r->gnext != NULL)
    r->gnext->gprev = r->gprev;
  else
    last_held = r->gprev;
  if (r->cprev != NULL)
    r->cprev->cnext = r->cnext;
  else
    r->cl->held = r->cnext;
  if (r->cnext != NULL) r->cnext->cprev = r->cprev;
  r->held = 0;
}

/* Grant the queue from its head while the head is grantable. */
static void process(lname_t *n) {
  lreq_t *r;
  while ((r = n->queue) != NULL && grantable(n, r)) {
    list_remove(&n->queue, &n->queue_tail, r);
    hold(r);
    r->cl->granted(r->ctx);
  }
}

/* Freed requests, and freed names of up to SHORT_NAME units, kept for the
 * next ones (up to CACHED each): a lock taken and let go again and again
 * costs no allocation. */
#define SHORT_NAME 24
#define CACHED     64
static lreq_t *spare_reqs;
static lname_t *spare_names;
static unsigned nspare_reqs, nspare_names;

static lreq_t *req_alloc(void) {
  lreq_t *r = spare_reqs;
  if (r == NULL) return calloc(1, sizeof *r);
  spare_reqs = r->tnext;
  nspare_reqs--;
  memset(r, 0, sizeof *r);
  return r;
}

static lname_t *name_alloc(size_t len) {
  if (len > SHORT_NAME) return calloc(1, sizeof(lname_t) + len * sizeof(uint16_t));
  lname_t *n = spare_names;
  if (n == NULL) return calloc(1, sizeof(lname_t) + SHORT_NAME * sizeof(uint16_t));
  spare_names = n->hnext;
  nspare_names--;
  memset(n, 0, sizeof *n);
  return n;
}

static void name_release(lname_t *n) {
  if (n->len > SHORT_NAME || nspare_names >= CACHED) {
    free(n);
    return;
  }
  n->hnext = spare_names;
  spare_names = n;
  nspare_names++;
}

static lname_t *name_new(const uint16_t *u, size_t len, uint64_t h) {
  lname_t *n = name_alloc(len);
  if (n == NULL) return NULL;
  n->hash = h;
  n->len = len;
  if (len > 0) memcpy(n->units, u, len * sizeof *u);
  if (table_add(&names, n, name_link, name_hash) != 0) {
    name_release(n);
    return NULL;
  }
  n->prev = last_name;
  if (last_name != NULL)
    last_name->next = n;
  else
    first_name = n;
  last_name = n;
  return n;
}

/* Free n if nobody holds or waits for it. */
static void name_maybe_free(lname_t *n) {
  if (n->held != NULL || n->queue != NULL) return;
  table_remove(&names, n, name_link, name_hash);
  if (n->prev != NULL)
    n->prev->next = n->next;
  else
    first_name = n->next;
  if (n->next != NULL)
    n->next->prev = n->prev;
  else
    last_name = n->prev;
  name_release(n);
}

static void req_free(lreq_t *r) {
  table_remove(&tickets, r, ticket_link, ticket_hash);
  if (nspare_reqs >= CACHED) {
    free(r);
    return;
  }
  r->tnext = spare_reqs;
  spare_reqs = r;
  nspare_reqs++;
}

/* Robbed by a steal: out of every list, its agent told. */
static void rob(lreq_t *r) {
  sab_lclient_t *cl = r->cl;
  unhold(r);
  if (cl->nrobbed == cl->caprobbed) {
    size_t cap = cl->caprobbed ? cl->caprobbed * 2 : 8;
    uint64_t *p = realloc(cl->robbed, cap * sizeof *p);
    /* Out of memory: the agent is not told, and learns of the loss only
     * when its release answers 0. */
    if (p != NULL) {
      cl->robbed = p;
      cl->caprobbed = cap;
    }
  }
  if (cl->nrobbed < cl->caprobbed) cl->robbed[cl->nrobbed++] = r->ticket;
  req_free(r);
  if (cl->watch != NULL) {
    void *w = cl->watch;
    cl->watch = NULL;
    cl->stolen(w);
  }
}

int sab_locks_watch(sab_lclient_t *cl, void *watch) {
  lock();
  int armed = cl->nrobbed == 0;
  if (armed) cl->watch = watch;
  unlock();
  return armed;
}

int sab_locks_unwatch(sab_lclient_t *cl, void *watch) {
  lock();
  int was = cl->watch == watch;
  if (was) cl->watch = NULL;
  unlock();
  return was;
}

int sab_locks_request(sab_lclient_t *cl, const uint16_t *name, size_t len, int shared, int how,
                      void *ctx, uint64_t *ticket) {
  if (len > SAB_LOCKS_NAME_MAX) return SAB_LOCKS_E_NAME;
  if (how == SAB_LOCKS_STEAL) shared = 0; /* the spec refuses a shared steal before this */
  uint64_t h = hash_units(name, len);
  lock();
  lname_t *n = find_name(name, len, h);
  int now = n == NULL || (n->queue == NULL && (shared ? n->nexclusive == 0 : n->nheld == 0));
  if (!now && how == SAB_LOCKS_IF_AVAILABLE) {
    unlock();
    return SAB_LOCKS_UNAVAILABLE;
  }
  if (!now && how == SAB_LOCKS_WAIT && ctx == NULL) {
    unlock();
    return SAB_LOCKS_WOULD_WAIT;
  }
  if (tickets.len >= SAB_LOCKS_MAX) {
    unlock();
    return SAB_LOCKS_E_FULL;
  }
  lreq_t *r = req_alloc();
  if (r == NULL || (n == NULL && (n = name_new(name, len, h)) == NULL)) {
    free(r);
    unlock();
    return SAB_LOCKS_E_NOMEM;
  }
  r->ticket = next_ticket;
  if (table_add(&tickets, r, ticket_link, ticket_hash) != 0) {
    free(r);
    name_maybe_free(n);
    unlock();
    return SAB_LOCKS_E_NOMEM;
  }
  next_ticket++;
  r->nm = n;
  r->cl = cl;
  r->ctx = ctx;
  r->shared = shared != 0;
  *ticket = r->ticket;
  int answer = SAB_LOCKS_GRANTED;
  if (how == SAB_LOCKS_STEAL) {
    while (n->held != NULL) rob(n->held);
    hold(r);
  } else if (now) {
    hold(r);
  } else {
    list_append(&n->queue, &n->queue_tail, r);
    answer = SAB_LOCKS_QUEUED;
  }
  unlock();
  return answer;
}

int sab_locks_release(sab_lclient_t *cl, uint64_t ticket) {
  lock();
  lreq_t *r = find_ticket(ticket);
  if (r == NULL || !r->held || r->cl != cl) {
    unlock();
    return 0;
  }
  lname_t *n = r->nm;
  unhold(r);
  req_free(r);
  process(n);
  name_maybe_free(n);
  unlock();
  return 1;
}

int sab_locks_cancel(uint64_t ticket) {
  lock();
  lreq_t *r = find_ticket(ticket);
  if (r == NULL || r->held) {
    unlock();
    return 0;
  }
  lname_t *n = r->nm;
  list_remove(&n->queue, &n->queue_tail, r);
  req_free(r);
  /* A waiting exclusive head gone: the shared ones behind it may go. */
  process(n);
  name_maybe_free(n);
  unlock();
  return 1;
}

size_t sab_locks_take_stolen(sab_lclient_t *cl, uint64_t *out, size_t cap) {
  lock();
  size_t k = cl->nrobbed < cap ? cl->nrobbed : cap;
  if (k > 0) {
    memcpy(out, cl->robbed, k * sizeof *out);
    memmove(cl->robbed, cl->robbed + k, (cl->nrobbed - k) * sizeof *out);
  }
  cl->nrobbed -= k;
  if (cl->nrobbed == 0) {
    free(cl->robbed);
    cl->robbed = NULL;
    cl->caprobbed = 0;
  }
  unlock();
  return k;
}

void sab_locks_leave(sab_lclient_t *cl) {
  lock();
  lreq_t *r;
  while ((r = cl->held) != NULL) {
    lname_t *n = r->nm;
    unhold(r);
    req_free(r);
    process(n);
    name_maybe_free(n);
  }
  free(cl->robbed);
  cl->robbed = NULL;
  cl->nrobbed = cl->caprobbed = 0;
  cl->watch = NULL;
  unlock();
}

void sab_locks_query(sab_locks_each_fn each, void *u) {
  lock();
  for (lreq_t *r = first_held; r != NULL; r = r->gnext) {
    each(u, 1, r->nm->units, r->nm->len, r->shared, r->cl);
  }
  for (lname_t *n = first_name; n != NULL; n = n->next) {
    for (lreq_t *r = n->queue; r != NULL; r = r->next)
      each(u, 0, n->units, n->len, r->shared, r->cl);
  }
  unlock();
}

void sab_locks_counts(size_t *requests, size_t *nnames) {
  lock();
  *requests = tickets.len;
  *nnames = names.len;
  unlock();
}
