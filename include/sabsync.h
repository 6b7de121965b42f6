/*
 * sabsync core: a parking lot of address-keyed FIFO wait queues.
 *
 * This header never includes node_api.h: the core is plain C11 and is built
 * and tested on its own (test/c/). The Node-API binding (src/napi/) is one
 * client of it.
 *
 * Model. A waiter record is queued on the 4- or 8-byte cell it waits on, in
 * the bucket its byte address hashes to. Each bucket has one lock and one
 * FIFO list; records of different addresses that share a bucket are skipped
 * by address, so every address sees its own FIFO order, blocking and async
 * waiters alike. A record's state leaves WAITING only under its bucket lock,
 * which is what makes notify's count exact and a wake racing a timeout
 * answer one way only.
 */
#ifndef SABSYNC_H
#define SABSYNC_H

#include <stddef.h>
#include <stdint.h>

#ifdef SAB_PARKER_UV
#include <uv.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* log2 of the number of buckets. JS asks the addon for a bucket (lib/lot.js). */
#define SAB_BUCKET_BITS 10
#define SAB_BUCKETS     (1u << SAB_BUCKET_BITS)
/* The per-bucket waiter counters are this many int32 apart, one cache line. */
#define SAB_COUNT_STRIDE 16

/* Results, turned into strings only at the JS edge. */
typedef enum {
  SAB_OK = 0,        /* woken by a notify */
  SAB_NOT_EQUAL = 1, /* the cell did not hold the expected value */
  SAB_TIMED_OUT = 2, /* the deadline passed while still queued */
  SAB_CANCELLED = 3, /* taken out of the queue by its owner (abort, teardown) */
  SAB_PENDING = 4,   /* still queued: the caller must park, or settle later */
  SAB_OWNER_DEAD = 5 /* not queued: an owner died since the caller looked */
} sab_result_t;

/* A record's kind: blocking, or async; an async record's kind also says
 * which wake callback it has (SAB_WAITER_ASYNC + its index in the lot's
 * table of callbacks, lot.c), so that no record carries a pointer to it. */
typedef enum { SAB_WAITER_BLOCKING = 0, SAB_WAITER_ASYNC = 1 } sab_waiter_kind_t;

typedef struct sab_waiter_s sab_waiter_t;

/*
 * Called for an async waiter that a notify moved to NOTIFIED, on the
 * notifier's thread, after the bucket lock is released. From the moment
 * the state becomes NOTIFIED until this callback returns, the record
 * belongs to the notifier: its owner must not free it (sab_wait_cancel
 * answers SAB_OK to tell the owner that a delivery is on its way).
 */
typedef void (*sab_wake_cb)(sab_waiter_t *w);

/*
 * A primitive whose records need more than a wake when an owner dies (the
 * token semaphore reclaims the slots of dead holders) gives its records a
 * death hook. At every death the lot calls it once per address, under the
 * bucket lock, with the oldest record of that address that has one; the
 * hook may dequeue records of that address only (sab__dequeue_locked, into
 * `wakes`, which the lot runs after unlocking). The lot knows nothing else
 * of its clients.
 */
struct sab__bucket_s;
struct sab__wake_list_s;
typedef void (*sab_death_cb)(struct sab__bucket_s *bucket, sab_waiter_t *oldest,
                             struct sab__wake_list_s *wakes);

/* Waiter states (the `state` word), one table for both memories: a record
 * of a shared space has the same states (src/core/space_lot.c), and 0, the
 * state of zeroed memory, is none that a queued record has. */
enum {
  SAB_W_IDLE = 0,      /* not queued, nothing final yet (a space's record taken) */
  SAB_W_WAITING = 1,   /* queued, its thread running (spinning, or async) */
  SAB_W_PARKED = 2,    /* queued, its thread asleep on `state` (futex) */
  SAB_W_NOTIFIED = 3,  /* dequeued by a notify */
  SAB_W_TIMED_OUT = 4, /* dequeued by its deadline */
  SAB_W_CANCELLED = 5  /* dequeued by its owner */
};

