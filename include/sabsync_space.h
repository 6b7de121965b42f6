/*
 * sabsync core: a named space of shared memory between the processes of one
 * host, with its own wait queues and owner ids.
 *
 * This header never includes node_api.h; the space is plain C (Linux: a file
 * under /dev/shm, futexes on shared words, OFD byte-range locks for
 * liveness). Elsewhere every call answers SAB_E_UNSUPPORTED.
 *
 * Model. A space is a file under /dev/shm mapped MAP_SHARED by every process
 * that opens it, once per process (every thread of a process sees one
 * address). The same bytes sit at different addresses in different
 * processes, so nothing in the space is a pointer: records, queues and
 * objects are named by byte offsets from the start of the space.
 *
 *   private part   header, thread slots, bucket locks and queues, waiter
 *                  records, the directory of named objects: only this core
 *                  writes it; no JS view covers it.
 *   public part    the death epoch, the per-bucket waiter counters, then the
 *                  heap where named objects live: JS reads and writes it.
 *
 * Every word of both parts is read as untrusted input (another process may
 * have died half-way through writing it, or scribbled over it): read once,
 * checked, used as checked. The geometry of the space (table sizes and
 * offsets) is a pure function of its size and layout version, computed by
 * each opener and compared with the header, never taken from it.
 *
 * Owner ids. A thread that uses a space registers in one of its slots and
 * holds that slot's "lifeline" for as long as it is registered: an OFD
 * byte-range lock (fcntl F_OFD_SETLK) on the slot's byte of the space's
 * file, through an open file description of its own. The lock lives in the
 * kernel, not in the shared memory, so no co-tenant can forge or steal it
 * by writing the space; the kernel drops it when the description is closed,
 * which a process's death does. Its owner id is the slot index plus the
 * slot's generation (bumped at every registration), so ids mean the same in
 * every process and a reused slot never revives an old id. Probing a
 * lifeline is one F_OFD_GETLK; nobody polls the dead, waiters that suspect
 * an owner probe it.
 *
 * Nothing in a space is a pointer that anyone follows, and every lock on
 * the space's bookkeeping is sabsync's own word (holder id | waiters bit),
 * waited for with a deadline: see sab_space_deadline.
 */
#ifndef SABSYNC_SPACE_H
#define SABSYNC_SPACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SAB_SPACE_VERSION      2
#define SAB_SPACE_NAME_MAX     200 /* bytes of a space's name */
#define SAB_SPACE_KEY_MAX      80  /* bytes of an object's key */
#define SAB_SPACE_MIN_SIZE     (512u << 10)
#define SAB_SPACE_MAX_SIZE     (1u << 30)
#define SAB_SPACE_DEFAULT_SIZE (1u << 20)
#define SAB_SPACE_NPARAMS      4 /* parameters stored with a named object */

/* Errors: negative, as the core's others. */
enum {
  SAB_E_SPACE_NAME = -20,     /* a name that cannot name a space */
  SAB_E_SPACE_SIZE = -21,     /* a size out of range, or not the existing space's */
  SAB_E_SPACE_VERSION = -22,  /* not a space of this layout version (or not a space) */
  SAB_E_SPACE_MISMATCH = -23, /* a key that names an object of another kind or parameters */
  SAB_E_SPACE_FULL = -24,     /* no room left: heap, directory, slots or records */
  SAB_E_SPACE_SYS = -25,      /* a system call failed; errno says why */
  SAB_E_UNSUPPORTED = -26,    /* no shared spaces on this platform */
  SAB_E_SPACE_KEY = -27,      /* a key that cannot name an object */
  SAB_E_SPACE_FOREIGN = -28,  /* a file at the name that this call must not trust: another
                                 user's, a mode wider than asked, not a regular file */
  SAB_E_SPACE_BUSY = -29      /* a bookkeeping lock held past the thread's lock deadline by
                                 a holder that lives (stopped, descheduled, a debugger): no
                                 evidence of corruption; a timed call answers its timeout */
};

typedef struct sab_space_s sab_space_t;

