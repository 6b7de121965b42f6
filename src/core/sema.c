/*
 * The token semaphore: a pool of nr slots in shared memory, its waiters in
 * the lot's queue of the key base + 1 (see "The queue" below).
 *
 * Layout: int32 words from an 8-byte aligned base.
 *
 *   word          name    written            meaning
 *   0             magic   init               SAB_SEMA_MAGIC; its bucket lock guards the rest
 *   1             avail   bucket lock        slots in the pool, 0 .. nr; &base[1] keys
 *                                            those waiting for the pool to refill
 *   2             nr      init               number of slots
 *   3             head    bucket lock        ring index of the oldest pooled slot
 *   4             stamp   bucket lock        grants so far, mod 2^32
 *   5             epoch   bucket lock        sab_death_epoch() at the last reclaim scan
 *   6, 7          -       init               0
 *   8 ..          ring    bucket lock        nr words: the pooled slots are
 *                                            ring[(head + i) % nr], i < avail
 *   8 + nr ..     holder  bucket lock        nr words, one per slot:
 *                                              bit 31     0
 *                                              bit 30     RECOVERED: pooled after its
 *                                                         holder died; cleared at the next
 *                                                         grant, which reports it
 *                                              bits 0-29  the holder's owner id,
 *                                                         0 while pooled
 *   8 + 2nr ..    stamps  bucket lock        nr words: `stamp` at the slot's last grant
 *
 * Every word is read and written with atomics (relaxed under the lock,
 * avail seq-cst), as JS may read avail without the lock.
 *
 * Untrusted memory. Any thread's JS can write any of these words at any
 * moment, lock or no lock. So every word is read once into a local, the
 * local is checked, and only the local is used; the view (base, nr) comes
 * from sab_sema_open's checks when the JS Sema was made, never from a later
 * read. Each read, and what bounds its use:
 *
 *   word      read by                  checked / used as
 *   magic     open, check              == SAB_SEMA_MAGIC, else SAB_E_CORRUPT
 *   nr        open, check              1 .. SAB_SEMA_MAX and fits the bytes (open);
 *                                      == the view's nr (check); never an index
 *   head      pool_of                  < nr, else SAB_E_CORRUPT; an index
 *   avail     pool_of, acquire,        <= nr, else SAB_E_CORRUPT (pool_of); the
 *             available                others only compare it with 0
 *   stamp     grant, release           any value: only stored back, + 1
 *   epoch     reclaim                  only compared with sab_death_epoch()
 *   ring[i]   pool_checked             < nr and its holder's owner bits 0, else
 *                                      SAB_E_CORRUPT; grant takes that local,
 *                                      it never reads the ring again
 *   holder[i] pool_checked, reclaim,   masked; compared with owner ids, or the
 *             latest_of, release       RECOVERED bit tested; never an index
 *   stamps[i] latest_of                any value: only ages compared
 *
 * Indexes into ring, holder and stamps are the loop counters below nr, the
 * checked head and avail (mod nr), the checked ring local, or a slot that
 * the caller passed and release checked against nr. So a scribbled word
 * earns SAB_E_CORRUPT, a wrong answer or a wait that times out; never an
 * access outside the 8 + 3 nr words, or a token >= nr.
 *
 * The queue. Waiters queue in the lot under the key base + 1 (KEY below):
 * no Int32Array or BigInt64Array cell has that address, so a plain wait on
 * the first word is never served by a release, and a plain notify never
 * wakes an acquirer. base + 1 is in the bucket of base (the lot hashes
 * addr >> 2).
 *
 * Invariants, under the bucket lock of &base[0]:
 *  I1 A slot is in the ring iff its holder bits are 0; avail slots are.
 *  I2 avail > 0 implies no record is queued on &base[0]: an acquirer queues
 *     only when avail is 0, and a release hands its slot to the oldest
 *     record instead of pooling it. So a try that finds a pooled slot never
 *     overtakes a waiter (no barging), and FIFO order is the lot's.
 *  I3 A queued record's token is SAB_SEMA_NO_TOKEN. A handoff writes the
 *     slot's holder (the record's owner) and stamp, sets the record's token,
 *     then dequeues it: from that moment the slot is the record's owner's,
 *     delivered or not. A record that will never deliver it (its thread
 *     ends, its blocking wait gives up) gives it back: sab_sema_give_back.
 *
 * Holders that die. A thread that ends cannot go through the semaphores it
 * held slots of: nothing tells its teardown which they are, and it may no
 * longer reference their memory. Slots of dead holders are reclaimed under
 * the bucket lock by whoever comes next, and the process's death epoch says
 * when to look:
 *  R1 acquire, try and release compare sab_death_epoch() with the epoch word
 *     and, when it moved, scan the holders: a slot whose holder is dead goes
 *     back to the pool, RECOVERED. The epoch is read before the scan, so a
 *     death during the scan moves it again and the next caller scans again.
 *  R2 Queued records carry a death hook (on_death). A death visits every
 *     bucket with records (sab__wake_watchers) and, under this bucket's lock,
 *     runs the scan and hands what came back to the oldest waiters.
 *     Touching the memory there is safe: a queued record keeps it alive (an
 *     async record holds a reference to its buffer; a blocking record's
 *     thread is inside the call that was given it), and the visit reads
 *     the memory only while a record is queued: the last dequeue is its last
 *     access.
 *  R3 An acquirer that finds the pool empty raises the bucket's counter
 *     before it reads the epoch (both seq-cst) and queues under the same
 *     lock. A death marks its owner, raises the epoch, then reads counters.
 *     Either the acquirer reads the new epoch and scans (R1), or the death
 *     reads the raised counter, takes the lock after the acquirer, and finds
 *     its record (R2). No death goes unseen by a waiter.
 */
