/*
 * Internals shared by the space's files (space.c, space_lot.c, lifeline.c):
 * the layout, the process-local view, and the helpers that read the shared
 * words.
 *
 * Layout (byte offsets from the start of the space; every table's place and
 * size follows from the space's size alone, see space_geometry):
 *
 *   0            header      4096 bytes, below
 *   slots_off    slots       NSLOTS x 128: one per registered thread
 *   buckets_off  buckets     NBUCKETS x 64: a lock word and a FIFO list
 *   records_off  records     NRECORDS x 64: waiter records
 *   dir_off      directory   NDIR x 128: named objects
 *   pub_off      public      epoch line (64), then NBUCKETS counters, 64 apart
 *   heap_off     heap        named objects, 64-aligned, never freed
 *
 * Header words (uint32, index):
 *
 *   word  name       written            meaning
 *   0     magic      init               SPACE_MAGIC
 *   1     version    init               SAB_SPACE_VERSION
 *   2     abi        init               sizeof(void *)
 *   3     ready      init               1: initialised (a space is named only
 *                                       once it is; see space.c)
 *   4     size       init               bytes
 *   5     heap_used  dir lock           bytes of the heap handed out
 *   6     dir_count  dir lock           directory entries in use
 *   7     rec_hint   anyone, relaxed    where the next record search starts
 *   32    dir_lock   sab__slock         the directory's lock word (space_sys.c)
 *
 * How each word is read is in the file that reads it (tables at the top of
 * space.c, space_lot.c and lifeline.c).
 */
#ifndef SAB_SPACE_INTERNAL_H
#define SAB_SPACE_INTERNAL_H

#include "internal.h"
#include "sabsync_space.h"

#define SPACE_MAGIC 0x53425332u /* "SBS2" */

#define HDR_MAGIC     0
#define HDR_VERSION   1
#define HDR_ABI       2
#define HDR_READY     3
#define HDR_SIZE      4
#define HDR_HEAP_USED 5
#define HDR_DIR_COUNT 6
#define HDR_REC_HINT  7
#define HDR_DIR_LOCK  32 /* word index */
#define HDR_BYTES     4096u

#define NSLOTS       512u /* 9 bits of an owner id */
#define SLOT_BITS    9
#define GEN_MAX      ((1u << (30 - SLOT_BITS)) - 1) /* ids stay below 2^30 */
#define NBUCKETS     256u
#define BUCKET_BITS  8
#define NRECORDS     2048u
#define NDIR         512u
#define SLOT_BYTES   128u
#define BUCKET_BYTES 64u
#define RECORD_BYTES 64u
#define DIR_BYTES    128u
#define COUNT_STRIDE 64u /* bytes between two buckets' counters */

/* A slot (128 bytes). Its lifeline is not in it: it is the kernel's OFD
 * lock on byte LIFELINE_OFF + i of the space's file (lifeline.c). */
typedef struct {
  uint32_t word;     /* gen << 2 | SLOT_LIVE or SLOT_FREE */
  uint32_t pid;      /* a hint for the death watcher; never trusted */
  uint32_t doorbell; /* futex word rung for its async waiters */
  /* A semaphore's acquire by this slot's tenant, woken to try again and not
   * back yet (sema.c F2, F5): the tenant's id (else stale), the
   * semaphore's offset, and when the acquire first asked. Written by the
   * releaser under the semaphore's bucket lock; taken off by the tenant's
   * next acquire of it, or its give-back of the wake (space_sema.c). */
  uint32_t retry_id, retry_off, retry_since_lo, retry_since_hi;
  uint32_t pad[25];
} sab__slot_t;
#define LIFELINE_OFF 0 /* byte range locks, apart from the mapping's meaning */
#define SLOT_FREE    0u
#define SLOT_LIVE    1u

/* A bucket (64 bytes): records are named by index + 1 (0: none). */
typedef struct {
  uint32_t lock;       /* sab__slock's word: holder id | SLOCK_WAITERS, or 0 */
  uint32_t head, tail; /* guarded by lock */
  uint32_t seq;        /* guarded by lock: enqueues so far, the records' order */
  uint32_t pad[12];
} sab__sbucket_t;