/* What the binding needs to know of an open space; fixed while it is open. */
typedef struct {
  char *base;          /* this process's mapping */
  uint32_t size;       /* bytes */
  uint32_t pub_off;    /* the public part: [pub_off, size) */
  uint32_t heap_off;   /* the first byte objects may use */
  uint32_t epoch_off;  /* the death epoch (int32) */
  uint32_t counts_off; /* waiter counter of bucket b: counts_off + b * count_stride */
  uint32_t count_stride;
  uint32_t bucket_bits; /* buckets: 1 << bucket_bits */
  uint32_t nslots;
} sab_space_info_t;

/*
 * Open the space `name` (1..SAB_SPACE_NAME_MAX bytes, no '/', no control
 * character, not "." or ".."), creating it with `size` bytes (0: the default;
 * rounded up to a page) and permission bits `mode` if it does not exist.
 * When it exists, `size` must be 0 or its size. A process maps a name once:
 * later opens in the same process share the mapping (counted; see close).
 * *created says whether this call made the space.
 */
int sab_space_open(const char *name, uint32_t size, unsigned mode, sab_space_t **out, int *created);
/*
 * The deadline (sab_now() scale) by which this thread gives up waiting for
 * a bookkeeping lock of any space (a bucket, the directory): the call then
 * answers SAB_E_SPACE_BUSY (a holder that lives and does not let go: a
 * stopped process is not corruption). It bounds the whole call, not each
 * lock: every lock the call takes after the deadline is tried once. UINT64_MAX:
 * SAB_SLOCK_BOUND_NS from the start of each wait; calls that visit many
 * buckets (a reap, a burial) take one deadline for the whole visit when the
 * thread has none. Answers the previous one, for the caller to put back.
 */
uint64_t sab_space_deadline(uint64_t deadline);
#define SAB_SLOCK_BOUND_NS (250ull * 1000000ull)
/* Drop one reference taken by open or sab_space_ref; the last one unmaps. */
void sab_space_close(sab_space_t *sp);
/* One more reference to an open space (a JS buffer over it, a pending wait). */
void sab_space_ref(sab_space_t *sp);
/* Remove the name; mappings live on, and a later open makes a new space. */
int sab_space_unlink(const char *name);
void sab_space_info(const sab_space_t *sp, sab_space_info_t *info);

/*
 * Threads. sab_space_register takes a free slot for the calling thread and
 * answers its owner id (non-zero, below 2^30); sab_space_unregister, on the
 * same thread, ends it: the id is dead from then on (as if the thread had
 * died: its waiters are told). SAB_E_SPACE_FULL when every slot is taken.
 */
int sab_space_register(sab_space_t *sp, uint32_t *id);
void sab_space_unregister(sab_space_t *sp, uint32_t id);
/* Whether the owner `id` is registered and its thread alive; probes its
 * lifeline, and records the death (waking its watchers) if it ended. */
int sab_space_alive(sab_space_t *sp, uint32_t id);
/* Probe every registered slot (as sab_space_alive); answers the deaths
 * found. One pass is bounded by the thread's lock deadline (or, with none,
 * SAB_SLOCK_BOUND_NS from its start), however many deaths it finds: a
 * burial past it marks the slot and tells what it can reach at once. */
int sab_space_reap(sab_space_t *sp);
/* The death watcher (src/core/space_watch.c): a thread that reaps the
 * space as soon as a process with slots in it exits (pidfds), so waiters
 * of what it held are woken at once. Start it once per mapping and stop it
 * before the last close; 0 or SAB_E_SPACE_SYS (then waiters find deaths by
 * their own periodic reaps). Counted: the thread runs from the first start
 * to the matching last stop. */
int sab_space_watch_start(sab_space_t *sp);
void sab_space_watch_stop(sab_space_t *sp);
/* Deaths so far, mod 2^32 (also readable by JS at epoch_off). */
uint32_t sab_space_epoch(const sab_space_t *sp);
/* The word that async waiters of `id` are rung on (waker threads): sleep
 * while it reads `seen`, until `deadline` (sab_now() scale; UINT64_MAX:
 * none), or a ring; ring it (every sleeper wakes). */
