/*
 * The layout of a space and the process-local view of one: offsets, the
 * structs of the shared tables, and the accessors that read their words.
 * Data only: no .c file has this name, and every layer includes it.
 *
 * The layers of a space, each with its own header and file, each calling
 * and including only the ones before it in this list (test/layers.test.js
 * checks it):
 *
 *   Layers: space_sys, lifeline, space_lock, space_lot, space_sema,
 *           space_owners, space_watch, space, space_inspect
 *
 *   space_sys     system calls: shared futexes, fstat, fcntl, pidfds
 *   lifeline      thread slots and their OFD-lock lifelines: probe, mark, claim
 *   space_lock    the bookkeeping locks (their holders probed through lifelines)
 *   space_lot     wait queues by offset, under the bucket locks
 *   space_sema    the token semaphore and the RateLimit grant on the queues
 *   space_owners  burial of deaths (visits every queue); the public calls
 *                 that may find one (include/sabsync_space.h)
 *   space_watch   the death watcher thread (pidfds), which reaps
 *   space         the file, the mapping, the header and the directory
 *   space_inspect what a person asks: parties, objects and their waiters,
 *                 read without locks (include/sabsync_inspect.h)
 *
 * Layout (byte offsets from the start of the space; every table's place and
 * size follows from the space's size alone, see space_geometry):
 *
 *   0            header      4096 bytes, below
 *   slots_off    slots       NSLOTS x 128: one per registered thread
 *   buckets_off  buckets     NBUCKETS x 64: a lock word and a FIFO list
 *   records_off  records     NRECORDS x 64: waiter records
 *   dir_off      directory   NDIR x 128: named objects
 *   users_off    users       NDIR x 64: a bit per thread slot for each entry
 *   pub_off      public      epoch line (64), then NBUCKETS counters, 64 apart
 *   heap_off     heap        named objects, 64-aligned; a reclaimed entry's
 *                            bytes go to a later object that fits in them
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
 *   32    dir_lock   sab__slock         the directory's lock word (space_lock.c)
 *
 * How each word is read is in the file that reads it (tables at the top of
 * space.c, space_lot.c and lifeline.c).
 */
#ifndef SAB_SPACE_LAYOUT_H
#define SAB_SPACE_LAYOUT_H

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
#define USERS_BYTES  (NSLOTS / 8u) /* one entry's users: a bit per slot */
#define COUNT_STRIDE 64u           /* bytes between two buckets' counters */

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
  uint32_t pad0;
  /* The tenant's JS thread id, as id << 32 | thread id, written by the
   * tenant after it registers (space_inspect.c): one 64-bit word, so a
   * reader pairs an id with a thread id from one read. A hint for a
   * person, as pid is. */
  uint64_t thread;
  uint32_t pad[22];
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
  uint32_t cap; /* heap bytes the entry owns (64-aligned, >= bytes): its hole once freed */
  uint32_t pad[1];
  char key[SAB_SPACE_KEY_MAX];
} sab__dirent_t;
enum { DIR_EMPTY = 0, DIR_CREATING = 1, DIR_READY = 2, DIR_RETIRED = 3, DIR_FREE = 4 };
/* DIR_RETIRED: found by lookup, reclaimed once nobody uses it (space.c).
 * DIR_FREE: reclaimed; its off and bytes are a hole in the heap that a
 * later object of at most that many bytes takes. */

/* The process-local view of an open space. The geometry fields are computed
 * from the size (space_geometry) and never read from the space. */
struct sab_space_s {
  char *base;
  uint32_t size;
  uint32_t slots_off, buckets_off, records_off, dir_off, users_off, pub_off, heap_off;
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
/* The users of entry i (0 .. NDIR-1): NSLOTS bits, slot s at word s / 32. */
static inline uint32_t *sab__users(const sab_space_t *sp, uint32_t i) {
  return (uint32_t *)(sp->base + sp->users_off + (size_t)i * USERS_BYTES);
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

/* Deaths found under a bucket lock, buried after it (space_owners.c). */
typedef struct sab__deaths_s {
  uint32_t ids[8];
  unsigned n;
} sab__deaths_t;

/* Futex words to wake once a bucket lock is released. */
typedef struct {
  uint32_t *words[32];
  unsigned n;
} sab__wakes_t;

#endif /* SAB_SPACE_LAYOUT_H */