/* A waiter record (64 bytes). */
typedef struct {
  uint32_t state; /* the futex of a blocking waiter; SAB_W_* */
  uint32_t owner; /* the id that took it; 0: free */
  uint32_t next, prev;
  uint32_t key;   /* the cell's offset; | 1: a semaphore's queue */
  uint32_t watch; /* an owner whose death wakes it; SAB_WATCH_ANY; 0 */
  uint32_t token;
  uint32_t seq;
  uint32_t flags; /* SAB_SPACE_ASYNC, SAB_SPACE_SEMA */
  /* A semaphore's record: when its acquire first asked (sab_now()), the
   * order of its key's records (sema.c F2). */
  uint32_t since_lo, since_hi;
  uint32_t pad[5];
} sab__record_t;
/* Record states: the lot's, SAB_W_* (sabsync.h), one table for both
 * memories; SAB_W_IDLE (0) is a record taken and not queued yet. */

/* A directory entry (128 bytes). */
typedef struct {
  uint32_t state; /* DIR_EMPTY, DIR_CREATING, DIR_READY */
  uint32_t kind;
  uint32_t off;
  uint32_t bytes;
  uint32_t params[SAB_SPACE_NPARAMS];
  uint32_t keylen;
  uint32_t hash;
  uint32_t pad[2];
  char key[SAB_SPACE_KEY_MAX];
} sab__dirent_t;
enum { DIR_EMPTY = 0, DIR_CREATING = 1, DIR_READY = 2 };

/* The process-local view of an open space. The geometry fields are computed
 * from the size (space_geometry) and never read from the space. */
struct sab_space_s {
  char *base;
  uint32_t size;
  uint32_t slots_off, buckets_off, records_off, dir_off, pub_off, heap_off;
  uint32_t heap_bytes;
  /* Fixed while open: the file as this process opened it (its OFD holds the
   * lifeline of lock_id, the id that holds bucket locks for every thread
   * of this process), and a second description of it that holds nothing
   * and only asks the kernel whose lifelines are held (F_OFD_GETLK). */
  int fd, probe_fd;
  uint32_t lock_id;
  /* slot_fd[i]: the description holding slot i's lifeline when a thread of
   * this process is its tenant, else -1; written by that thread, read
   * atomically by any. */
  int slot_fd[NSLOTS];
  /* A death marked by a claim that could not tell it yet (lifeline.c),
   * told by the next call that can (space_owners.c); 0: none. Atomic. */
  uint32_t untold;
  /* The death watcher (space_watch.c), or NULL, and how many
   * registrations asked for it; guarded by space_watch.c's lock. */
  struct sab__watch_s *watch;
  unsigned watch_users;
  /* Guarded by the registry lock (space.c). */
  struct sab_space_s *next;
  int refs;
  char name[SAB_SPACE_NAME_MAX + 1];
};

static inline uint32_t *sab__hdr(const sab_space_t *sp) { return (uint32_t *)sp->base; }
static inline uint32_t *sab__dir_lock(const sab_space_t *sp) { return &sab__hdr(sp)[HDR_DIR_LOCK]; }
static inline sab__slot_t *sab__slot(const sab_space_t *sp, uint32_t i) {
  return (sab__slot_t *)(sp->base + sp->slots_off + (size_t)i * SLOT_BYTES);
}
static inline sab__sbucket_t *sab__sbucket(const sab_space_t *sp, uint32_t b) {
  return (sab__sbucket_t *)(sp->base + sp->buckets_off + (size_t)b * BUCKET_BYTES);
}
/* i: 1 .. NRECORDS (checked by the caller). */
static inline sab__record_t *sab__record(const sab_space_t *sp, uint32_t i) {
  return (sab__record_t *)(sp->base + sp->records_off + (size_t)(i - 1) * RECORD_BYTES);
}
static inline sab__dirent_t *sab__dirent(const sab_space_t *sp, uint32_t i) {
  return (sab__dirent_t *)(sp->base + sp->dir_off + (size_t)i * DIR_BYTES);
}
static inline int32_t *sab__epoch(const sab_space_t *sp) {
  return (int32_t *)(sp->base + sp->pub_off);
}
/* The death epoch, as every layer reads it (seq-cst: see lifeline.c O2). */
static inline uint32_t sab__epoch_now(const sab_space_t *sp) {
  return (uint32_t)__atomic_load_n(sab__epoch(sp), __ATOMIC_SEQ_CST);
}
static inline int32_t *sab__count(const sab_space_t *sp, uint32_t b) {
  return (int32_t *)(sp->base + sp->pub_off + 64 + (size_t)b * COUNT_STRIDE);
}