#include "internal.h"
#include "sema_pool.h"

#include <limits.h>

enum {
  W_MAGIC = SAB_SEMA_W_MAGIC,
  W_AVAIL = SAB_SEMA_W_AVAIL,
  W_NR = SAB_SEMA_W_NR,
  W_HEAD = 3,
  W_STAMP = 4,
  W_EPOCH = 5,
  HEADER = SAB_SEMA_HEADER_BYTES / 4
};

#define OWNER_MASK     0x3FFFFFFFu
#define HELD_RECOVERED 0x40000000u

#define RD(p)    sab__rd32(p)
#define WR(p, v) __atomic_store_n((p), (int32_t)(v), __ATOMIC_RELAXED)

/* The lot key of the semaphore's waiters (see "The queue" above). */
static uintptr_t key_of(const sab_sema_t *s) { return (uintptr_t)s->base + 1; }

static int32_t *ring_of(const sab_sema_t *s) { return s->base + HEADER; }
static int32_t *holder_of(const sab_sema_t *s) { return s->base + HEADER + s->nr; }
static int32_t *stamp_of(const sab_sema_t *s) { return s->base + HEADER + 2 * (size_t)s->nr; }

size_t sab_sema_bytes(uint32_t nr) {
  if (nr == 0 || nr > SAB_SEMA_MAX) return 0;
  size_t words = HEADER + 3 * (size_t)nr;
  return (words * 4 + 7) & ~(size_t)7;
}

int sab_sema_init(sab_sema_t *s, void *mem, size_t bytes, uint32_t nr) {
  size_t need = sab_sema_bytes(nr);
  if (need == 0 || bytes < need || mem == NULL || ((uintptr_t)mem & 7) != 0) return SAB_E_INVAL;
  s->base = mem;
  s->nr = nr;
  int32_t *ring = ring_of(s), *holder = holder_of(s), *stamp = stamp_of(s);
  for (uint32_t i = 0; i < nr; i++) {
    WR(&ring[i], i);
    WR(&holder[i], 0);
    WR(&stamp[i], 0);
  }
  WR(&s->base[W_NR], nr);
  WR(&s->base[W_HEAD], 0);
  WR(&s->base[W_STAMP], 0);
  WR(&s->base[W_EPOCH], sab_death_epoch());
  WR(&s->base[6], 0);
  WR(&s->base[7], 0);
  __atomic_store_n(&s->base[W_AVAIL], (int32_t)nr, __ATOMIC_SEQ_CST);
  /* Last: a view opened elsewhere sees the magic only with the rest. */
  __atomic_store_n(&s->base[W_MAGIC], SAB_SEMA_MAGIC, __ATOMIC_RELEASE);
  return 0;
}

int sab_sema_open(sab_sema_t *s, void *mem, size_t bytes) {
  int32_t *base = mem;
  if (mem == NULL || ((uintptr_t)mem & 7) != 0 || bytes < HEADER * 4) return SAB_E_CORRUPT;
  if (__atomic_load_n(&base[W_MAGIC], __ATOMIC_ACQUIRE) != SAB_SEMA_MAGIC) return SAB_E_CORRUPT;
  uint32_t nr = RD(&base[W_NR]);
  size_t need = sab_sema_bytes(nr);
  if (need == 0 || bytes < need) return SAB_E_CORRUPT;
  s->base = base;
  s->nr = nr;
  return 0;
}