struct sab_waiter_s {
  /* Guarded by the bucket lock while the record is queued. Once a notify
   * has dequeued an async record, `next` links the notifier's list of
   * records to wake after unlocking, and from the moment its wake callback
   * is called it is the callback's (async.c queues the record with it);
   * the lot never touches either again. */
  sab_waiter_t *next;
  sab_waiter_t *prev;
  uintptr_t addr;
  /*
   * WAITING/PARKED -> NOTIFIED | TIMED_OUT | CANCELLED only under the bucket
   * lock. WAITING -> PARKED is the waiter's own (a compare-exchange), and
   * only tells the notifier that a wake syscall is needed; PARKED -> WAITING
   * is a nudge's (sab_nudge_all, under the bucket lock, with `nudged`).
   */
  uint32_t state;
  /* Set by sab_nudge_all under the bucket lock; read by the parker;
   * cleared when sab_wait_park returns. Blocking records only. */
  uint32_t nudged;
  uint8_t kind; /* SAB_WAITER_BLOCKING, or SAB_WAITER_ASYNC + callback index */
  /* The record's owner's: the lot never reads or writes them, and
   * sab_waiter_init_* leave them as they are (the binding keeps flags and
   * where the record lies in its pool there: src/napi/pool.h). They fill
   * what would be padding. */
  uint8_t user8;
  uint16_t user16;
  /* An owner whose death wakes this record (SAB_WATCH_ANY: any death;
   * 0: none). Set by sab_wait_enqueue_watch. */
  uint32_t watch;
  /* A value handed to the record with its wake (token semaphores). */
  uint32_t token;
  /* The owner id of the thread the record waits for, and what the record's
   * primitive needs to find its state (a token semaphore: its
   * sab_sema_ask_t).
   * Set before the record is queued; read under the bucket lock, and only
   * by the record's death hook: a record without one may keep anything in
   * ctx (the binding's waitAsync records keep their promise's deferred). */
  uint32_t owner;
  const void *ctx;
  sab_death_cb on_death; /* NULL, or the primitive's death hook (above) */
#ifdef SAB_PARKER_UV
  uv_mutex_t mu; /* blocking records only: the portable parker */
  uv_cond_t cv;
#endif
};

/* Monotonic clock, nanoseconds. */
uint64_t sab_now(void);

/* Spinning helpers for clients that poll briefly before they sleep:
 * whether spinning can help (more than one CPU is ours), and a CPU pause. */
int sab_spin_allowed(void);
void sab_cpu_relax(void);
/* How long an event loop watches for a wake before it sleeps. */
#define SAB_LOOP_SPIN_NS 4000

/* Prepare a record. A blocking record lives in its thread's stack frame.
 * An async record's `wake` is one of at most 8 distinct callbacks in the
 * process (the lot keeps them in a table; the record, their index). */
void sab_waiter_init_blocking(sab_waiter_t *w);
void sab_waiter_init_async(sab_waiter_t *w, sab_wake_cb wake);
/* Release what init acquired (the portable parker's mutex and condvar). */
void sab_waiter_destroy(sab_waiter_t *w);

/*
 * Under the bucket lock: load the cell (size 4 or 8, seq-cst), compare with
 * `expected`, and either answer SAB_NOT_EQUAL or queue `w` at the tail and
 * answer SAB_PENDING.
 */
int sab_wait_enqueue(sab_waiter_t *w, const void *cell, int size, int64_t expected);

/*
 * Owners. Lock-like primitives store the id of the thread that holds them
 * in shared memory; ids come from sab_owner_new, are never reused, and are
 * marked dead by sab_owner_died when their thread ends. A waiter that saw
 * a live owner in a word queues with sab_wait_enqueue_watch: the death of
 * that owner (or of any owner, with SAB_WATCH_ANY) wakes it, so that it can
 * look again and take over. `epoch` is sab_death_epoch() read before the
 * caller looked at the owner: if any owner died since, the record is not
 * queued and SAB_OWNER_DEAD is answered (after SAB_NOT_EQUAL is ruled out).
 */