uint32_t *sab_space_doorbell(sab_space_t *sp, uint32_t id);
void sab_space_doorbell_wait(sab_space_t *sp, uint32_t id, uint32_t seen, uint64_t deadline);
void sab_space_doorbell_ring(sab_space_t *sp, uint32_t id);

/*
 * The directory. sab_space_lookup finds `key` (1..SAB_SPACE_KEY_MAX bytes):
 *   SAB_SPACE_ATTACH  it exists with this kind, params and size: *off is its
 *                     offset;
 *   SAB_SPACE_CREATE  it must be initialised by the caller at *off (zeroed
 *                     memory of `bytes` bytes, 64-aligned): either it did not
 *                     exist, or its creator died before publishing it. The
 *                     directory lock is held (by `id`, the caller) until
 *                     sab_space_publish (the object is then visible) or
 *                     sab_space_abandon (the next caller creates it again);
 *   or SAB_E_SPACE_MISMATCH, SAB_E_SPACE_FULL, SAB_E_SPACE_KEY, SAB_E_CORRUPT.
 */
enum { SAB_SPACE_ATTACH = 1, SAB_SPACE_CREATE = 2 };
int sab_space_lookup(sab_space_t *sp, uint32_t id, const char *key, size_t keylen, uint32_t kind,
                     const uint32_t params[SAB_SPACE_NPARAMS], uint32_t bytes, uint32_t *off);
void sab_space_publish(sab_space_t *sp, uint32_t off);
/*
 * What the directory holds for `key`, for an error that says what exists:
 * 1 and *out filled (the entry's words as they are: a caller only describes
 * them, it never uses them as offsets or sizes), 0 if there is no entry, or
 * SAB_E_SPACE_KEY, SAB_E_CORRUPT.
 */
typedef struct {
  uint32_t kind;
  uint32_t bytes;
  uint32_t params[SAB_SPACE_NPARAMS];
} sab_space_entry_t;
int sab_space_entry(sab_space_t *sp, uint32_t id, const char *key, size_t keylen,
                    sab_space_entry_t *out);
void sab_space_abandon(sab_space_t *sp);

/*
 * Freeing named objects. Every lookup records its caller's thread slot as a
 * user of the entry (a bit per slot; a new tenant of a slot clears its bit
 * everywhere when it registers, so a bit names the slot's current or last
 * tenant). A retired entry is still found by lookup, and is reclaimed (its
 * directory entry and heap bytes reused) once no live thread uses it and no
 * waiter record lies in its object.
 *
 * sab_space_retire retires the entries of `key` (and, with
 * SAB_RETIRE_VERSIONS, those whose key is `key` + U+0002 + anything: the
 * versions of a versioned key), except the one at `keep_off` (0: none);
 * with SAB_RETIRE_SELF the caller (`id`) stops using them. Then it reclaims
 * every retired entry that it can. Answers how many entries matched `key`
 * and were reclaimed now in *freed, how many matched in total as the
 * result; or SAB_E_SPACE_BUSY, SAB_E_CORRUPT.
 */
#define SAB_RETIRE_VERSIONS 1u
#define SAB_RETIRE_SELF     2u
int sab_space_retire(sab_space_t *sp, uint32_t id, const char *key, size_t keylen, uint32_t flags,
                     uint32_t keep_off, uint32_t *freed);
/* What the directory and heap hold now, for a message that says which
 * limit was met (the header's words, read once and clamped). */
typedef struct {
  uint32_t objects, objects_max, retired, heap_used, heap_bytes;
} sab_space_usage_t;
void sab_space_usage(sab_space_t *sp, sab_space_usage_t *out);

/*
 * Waiting in a space: the lot's operations (include/sabsync.h), with cells
 * and records named by offsets. A cell is 4 or 8 bytes at `off`, aligned,
 * inside the public part. A record belongs to the owner `id` that queued it
 * and is named by its index; the caller keeps (index, off) and never
 * believes the record's own copy of them.
 *
 * sab_space_enqueue: under the bucket lock, compare the cell with `expected`;
 * SAB_NOT_EQUAL, SAB_OWNER_DEAD (watch != 0 and the space's epoch is no
 * longer `epoch`), SAB_E_SPACE_FULL (no free record), SAB_E_INVAL (bad cell),
 * or SAB_PENDING with *rec queued. `async` records are woken by ringing
 * their owner's doorbell instead of their own futex word.
 */