int sab_sema_check(const sab_sema_t *s) {
  if (__atomic_load_n(&s->base[W_MAGIC], __ATOMIC_ACQUIRE) != SAB_SEMA_MAGIC) return SAB_E_CORRUPT;
  return RD(&s->base[W_NR]) == s->nr ? 0 : SAB_E_CORRUPT;
}

/* Under the lock: the pool's head and size, checked against nr. */
int sab__sema_pool_of(const sab_sema_t *s, uint32_t *head, uint32_t *avail) {
  *head = RD(&s->base[W_HEAD]);
  *avail = RD(&s->base[W_AVAIL]);
  return *head < s->nr && *avail <= s->nr ? 0 : SAB_E_CORRUPT;
}

static void set_avail(const sab_sema_t *s, uint32_t avail) {
  /* seq-cst: a resume watcher raises its bucket counter, then compares
   * avail (lot.c); the refiller stores avail, then reads that counter. */
  __atomic_store_n(&s->base[W_AVAIL], (int32_t)avail, __ATOMIC_SEQ_CST);
}

/* Under the lock: R1's scan, when the death epoch moved. Answers how many
 * slots came back, or SAB_E_CORRUPT. The owners are this process's threads
 * (reclaim) or a shared space's (space_sema.c). */
int sab__sema_reclaim(const sab_sema_t *s, const sab__owners_t *o) {
  uint32_t epoch = o->epoch;
  if (!o->force && RD(&s->base[W_EPOCH]) == epoch) return 0;
  uint32_t head, avail;
  if (sab__sema_pool_of(s, &head, &avail) != 0) return SAB_E_CORRUPT;
  int32_t *ring = ring_of(s), *holder = holder_of(s);
  int back = 0;
  for (uint32_t i = 0; i < s->nr; i++) {
    uint32_t h = RD(&holder[i]) & OWNER_MASK;
    if (h == 0 || o->alive(o->ctx, h)) continue;
    if (avail == s->nr) return SAB_E_CORRUPT; /* I1 broken: more out than fit */
    WR(&ring[(head + avail) % s->nr], i);
    WR(&holder[i], HELD_RECOVERED);
    avail++;
    back++;
  }
  if (back > 0) set_avail(s, avail);
  WR(&s->base[W_EPOCH], epoch);
  return back;
}

static int alive_here(void *ctx, uint32_t id) {
  (void)ctx;
  return sab_owner_alive(id);
}

static int reclaim(const sab_sema_t *s) {
  sab__owners_t o = {sab_death_epoch(), alive_here, NULL, 0};
  return sab__sema_reclaim(s, &o);
}

/* Under the lock: the pool, checked (pool_of), and when it is not empty its
 * oldest slot, read once and checked: below nr and not held. *held gets
 * that slot's holder word (its RECOVERED bit). */
typedef sab__pool_t pool_t;

int sab__sema_pool_checked(const sab_sema_t *s, pool_t *p) {
  if (sab__sema_pool_of(s, &p->head, &p->avail) != 0) return SAB_E_CORRUPT;
  if (p->avail == 0) return 0;
  p->slot = RD(&ring_of(s)[p->head]);
  if (p->slot >= s->nr) return SAB_E_CORRUPT;
  p->held = RD(&holder_of(s)[p->slot]);
  return (p->held & OWNER_MASK) == 0 ? 0 : SAB_E_CORRUPT;
}

/* Under the lock, with p checked by pool_checked and p->avail > 0: take the
 * oldest pooled slot (p->slot, never read again) for `owner`. Answers the
 * token. */
uint32_t sab__sema_grant(const sab_sema_t *s, uint32_t owner, const pool_t *p) {
  uint32_t stamp_now = RD(&s->base[W_STAMP]) + 1;
  WR(&s->base[W_HEAD], (p->head + 1) % s->nr);
  set_avail(s, p->avail - 1);
  WR(&holder_of(s)[p->slot], owner & OWNER_MASK);
  WR(&stamp_of(s)[p->slot], stamp_now);
  WR(&s->base[W_STAMP], stamp_now);
  return p->slot | ((p->held & HELD_RECOVERED) ? SAB_SEMA_RECOVERED : 0);
}

/* Under the lock: hand pooled slots to the oldest waiters while both last.
 * Reads the memory only while a record is queued (see R2). */