#define SAB_WATCH_ANY 0xFFFFFFFFu
uint32_t sab_owner_new(void);
int sab_owner_alive(uint32_t id);
void sab_owner_died(uint32_t id);
uint32_t sab_death_epoch(void);
int sab_wait_enqueue_watch(sab_waiter_t *w, const void *cell, int size, int64_t expected,
                           uint32_t watch, uint32_t epoch);

/*
 * Blocking records: spin briefly, then sleep until the record leaves the
 * queue or `deadline` (sab_now() scale; UINT64_MAX = none) passes. Answers
 * SAB_OK (notified), SAB_TIMED_OUT / SAB_CANCELLED (dequeued by someone
 * else), or SAB_PENDING (the deadline passed, still queued: call
 * sab_wait_cancel, or park again). Spurious wakes are absorbed here.
 */
int sab_wait_park(sab_waiter_t *w, uint64_t deadline);

/*
 * Take `w` out of its queue if it is still there, marking it `why`
 * (SAB_TIMED_OUT or SAB_CANCELLED), and answer `why`. If it already left,
 * answer how: SAB_OK when a notify took it (for an async record: its wake
 * callback runs or has run), or the earlier state.
 */
int sab_wait_cancel(sab_waiter_t *w, int why);

/* Blocking wait in one call: enqueue, park until `timeout_ns` has passed
 * (UINT64_MAX = forever), settle. */
int sab_wait(const void *cell, int size, int64_t expected, uint64_t timeout_ns);

/* Wake up to `count` waiters on `addr`, oldest first; answer how many. The
 * address is only a key: it is never dereferenced. */
uint64_t sab_notify(uintptr_t addr, uint64_t count);

/* How many records are queued on `addr`. */
uint32_t sab_waiters(uintptr_t addr);

/* Wake every queued blocking waiter without dequeuing it (a spurious wake),
 * so that each one re-checks why it waits (process exit, the binding's
 * watchdog). Its sab_wait_park answers SAB_PENDING, whether it was asleep
 * yet or not. Answers how many records it nudged. */
unsigned sab_nudge_all(void);

/* The bucket of an address, and the per-bucket queued-record counters
 * (SAB_BUCKETS * SAB_COUNT_STRIDE int32, bucket b at b * SAB_COUNT_STRIDE).
 * A counter is raised before the enqueueing waiter loads its cell. */
uint32_t sab_bucket_of(uintptr_t addr);
int32_t *sab_bucket_counts(void);

/* Errors of the token semaphore and the rate limiter: negative, as libuv's. */
enum {
  SAB_E_BAD_TOKEN = -1, /* the slot is not out, or not held by the caller */
  SAB_E_CORRUPT = -2,   /* the shared memory does not hold a valid state */
  SAB_E_INVAL = -3      /* an argument out of range */
};

/*
 * The token semaphore (src/core/sema.c). Its state lives in caller-provided
 * shared memory (the layout and the protocol of its words are in sema.c);
 * its waiters queue in the lot under the key base + SAB_SEMA_KEY_OFFSET,
 * an address no Int32Array or BigInt64Array cell has (cells are 4-byte
 * aligned), so a plain wait or notify never meets them; the key is in the
 * bucket of word 1 (the lot hashes addr >> 2), whose counter JS's fast
 * path reads. Tokens are slot numbers 0 .. nr-1; each slot's holder word
 * records the owner id of its holder, so that slots held by a thread that
 * died come back (reclaimed lazily, see sema.c).
 *
 * A sab_sema_t is a checked view of the memory, made per call or kept by a
 * queued record's ask (w->ctx): nr comes from the view, never again from
 * the shared memory, so a corrupted word cannot send an index out of
 * bounds.
 */