#define SAB_SPACE_ASYNC 1u
#define SAB_SPACE_SEMA  2u /* a semaphore's waiter: keyed off | 1, never met by a plain notify */
int sab_space_enqueue(sab_space_t *sp, uint32_t id, uint32_t off, int size, int64_t expected,
                      uint32_t watch, uint32_t epoch, uint32_t flags, uint32_t *rec);
/* Blocking records: spin, then sleep until the record leaves the queue or
 * `deadline` (sab_now() scale) passes: SAB_OK, SAB_TIMED_OUT, SAB_CANCELLED,
 * or SAB_PENDING (deadline passed, still queued). */
int sab_space_park(sab_space_t *sp, uint32_t rec, uint64_t deadline);
/* Settle a record: dequeue it if still queued (answer `why`), or answer how
 * it left (SAB_OK: notified; *token, if not NULL, gets its token). Frees the
 * record either way: the caller must not name it again. */
int sab_space_settle(sab_space_t *sp, uint32_t id, uint32_t rec, uint32_t off, int why,
                     uint32_t *token);
/* Look at a record without settling it: SAB_PENDING while queued, else as
 * sab_space_settle would answer. */
int sab_space_peek(sab_space_t *sp, uint32_t id, uint32_t rec, uint32_t off);
/* Wake up to `count` waiters of the cell at `off`, oldest first (waiters
 * whose thread is dead are dropped, uncounted). Answers how many. */
uint64_t sab_space_notify(sab_space_t *sp, uint32_t off, uint64_t count);
uint32_t sab_space_waiters(sab_space_t *sp, uint32_t off);
/* Blocking wait in one call (C callers and tests). */
int sab_space_wait(sab_space_t *sp, uint32_t id, uint32_t off, int size, int64_t expected,
                   uint64_t timeout_ns);

/*
 * The token semaphore (include/sabsync.h) in a space: its memory at `off`
 * (made by sab_sema_init), its waiters in the space's queue keyed off | 1,
 * its holders owner ids of the space. As sab_sema_*, with records named by
 * index: acquire with `rec` NULL tries; otherwise a record may be queued
 * (SAB_PENDING, *rec), woken with its slot as its token (sab_space_settle),
 * or with SAB_SEMA_NO_TOKEN: a wake to try again (sema.c F2), which the
 * caller answers by acquiring again (its place is kept) or, if it will not,
 * by sab_space_sema_give_back with SAB_SEMA_NO_TOKEN (F4). The fairness
 * rules F1-F5 are sema.c's (src/core/sema_fair.h): a Sema behaves the same
 * wherever it lives. Holders found dead (by a probe, or at the death of an owner) give their
 * slots back, marked SAB_SEMA_RECOVERED, oldest waiter first.
 */
int sab_space_sema_acquire(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t flags,
                           uint32_t *token, uint32_t *rec);
int sab_space_sema_release(sab_space_t *sp, uint32_t id, uint32_t off, int64_t slot,
                           uint32_t *info);
void sab_space_sema_give_back(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t token);
uint32_t sab_space_sema_waiting(sab_space_t *sp, uint32_t off);
int sab_space_sema_available(sab_space_t *sp, uint32_t off);

/*
 * A RateLimit (sab_rate_*) in a space: its memory at rate_off, its turn (a
 * token semaphore of 1) at turn_off just after. A grant as sab_rate_take,
 * under the turn's bucket lock, which orders it with every process's. With
 * turn_free_only, only while the turn is free and nobody waits for it,
 * else SAB_TIMED_OUT (the caller then takes the turn).
 */
int sab_space_rate_take(sab_space_t *sp, uint32_t turn_off, uint32_t rate_off, int turn_free_only,
                        uint64_t *at, uint64_t *wait_ns);

/* Test hook: the number of records in use (all owners). */
uint32_t sab_space_records_used(sab_space_t *sp);

#ifdef __cplusplus
}
#endif
#endif /* SABSYNC_SPACE_H */