static void hand_out(sab__bucket_t *b, const sab_sema_t *s, sab__wake_list_t *l) {
  for (;;) {
    sab_waiter_t *w = sab__oldest_locked(b, key_of(s));
    if (w == NULL) return;
    pool_t p;
    if (sab__sema_pool_checked(s, &p) != 0 || p.avail == 0) return;
    w->token = sab__sema_grant(s, w->owner, &p);
    sab__wake_list_add(l, sab__dequeue_locked(b, w, SAB_W_NOTIFIED));
  }
}

/* After unlocking: the pool went from empty to not, so wake those who wait
 * for that (JS's resumeFn, lib/sema.js). The address is only a key. */
static void refilled(const sab_sema_t *s) {
  uintptr_t addr = (uintptr_t)&s->base[W_AVAIL];
  if (__atomic_load_n(&sab_bucket_counts()[sab_bucket_of(addr) * SAB_COUNT_STRIDE],
                      __ATOMIC_SEQ_CST) != 0) {
    sab_notify(addr, UINT64_MAX);
  }
}

/* Under the lock: R1, then the slots that came back go to the queued
 * waiters first (I2). Answers how many came back, or SAB_E_CORRUPT. */
static int sync_deaths(sab__bucket_t *b, const sab_sema_t *s, sab__wake_list_t *l) {
  int back = reclaim(s);
  if (back > 0) hand_out(b, s, l);
  return back;
}

/* The records' death hook (R2), called with the oldest queued record. */
static void on_death(sab__bucket_t *b, sab_waiter_t *w, sab__wake_list_t *l) {
  /* A copy: w->ctx may live in the frame of a blocking waiter, gone once
   * hand_out has dequeued that waiter. */
  sab_sema_t view = *(const sab_sema_t *)w->ctx;
  /* A view checked by the record's owner; w keeps the memory alive (R2).
   * Slots left over after every waiter got one stay pooled. Those who wait
   * for a refill (resumeFn) watch every death themselves and look again, so
   * no refill wake is sent from here (it would take a second bucket lock). */
  sync_deaths(b, &view, l);
}

int sab_sema_acquire(const sab_sema_t *s, uint32_t owner, sab_waiter_t *w, uint32_t *token) {
  uintptr_t key = key_of(s);
  int32_t *count = &sab_bucket_counts()[sab_bucket_of(key) * SAB_COUNT_STRIDE];
  sab__wake_list_t l;
  pool_t p;
  uint32_t before;
  int r;
  sab__wake_list_init(&l);
  sab__bucket_t *b = sab__lock(key);
  /* R3: raise the counter before the epoch is read. */
  __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
  before = RD(&s->base[W_AVAIL]);
  if (sync_deaths(b, s, &l) < 0 || sab__sema_pool_checked(s, &p) != 0) {
    r = SAB_E_CORRUPT;
  } else if (p.avail > 0) {
    *token = sab__sema_grant(s, owner, &p);
    r = SAB_OK;
  } else if (w == NULL) {
    r = SAB_TIMED_OUT;
  } else {
    w->owner = owner;
    w->ctx = s;
    w->token = SAB_SEMA_NO_TOKEN;
    w->on_death = on_death;
    sab__enqueue_locked(b, w, key);
    r = SAB_PENDING;
  }
  uint32_t after = RD(&s->base[W_AVAIL]);
  __atomic_fetch_sub(count, 1, __ATOMIC_SEQ_CST); /* the enqueue counted it again */
  sab__unlock(b);
  sab__wake_list_run(&l);
  if (before == 0 && after > 0) refilled(s);
  return r;
}

/* Under the lock: the slot `owner` got most recently, or -1. */
static int64_t latest_of(const sab_sema_t *s, uint32_t owner) {
  int32_t *holder = holder_of(s), *stamp = stamp_of(s);
  uint32_t now = RD(&s->base[W_STAMP]), best_age = UINT32_MAX;
  int64_t best = -1;
  for (uint32_t i = 0; i < s->nr; i++) {
    if ((RD(&holder[i]) & OWNER_MASK) != (owner & OWNER_MASK)) continue;
    uint32_t age = now - RD(&stamp[i]); /* stamps wrap: compare ages */
    if (best < 0 || age < best_age) {
      best = i;
      best_age = age;
    }
  }
  return best;
}

int64_t sab__sema_held(const sab_sema_t *s, uint32_t owner, int64_t slot) {
  if (slot < 0) slot = latest_of(s, owner);
  if (slot < 0 || slot >= (int64_t)s->nr) return -1;
  return (RD(&holder_of(s)[slot]) & OWNER_MASK) == (owner & OWNER_MASK) ? slot : -1;
}