#define SAB_SEMA_MAGIC 0x53454D31 /* "SEM1" */
/* Header words that JS reads too (Sema.from, resumeFn's watch, the fast
 * path): the magic, the count of frees (a value that changes with every
 * free), nr; the header's bytes. Layout: sema.c. */
#define SAB_SEMA_W_MAGIC    0
#define SAB_SEMA_W_AVAIL    1
#define SAB_SEMA_W_NR       2
#define SAB_SEMA_W_NEXT     3 /* where a search for a free slot starts (a hint) */
#define SAB_SEMA_KEY_OFFSET 5 /* the waiters' lot key: base + 5, in word 1's bucket */
/* The holder words follow the header and nr reserved words (JS's fast path
 * takes and gives slots there); a free slot's holder is 0 or this. */
#define SAB_SEMA_HELD_RECOVERED 0x40000000u
#define SAB_SEMA_HEADER_BYTES   32
#define SAB_SEMA_MAX            0x100000u /* the most slots */
#define SAB_SEMA_NO_TOKEN       0xFFFFFFFFu
#define SAB_SEMA_RECOVERED      0x80000000u /* in a token: its last holder died */
/* sab_sema_release's *info bits. */
#define SAB_SEMA_HANDED_SELF 1u /* the slot went to a waiter of the same owner */
#define SAB_SEMA_POOLED      2u /* the slot went to the pool (no waiter) */

typedef struct {
  int32_t *base;
  uint32_t nr;
  /* The fairness bound, from the view's maker (never from shared memory):
   * a waiter queued for fair_ns or more is handed the next free token, and
   * nobody takes one past it; a younger one is only woken to try again
   * (a running thread may take the token first). 0: strict hand-off, FIFO.
   * sab_sema_init and sab_sema_open set SAB_SEMA_FAIR_NS. */
  uint64_t fair_ns;
} sab_sema_t;
#define SAB_SEMA_FAIR_NS 1000000u /* 1 ms, as the Mutex's */

/*
 * One acquire that may queue: the view it asks through, and when it first
 * asked (sab_now() scale; 0: not yet, set by its first sab_sema_ask). The
 * queue is in order of since, and a record that asked fair_ns ago or more
 * is handed tokens directly (sema.c F1, F2); an acquire woken to try again
 * asks again with the same ask, and so keeps its place. A queued record's
 * ctx points to its ask, which must outlive its stay in the queue: it lies
 * in the blocking waiter's frame, or in the async record. (Kept here, not
 * in sab_waiter_t, which every plain wait's record is.)
 */
typedef struct sab_sema_ask_s {
  sab_sema_t view;
  uint64_t since;
  /* Set (under the bucket lock) while the acquire was woken to try again
   * and has not asked again or given up: it is then on its bucket's list
   * of such asks (sema.c F5), which keeps its place while it is off the
   * queue. Start at 0 (sab_sema_ask_init); only sema.c writes them. */
  struct sab_sema_ask_s *rnext, *rprev;
  uint32_t retrying;
} sab_sema_ask_t;

/* An ask through view s that has not asked yet. */
void sab_sema_ask_init(sab_sema_ask_t *a, const sab_sema_t *s);
/* The end of an acquire that was woken to try again and will not ask
 * again (its record is freed: its promise was settled otherwise): its wake
 * goes to the next waiter, as sab_sema_give_back's. Nothing if it asked
 * again since. */
void sab_sema_ask_done(sab_sema_ask_t *a);

/* Bytes for nr slots (a multiple of 8), or 0 if nr is 0 or too large. */
size_t sab_sema_bytes(uint32_t nr);
/* Initialise `bytes` of 8-aligned memory as a semaphore of nr free slots
 * (nobody may use it meanwhile), and make the view. 0 or SAB_E_INVAL. */