/* Shared words are read through these (relaxed or acquire; the callers say
 * which order they need), so that a fuzz build can play a racing writer. */
static inline uint32_t sab__ld(const uint32_t *p) {
  uint32_t v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
  sab__fuzz_after_read(p);
  return v;
}
static inline void sab__st(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

/* Owner ids: slot index in the low SLOT_BITS, generation (1 .. GEN_MAX)
 * above. Answers 0 and leaves *slot alone for a value that is no id. */
static inline int sab__id_parts(uint32_t id, uint32_t *slot, uint32_t *gen) {
  uint32_t g = id >> SLOT_BITS;
  if (g == 0 || g > GEN_MAX) return 0;
  *slot = id & (NSLOTS - 1);
  *gen = g;
  return 1;
}

/* Bucket of a cell offset (Fibonacci hashing of the 4-byte word index: the
 * top bits of sab_bucket_of's hash, which the binding's spaceBucket relies
 * on; JS asks it, never computes one). */
static inline uint32_t sab__sbucket_of(uint32_t off) {
  return ((off >> 2) * 0x9E3779B1u) >> (32 - BUCKET_BITS);
}

/* Deaths found under a bucket lock, buried after it (lifeline.c). */
typedef struct sab__deaths_s {
  uint32_t ids[8];
  unsigned n;
} sab__deaths_t;

/* Futex words to wake once a bucket lock is released. */
typedef struct {
  uint32_t *words[32];
  unsigned n;
} sab__wakes_t;
void sab__wakes_run(sab__wakes_t *w);

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

/* space_lot.c (queues): */
/* Bucket locks (NULL: unusable), for space_sema.c. */
sab__sbucket_t *sab__space_lock(sab_space_t *sp, uint32_t b);
void sab__space_unlock(sab__sbucket_t *bk);
/* A free record for `id` (0: none), and giving it back. */
uint32_t sab__space_take(sab_space_t *sp, uint32_t id);
void sab__space_free(sab_space_t *sp, uint32_t i, uint32_t id);
/* Under bucket b's lock: queue record i with key `off` (| 1 with
 * SAB_SPACE_SEMA, then among the key's records in order of `since`, else
 * at the tail); `raised`: increments of b's counter the caller made and
 * will take back. */
void sab__space_queue(sab_space_t *sp, uint32_t b, uint32_t i, uint32_t off, uint32_t watch,
                      uint32_t flags, uint64_t since, uint32_t raised);
/* Under the lock: when record i's acquire first asked (any value: an order). */
uint64_t sab__space_since(sab_space_t *sp, uint32_t i);
/* Under the lock: the oldest record queued with `key` whose owner lives
 * (those of dead owners are dropped on the way), or 0. */
uint32_t sab__space_oldest(sab_space_t *sp, uint32_t b, uint32_t key, sab__deaths_t *dead);
uint32_t sab__space_owner(sab_space_t *sp, uint32_t i);
/* Under the lock: records queued with `key` whose owners live. */
uint32_t sab__space_waiters_locked(sab_space_t *sp, uint32_t b, uint32_t key, sab__deaths_t *dead);
/* Under the lock: record i leaves its queue NOTIFIED, carrying `token`. */
void sab__space_notify_token(sab_space_t *sp, uint32_t b, uint32_t i, uint32_t token,
                             sab__wakes_t *w);
/* notify and waiters (include/sabsync_space.h), with the dead they met. */
uint64_t sab__lot_notify(sab_space_t *sp, uint32_t off, uint64_t count, sab__deaths_t *dead);
uint32_t sab__lot_waiters(sab_space_t *sp, uint32_t off, sab__deaths_t *dead);
/* At the death of `id` (marked already): wake every record watching it (or
 * any owner), drop the records it left queued, free those it left taken;
 * `hook` (under each bucket's lock) gives a semaphore with waiters there
 * the slots of the dead. Deaths found meanwhile go to `dead`. */
typedef void (*sab__sema_hook_t)(sab_space_t *sp, uint32_t b, uint32_t off, sab__wakes_t *w,
                                 sab__deaths_t *dead);
void sab__space_wake_watchers(sab_space_t *sp, uint32_t id, sab__sema_hook_t hook,
                              sab__deaths_t *dead);

/* space_sema.c: the semaphore's calls (include/sabsync_space.h) with the
 * dead they met, and its death hook. */
int sab__sema_in_acquire(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t flags,
                         uint32_t *token, uint32_t *rec, sab__deaths_t *dead);
int sab__sema_in_release(sab_space_t *sp, uint32_t id, uint32_t off, int64_t slot, uint32_t *info,
                         sab__deaths_t *dead);
int sab__sema_in_available(sab_space_t *sp, uint32_t off, sab__deaths_t *dead);
/* A wake to try again that `id` will not use (F4): its place goes, and free
 * slots go to the oldest waiters. */
void sab__sema_in_pass_on(sab_space_t *sp, uint32_t id, uint32_t off, sab__deaths_t *dead);
/* Waiters of the semaphore at off: queued, and woken to try again. */
uint32_t sab__sema_in_waiting(sab_space_t *sp, uint32_t off, sab__deaths_t *dead);
/* space_sema.c: a RateLimit's grant under its turn's bucket lock. */
int sab__space_rate_in_take(sab_space_t *sp, uint32_t turn_off, uint32_t rate_off,
                            int turn_free_only, uint64_t *at, uint64_t *wait_ns,
                            sab__deaths_t *dead);
void sab__space_sema_died(sab_space_t *sp, uint32_t b, uint32_t off, sab__wakes_t *w,
                          sab__deaths_t *dead);

/* space_sys.c: futexes on shared words (no FUTEX_PRIVATE_FLAG), fstat.
 * space_lock.c: the space's bookkeeping locks. sab__slock takes the lock word `w` for the
 * owner `me`: 0, or 1 when the previous holder died holding it (the caller
 * repairs what it guards), or -1 when it could not be had by the lock's
 * deadline (sab_space_deadline, else SAB_SLOCK_BOUND_NS from now): the
 * word names a holder that lives and never lets go, or nothing sensible;
 * the caller answers SAB_E_CORRUPT. sab__sunlock lets it go. */
#define SLOCK_WAITERS 0x80000000u
void sab__futex_wait_shared(uint32_t *word, uint32_t expected, uint64_t deadline);
void sab__futex_wake_shared(uint32_t *word, int n);
struct stat;
int sab__fstat(int fd, struct stat *st);
struct flock;
int sab__fcntl_lock(int fd, int cmd, struct flock *fl);
/* A pidfd of `pid` (close-on-exec), or -1 (gone, or no pidfds here). */
int sab__pidfd_open(int pid);
/* Add pidfd `fd` to epoll set `epfd` (EPOLL_CTL_ADD), close a pidfd. */
struct epoll_event;
int sab__pidfd_watch(int epfd, int fd, struct epoll_event *ev);
void sab__pidfd_close(int fd);
int sab__slock(sab_space_t *sp, uint32_t *w, uint32_t me);
void sab__sunlock(uint32_t *w);
/* The deadline of this thread's bookkeeping locks (sab_space_deadline). */
uint64_t sab__slock_deadline(void);

#endif /* SAB_SPACE_INTERNAL_H */