void sab__sema_hand(const sab_sema_t *s, int64_t slot, uint32_t owner) {
  uint32_t stamp_now = RD(&s->base[W_STAMP]) + 1;
  WR(&holder_of(s)[slot], owner & OWNER_MASK);
  WR(&stamp_of(s)[slot], stamp_now);
  WR(&s->base[W_STAMP], stamp_now);
}

int sab__sema_pool_put(const sab_sema_t *s, int64_t slot, uint32_t head, uint32_t avail) {
  if (avail >= s->nr) return SAB_E_CORRUPT;
  WR(&ring_of(s)[(head + avail) % s->nr], slot);
  WR(&holder_of(s)[slot], 0);
  set_avail(s, avail + 1);
  return 0;
}

int sab_sema_release(const sab_sema_t *s, uint32_t owner, int64_t slot, uint32_t *info) {
  uintptr_t key = key_of(s);
  sab__wake_list_t l;
  uint32_t head = 0, avail = 0, flags = 0;
  int r;
  if (owner == 0 || (owner & ~OWNER_MASK) != 0) return SAB_E_BAD_TOKEN;
  sab__wake_list_init(&l);
  sab__bucket_t *b = sab__lock(key);
  if (sync_deaths(b, s, &l) < 0 || sab__sema_pool_of(s, &head, &avail) != 0) {
    r = SAB_E_CORRUPT;
    goto out;
  }
  slot = sab__sema_held(s, owner, slot);
  if (slot < 0) {
    r = SAB_E_BAD_TOKEN;
    goto out;
  }
  r = (int)slot;
  sab_waiter_t *w = sab__oldest_locked(b, key);
  if (w != NULL) {
    /* I2 and I3: straight to the oldest waiter. */
    sab__sema_hand(s, slot, w->owner);
    w->token = (uint32_t)slot;
    if (w->owner == owner) flags |= SAB_SEMA_HANDED_SELF;
    sab__wake_list_add(&l, sab__dequeue_locked(b, w, SAB_W_NOTIFIED));
  } else {
    if (sab__sema_pool_put(s, slot, head, avail) != 0) {
      r = SAB_E_CORRUPT;
      goto out;
    }
    flags |= SAB_SEMA_POOLED;
  }
out:
  sab__unlock(b);
  sab__wake_list_run(&l);
  /* avail: the pool's size after any reclaim, before this slot. */
  if ((flags & SAB_SEMA_POOLED) && avail == 0) refilled(s);
  if (info != NULL) *info = flags;
  return r;
}

void sab_sema_give_back(const sab_sema_t *s, uint32_t owner, uint32_t token) {
  if (token == SAB_SEMA_NO_TOKEN) return;
  /* BAD_TOKEN here means: reclaimed already (the owner was seen dead). */
  (void)sab_sema_release(s, owner, token & ~SAB_SEMA_RECOVERED, NULL);
}

uint32_t sab_sema_waiting(const sab_sema_t *s) { return sab_waiters(key_of(s)); }

int sab_sema_available(const sab_sema_t *s) {
  sab__wake_list_t l;
  uint32_t head, avail;
  int r;
  sab__wake_list_init(&l);
  sab__bucket_t *b = sab__lock(key_of(s));
  uint32_t before = RD(&s->base[W_AVAIL]);
  r = sync_deaths(b, s, &l) < 0 || sab__sema_pool_of(s, &head, &avail) != 0 ? SAB_E_CORRUPT
                                                                            : (int)avail;
  sab__unlock(b);
  sab__wake_list_run(&l);
  if (before == 0 && r > 0) refilled(s);
  return r;
}

int sab_sema_wait(const sab_sema_t *s, uint32_t owner, uint64_t timeout_ns, uint32_t *token) {
  uint64_t deadline = UINT64_MAX;
  if (timeout_ns != UINT64_MAX) {
    uint64_t now = sab_now();
    deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
  }
  for (;;) {
    sab_waiter_t w;
    sab_waiter_init_blocking(&w);
    int r = sab_sema_acquire(s, owner, timeout_ns == 0 ? NULL : &w, token);
    if (r == SAB_PENDING) {
      r = sab_wait_park(&w, deadline);
      if (r == SAB_PENDING) r = sab_wait_cancel(&w, SAB_TIMED_OUT);
      if (r == SAB_OK) {
        *token = w.token;
        if (w.token == SAB_SEMA_NO_TOKEN) r = SAB_PENDING; /* a stray notify */
      }
    }
    sab_waiter_destroy(&w);
    if (r != SAB_PENDING) return r;
    if (sab_now() >= deadline) return SAB_TIMED_OUT;
  }
}