int sab_sema_init(sab_sema_t *s, void *mem, size_t bytes, uint32_t nr);
/* Make a view of a semaphore initialised elsewhere: 0 or SAB_E_CORRUPT. */
int sab_sema_open(sab_sema_t *s, void *mem, size_t bytes);
/* Whether a view kept from sab_sema_open still matches its memory's header
 * (overwritten, or made a semaphore of another size: SAB_E_CORRUPT). */
int sab_sema_check(const sab_sema_t *s);

/*
 * Take a slot for `owner` if one is free: SAB_OK with *token, or
 * SAB_TIMED_OUT when none is free, or a waiter queued the fairness bound
 * ago or more waits (sema.c F1). SAB_E_CORRUPT on a broken state. A token
 * is the slot, | SAB_SEMA_RECOVERED if its last holder died.
 */
int sab_sema_try(const sab_sema_t *s, uint32_t owner, uint32_t *token);
/*
 * Take a slot for `owner` through a->view, or queue `w` for one: SAB_OK
 * with *token, or SAB_PENDING with `w` queued (w->ctx = a); its slot then
 * arrives with its wake in w->token (SAB_SEMA_NO_TOKEN: woken without one,
 * to try again, or by a stray notify: ask again with the same `a`, and at
 * least once even past a deadline). With w == NULL it does not queue
 * (SAB_TIMED_OUT), but still asks in the place a->since gives it: a
 * retry's last try. Sets a->since on the first ask. SAB_E_CORRUPT on a
 * broken state.
 */
int sab_sema_ask(sab_sema_ask_t *a, uint32_t owner, sab_waiter_t *w, uint32_t *token);

/*
 * Give back a slot `owner` holds: to the oldest waiter if it has waited
 * the view's fair_ns or is `owner`'s own, else to the pool, waking the
 * oldest waiter (if any) to try again (sema.c F1, F2). slot < 0: the slot
 * `owner` got most recently. Answers the slot, or SAB_E_BAD_TOKEN (not
 * out, not the owner's, or none held), or SAB_E_CORRUPT; *info (may be
 * NULL) gets SAB_SEMA_HANDED_SELF/POOLED.
 */
int sab_sema_release(const sab_sema_t *s, uint32_t owner, int64_t slot, uint32_t *info);

/* A token handed to ask a's record that will never use it (its thread
 * ends, or it gave up after the handoff): release it if `owner` still
 * holds it; SAB_SEMA_NO_TOKEN (a wake to try again): pass the wake on. */
void sab_sema_give_back(sab_sema_ask_t *a, uint32_t owner, uint32_t token);

/* Waiters, all threads: those queued, and those woken to try again that
 * have not asked again yet (F5). */
uint32_t sab_sema_waiting(const sab_sema_t *s);
/* Slots in the pool, after reclaiming those of dead holders. */
int sab_sema_available(const sab_sema_t *s);
/* After a give-back outside the lock (JS's fast path) that saw waiters:
 * reclaim when deaths moved the epoch, hand free slots to the oldest
 * waiters, wake refill watchers. Answers how many slots came back. */
int sab_sema_kick(const sab_sema_t *s);

/* Blocking acquire in one call (C callers and tests): SAB_OK with *token,
 * or SAB_TIMED_OUT after timeout_ns (UINT64_MAX: forever). */
int sab_sema_wait(const sab_sema_t *s, uint32_t owner, uint64_t timeout_ns, uint32_t *token);

/*
 * The rate limiter (src/core/rate.c): the times of the last rps grants in a
 * ring in shared memory, changed under the bucket lock of its first word.
 * A grant is allowed at `now` when the grant rps places back is at least
 * unit_ns old (and, uniform, the last one at least unit_ns / rps old); it is
 * then recorded at `now`, so no window of unit_ns holds more than rps
 * grants. Nothing is ever handed back: a thread that dies leaks nothing.
 */
#define SAB_RATE_MAGIC 0x52415431 /* "RAT1" */
/* The rps word and the header's bytes (RateLimit.from reads them). */
#define SAB_RATE_W_RPS        1
#define SAB_RATE_HEADER_BYTES 32
#define SAB_RATE_MAX          0x100000u

typedef struct {
  int32_t *base;
  uint32_t rps;
} sab_rate_t;

size_t sab_rate_bytes(uint32_t rps);
int sab_rate_init(sab_rate_t *r, void *mem, size_t bytes, uint32_t rps, uint64_t unit_ns,
                  int uniform);
int sab_rate_open(sab_rate_t *r, void *mem, size_t bytes);
/* SAB_OK: granted, recorded at *at (sab_now() scale); SAB_PENDING: try
 * again in *wait_ns; or SAB_E_CORRUPT. The clock is read under the lock,
 * so recorded times never go backwards. */
int sab_rate_take(const sab_rate_t *r, uint64_t *at, uint64_t *wait_ns);
/* The rate limiter's parameters, as stored. */
uint64_t sab_rate_unit_ns(const sab_rate_t *r);
int sab_rate_uniform(const sab_rate_t *r);

/*
 * RateLimiter (src/core/limiter.c, where the table and its rules are
 * stated). A view holds the table's shape and secret, read from its header
 * once and checked, and the caller's T and tau (a rolling deploy shares one
 * table between callers of different parameters). `slots` is the table's
 * first slot (two int64 words a slot, `keys` slots) and `locks` its claim
 * locks (one int64 per 16 slots), both checked by the caller.
 */
typedef struct {
  uint32_t keys;   /* slots, >= 1 */
  uint32_t probe;  /* slots in a key's window, 1 .. keys */
  uint32_t k0, k1; /* the table's secret */
  int64_t T;       /* ns a point takes to refill, >= 1 */
  int64_t tau;     /* the bucket's depth, ns: burst * T, below 2^60 */
} sab_limiter_t;

enum {
  SAB_LIMITER_ALLOWED = 0, /* taken: ahead = the bucket's deficit after it */
  SAB_LIMITER_DENIED = 1,  /* not taken: ahead = the deficit it would make, behind = now */
  SAB_LIMITER_ABSENT = 2,  /* the key has no slot (consume without locks) */
  SAB_LIMITER_FULL = 3,    /* no slot free: ahead = ns until one frees, -1 unknown */
  SAB_LIMITER_BUSY = 4     /* the claim lock stayed held for 10 ms */
};

typedef struct {
  uint32_t f[2];         /* the key's fingerprint (low, high) */
  uint32_t start;        /* its window's first slot */
  int64_t ahead, behind; /* ns */
} sab_limiter_out_t;

/* HalfSipHash-1-3 (64-bit) of UTF-16 code units, keyed by (k0, k1). */
void sab_limiter_hash(const uint16_t *s, size_t n, uint32_t k0, uint32_t k1, uint32_t out[2]);
/* Take `points` (1 .. burst) from the key's bucket, claiming a slot for a
 * key not in the table (locks NULL: answer SAB_LIMITER_ABSENT instead):
 * SAB_LIMITER_ALLOWED, _DENIED, _FULL, _BUSY, or SAB_E_CORRUPT (no CAS took
 * effect in 1000 tries, or a claim lock no participant wrote). */
int sab_limiter_consume(const sab_limiter_t *l, int64_t *slots, int64_t *locks, const uint16_t *key,
                        size_t len, uint32_t points, sab_limiter_out_t *out);
/* Whether one point would be taken, taking nothing: _ALLOWED or _DENIED. */
int sab_limiter_peek(const sab_limiter_t *l, int64_t *slots, const uint16_t *key, size_t len,
                     sab_limiter_out_t *out);
/* Give `points` back to the key (0: all of them, a reset): SAB_OK or
 * SAB_E_CORRUPT. */
int sab_limiter_lower(const sab_limiter_t *l, int64_t *slots, const uint16_t *key, size_t len,
                      uint32_t points, sab_limiter_out_t *out);

#ifdef __cplusplus
}
#endif
#endif /* SABSYNC_H */
