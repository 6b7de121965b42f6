/*
 * The token semaphore: a pool of nr slots in shared memory, its waiters in
 * the lot's queue of the key &base[1] + 1 (see "The queue" below). A slot is
 * free or held according to its holder word alone, and a slot changes hands
 * by one compare-and-swap of that word: so JS (lib/sema.js) can take and
 * give back a slot with Atomics while nobody waits, with no native call and
 * without the bucket lock, and a thread torn down between two of its
 * stores leaves nothing half-made that a later caller cannot read right.
 *
 * Layout: int32 words from an 8-byte aligned base.
 *
 *   word          name    written              meaning
 *   0             magic   init                 SAB_SEMA_MAGIC
 *   1             frees   bucket lock, +1      native frees so far, mod 2^32 (not a
 *                         after each free      count of free slots); those waiting for a
 *                                              refill (JS's resumeFn) park on it, in the
 *                                              bucket of the queue's key
 *   2             nr      init                 number of slots
 *   3             next    anyone (hint)        where the next search for a free slot
 *                                              starts: the slot after the last taken
 *   4             stamp   bucket lock          grants so far, mod 2^32
 *   5             epoch   bucket lock          sab_death_epoch() at the last reclaim scan
 *   6             strict  init 0; a space's    0, or in a shared space SAB__SEMA_STRICT: a
 *                         rate take            RateLimit's turn (space_sema.c); not read here
 *   7             -       init                 0
 *   8 ..          -       init                 nr words, FILLER (a ring before the JS
 *                                              fast path; kept so that sizes do not
 *                                              change)
 *   8 + nr ..     holder  CAS, see below       nr words, one per slot:
 *                                                0            free
 *                                                RECOVERED    free; its last holder died
 *                                                             (bit 30); the next take
 *                                                             reports it
 *                                                id           held by owner id (bits 0-29)
 *                                              any other value: neither free nor
 *                                              anyone's (scribbled): skipped
 *   8 + 2nr ..    stamps  bucket lock          nr words: `stamp` at the slot's last
 *                                              native grant (JS's takes leave it);
 *                                              FILLER until then
 *
 * The protocol of a holder word. Every change is one seq-cst CAS from the
 * value read; the CAS is the operation's linearization point.
 *
 *   from        to          by                       when
 *   free        id          JS take (lib/sema.js)    the waiters' bucket counter
 *                                                    read 0 just before
 *   free        id          grant, under the lock    the caller is older than every
 *                                                    queued record (F3), or no queued
 *                                                    record waited the bound (F1); or
 *                                                    for the oldest record (hand_out)
 *   id          0           JS give-back             the counter read 0 before; the
 *                                                    counter read again after (K2)
 *   id          0           pool_put, under the lock no record queued, or the oldest has
 *                                                    not waited the bound and is not the
 *                                                    releaser's: it is woken to try
 *                                                    again (F2)
 *   id          id'         hand, under the lock     the oldest record's owner id', which
 *                                                    waited the bound or is the releaser
 *                                                    (F1)
 *   dead id     RECOVERED   reclaim, under the lock  the death epoch moved
 *
 * Only the holder gives a slot back or hands it on, so the CASes by id
 * fail only on scribbled memory. Takes race each other (JS against JS, JS
 * against a grant): the loser looks further or goes native. `next` is a
 * hint, and `frees` a value to park on: nothing that decides whether to
 * queue or to hand on reads them (the native side counts holders), so a
 * thread that dies between its CAS and its update of `next` leaves nothing
 * wrong.
 *
 * Invariants:
 *  K1 A slot is held by at most one owner: the holder word names it.
 *  K2 No lost wake. A native acquirer raises the bucket's waiter counter
 *     (seq-cst), then searches the holders; a JS give-back frees the holder
 *     (seq-cst CAS), then reads the counter (seq-cst). A refill watcher
 *     (JS's resumeFn) parks in the same bucket first (raising the counter)
 *     and looks for a free slot after, so the one counter read covers it.
 *     Either the acquirer finds the slot free, or the give-back sees the
 *     counter raised and calls kick, which under the lock hands free slots to the oldest records. A
 *     thread that dies between the two (its give-back's CAS and its kick)
 *     is covered by its death: the death hook (R2) hands free slots out too.
 *  K3 FIFO past the bound. A native grant serves first the queued records
 *     that waited the bound (F1), oldest first, before any other caller. A
 *     JS take happens only after it read the counter 0, so it overtakes no
 *     record that was queued when it began; a try that began later goes
 *     native, where F1 applies. The counter is the bucket's: other keys in
 *     the bucket make JS go native more often, never less.
 *  K4 A queued record's token is SAB_SEMA_NO_TOKEN. A handoff writes the
 *     slot's holder (the record's owner) and stamp, sets the record's token,
 *     then dequeues it: from that moment the slot is the record's owner's,
 *     delivered or not. A record that will never deliver it (its thread
 *     ends, its blocking wait gives up) gives it back: sab_sema_give_back.
 *
 * Fairness, bounded (as the Mutex's: lib/mutex.js). A strict hand-off
 * makes a convoy when threads outnumber CPUs: each release waits for a
 * descheduled waiter to run. So a waiter younger than the bound is only
 * woken to try again, and a running thread may take the slot meanwhile.
 * Each record's ask (sab_sema_ask_t, its ctx) carries `since` (sab_now()
 * when its acquire first asked; kept across retries) and the view carries
 * the bound fair_ns (1 ms; 0: strict
 * hand-off, RateLimit's turn), from the view's maker, never from shared
 * memory: "waited the bound" is now - since >= fair_ns.
 *  F1 A queued record that waited the bound is handed slots directly: a
 *     release hands it its slot; an acquire or try first hands free slots to
 *     such records (hand_out), oldest first, and takes one only if the
 *     oldest queued record did not wait the bound. So once a waiter is
 *     queued past the bound, nobody who came after it gets a slot before it.
 *  F2 A release whose oldest record did not wait the bound (and is not the
 *     releaser's own: async-sema hands a release to the thread's own waiting
 *     acquire at once) pools the slot and dequeues that record with its
 *     token SAB_SEMA_NO_TOKEN: a wake to try again. The record asks again
 *     with its ask (sab_sema_ask; an async record from its loop,
 *     src/napi/async.c's retry) and, finding no slot, is queued in
 *     order of since (sab__enqueue_by_since_locked), in the place its first ask earned.
 *     The key's records are thus always in order of since, so the oldest
 *     is the head.
 *  F3 A caller older than every queued record (a woken record's retry) is
 *     first in line: it takes a free slot before hand_out serves anyone.
 *  F4 No wake to try again is lost. One pooled slot, one wake, while records
 *     are queued; a woken record either takes a slot, or queues again (so
 *     the slot was taken by someone who will release it and wake the oldest
 *     record), or passes the wake on: a record that will never ask again
 *     (its thread ends, a delivery fails) calls sab_sema_give_back with
 *     SAB_SEMA_NO_TOKEN, which kicks: free slots go to the oldest records
 *     directly; one woken past its deadline asks once more without queuing.
 *     Paths where nobody would wake a record (kick, deaths: R1, R2) hand
 *     free slots to every queued record directly, whatever its age, but
 *     not past a record woken to try again (F5).
 *  F5 A record woken to try again keeps its place while it is off the
 *     queue. F2 puts its ask on its bucket's list of retries (b->retry,
 *     process memory, under the bucket lock); its next ask, or its
 *     give-back of the wake (sab_sema_give_back, sab_sema_ask_done), takes
 *     it off. The paths that hand free slots to every queued record (F4:
 *     kick, deaths) give one to a record only while more slots are free
 *     than there are retries older than it (room_for): one stays for each
 *     of those, which takes it on its return (F3). Without this, a death
 *     or a kick between F2's wake and the retry handed the pooled slot to
 *     a younger queued record, which no fairness rule allows (the test
 *     saw FIFO 1,3,4,2 when worker 1 exited). The other paths take no
 *     account of retries, as before: a retry's wake is on its way, and a
 *     caller that finds the slot free may take it (F2), a record that
 *     waited the bound is handed it (F1). Keeping slots for retries there
 *     too held them idle until the retry's thread ran, the convoy F2
 *     avoids: 4 threads on 2 CPUs took 1.6x as long per acquire
 *     (`bench/index.js contended --quick`, interleaved with the build
 *     before).
 *     The list holds asks, which outlive the wake: a blocking waiter's
 *     lies in the frame of the call that asks again or gives back; an
 *     async record's is taken off before the record is freed.
 *
 * The fairness decisions (starving, room_for, hand_out, the ask's turn,
 * the release's choice) are written once in sema_fair.h, for this file and
 * for a Sema in a shared space (space_sema.c), which keeps the same rules.
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
 *   next      find_free                < nr, else 0; an index
 *   frees     -                        never read by C: only added to (JS parks on it)
 *   stamp     grant, hand              any value: only stored back, + 1
 *   epoch     reclaim                  only compared with sab_death_epoch()
 *   holder[i] find_free, reclaim,      compared with 0, RECOVERED and owner ids
 *             latest_of, held, CAS     (masked); never an index
 *   stamps[i] latest_of                any value: only ages compared
 *
 * Indexes into holder and stamps are the loop counters below nr, the
 * checked next hint, or a slot that the caller passed and release checked
 * against nr. A token is always such an index. So a scribbled word earns
 * SAB_E_CORRUPT, a wrong answer or a wait that times out; never an access
 * outside the 8 + 3 nr words, or a token >= nr. A CAS that keeps failing
 * (a word flipped under it) gives up after a bounded number of tries.
 *
 * The queue. Waiters queue in the lot under the key &base[1] + 1 (key_of):
 * no Int32Array or BigInt64Array cell has that address, so a plain wait on
 * a word is never served by a release, and a plain notify never wakes an
 * acquirer. The key is in the bucket of &base[1] (the lot hashes
 * addr >> 2), where the refill watchers park too: that bucket's counter is
 * the one JS reads (K2, K3).
 *
 * Holders that die. A thread that ends cannot go through the semaphores it
 * held slots of: nothing tells its teardown which they are, and it may no
 * longer reference their memory. Slots of dead holders are reclaimed under
 * the bucket lock by whoever comes next natively (JS goes native when it
 * finds no free slot), and the process's death epoch says when to look:
 *  R1 acquire, try, release and kick compare sab_death_epoch() with the epoch
 *     word and, when it moved, scan the holders: a slot whose holder is dead
 *     goes back to the pool, RECOVERED. The epoch is read before the scan,
 *     so a death during the scan moves it again and the next caller scans
 *     again.
 *  R2 Queued records carry a death hook (on_death). A death visits every
 *     bucket with records (sab__wake_watchers) and, under this bucket's lock,
 *     runs the scan and hands free slots (come back, or freed by a JS
 *     give-back that died before its kick) to the oldest waiters.
 *     Touching the memory there is safe: a queued record keeps it alive (an
 *     async record holds a reference to its buffer; a blocking record's
 *     thread is inside the call that was given it), and the visit reads
 *     the memory only while a record is queued: the last dequeue is its last
 *     access.
 *  R3 An acquirer that finds no free slot raised the bucket's counter
 *     before it read the epoch (both seq-cst) and queues under the same
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
  W_NEXT = SAB_SEMA_W_NEXT,
  W_STAMP = 4,
  W_EPOCH = 5,
  HEADER = SAB_SEMA_HEADER_BYTES / 4
};

#define OWNER_MASK     0x3FFFFFFFu
#define FILLER         ((int32_t)0x80000001u) /* neither free nor an owner id */
#define HELD_RECOVERED SAB_SEMA_HELD_RECOVERED

#define RD(p)    sab__rd32(p)
#define WR(p, v) __atomic_store_n((p), (int32_t)(v), __ATOMIC_RELAXED)

/* The lot key of the semaphore's waiters (see "The queue" above). */
static uintptr_t key_of(const sab_sema_t *s) { return (uintptr_t)s->base + SAB_SEMA_KEY_OFFSET; }

static int32_t *holder_of(const sab_sema_t *s) { return s->base + HEADER + s->nr; }
static int32_t *stamp_of(const sab_sema_t *s) { return s->base + HEADER + 2 * (size_t)s->nr; }

/* A holder word's value: free (0, or RECOVERED) or not. */
static int is_free(uint32_t h) { return h == 0 || h == HELD_RECOVERED; }

/* One CAS of a holder word from `from` to `to` (the protocol's only move). */
static int holder_cas(const sab_sema_t *s, uint64_t slot, uint32_t from, uint32_t to) {
  int32_t expect = (int32_t)from;
  return __atomic_compare_exchange_n(&holder_of(s)[slot], &expect, (int32_t)to, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}

static void frees_add(const sab_sema_t *s, int32_t d) {
  __atomic_fetch_add(&s->base[W_AVAIL], d, __ATOMIC_SEQ_CST);
}

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
  s->fair_ns = SAB_SEMA_FAIR_NS;
  int32_t *holder = holder_of(s), *stamp = stamp_of(s);
  /* Stamps, the reserved words and the padding start as FILLER, which no
   * holder word's search takes for free: a view attached with a size that
   * a racing write made up (bigger than this one, with room for it in the
   * buffer) reads them as holder words and finds no phantom free slot to
   * grant, and so writes no stamp past these bytes. */
  for (uint32_t i = 0; i < nr; i++) {
    WR(&s->base[HEADER + i], FILLER);
    WR(&holder[i], 0);
    WR(&stamp[i], FILLER);
  }
  if ((HEADER + 3 * (size_t)nr) % 2 != 0) WR(&s->base[HEADER + 3 * (size_t)nr], FILLER);
  WR(&s->base[W_NR], nr);
  WR(&s->base[W_NEXT], 0);
  WR(&s->base[W_STAMP], 0);
  WR(&s->base[W_EPOCH], sab_death_epoch());
  WR(&s->base[6], 0);
  WR(&s->base[7], 0);
  __atomic_store_n(&s->base[W_AVAIL], 0, __ATOMIC_SEQ_CST);
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
  s->fair_ns = SAB_SEMA_FAIR_NS;
  return 0;
}

int sab_sema_check(const sab_sema_t *s) {
  if (__atomic_load_n(&s->base[W_MAGIC], __ATOMIC_ACQUIRE) != SAB_SEMA_MAGIC) return SAB_E_CORRUPT;
  return RD(&s->base[W_NR]) == s->nr ? 0 : SAB_E_CORRUPT;
}

/* The free slots, counted from the holder words. */
uint32_t sab__sema_count_free(const sab_sema_t *s) {
  int32_t *holder = holder_of(s);
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->nr; i++) n += is_free(RD(&holder[i]));
  return n;
}

/* R1's scan, when the death epoch moved (under the lock). Answers how many
 * slots came back. The owners are this process's threads (reclaim) or a
 * shared space's (space_sema.c). */
int sab__sema_reclaim(const sab_sema_t *s, const sab__owners_t *o) {
  uint32_t epoch = o->epoch;
  if (!o->force && RD(&s->base[W_EPOCH]) == epoch) return 0;
  int32_t *holder = holder_of(s);
  int back = 0;
  for (uint32_t i = 0; i < s->nr; i++) {
    uint32_t h = RD(&holder[i]);
    if (is_free(h) || (h & OWNER_MASK) == 0 || o->alive(o->ctx, h & OWNER_MASK)) continue;
    if (holder_cas(s, i, h, HELD_RECOVERED)) back++;
  }
  if (back > 0) frees_add(s, back);
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

typedef sab__pool_t pool_t;

/* A free slot, searched from the next hint: p->avail 1 with p->slot and its
 * holder word p->held (read once), or p->avail 0 when every slot is out. */
int sab__sema_pool_checked(const sab_sema_t *s, pool_t *p) {
  int32_t *holder = holder_of(s);
  uint32_t start = RD(&s->base[W_NEXT]);
  if (start >= s->nr) start = 0;
  p->head = start;
  p->avail = 0;
  for (uint32_t k = 0, i = start; k < s->nr; k++) {
    uint32_t h = sab__rd32_sc(&holder[i]); /* K2: after the counter's raise */
    if (is_free(h)) {
      p->slot = i;
      p->held = h;
      p->avail = 1;
      return 0;
    }
    if (++i == s->nr) i = 0;
  }
  return 0;
}

/* Take the free slot p found for `owner` (one CAS): the token, or
 * SAB_SEMA_NO_TOKEN when a racing take (JS's) got it first. */
uint32_t sab__sema_grant(const sab_sema_t *s, uint32_t owner, const pool_t *p) {
  if (!holder_cas(s, p->slot, p->held, owner & OWNER_MASK)) return SAB_SEMA_NO_TOKEN;
  uint32_t stamp_now = RD(&s->base[W_STAMP]) + 1;
  WR(&stamp_of(s)[p->slot], stamp_now);
  WR(&s->base[W_STAMP], stamp_now);
  __atomic_store_n(&s->base[W_NEXT], (int32_t)(p->slot + 1 == s->nr ? 0 : p->slot + 1),
                   __ATOMIC_RELAXED);
  return p->slot | (p->held == HELD_RECOVERED ? SAB_SEMA_RECOVERED : 0);
}

/* Search and grant until one CAS wins: the token, or SAB_SEMA_NO_TOKEN when
 * no slot is free. Each lost CAS is a take that won (or a flipped word);
 * the bound stops a scribbler from keeping us here. */
uint32_t sab__sema_take(const sab_sema_t *s, uint32_t owner) {
  for (uint32_t tries = 0; tries < 64 + 4 * s->nr; tries++) {
    pool_t p;
    sab__sema_pool_checked(s, &p);
    if (p.avail == 0) return SAB_SEMA_NO_TOKEN;
    uint32_t t = sab__sema_grant(s, owner, &p);
    if (t != SAB_SEMA_NO_TOKEN) return t;
  }
  return SAB_SEMA_NO_TOKEN;
}

/* When a queued record's acquire first asked: its ask's (the key's records
 * are all this file's, each with ctx pointing to its sab_sema_ask_t). */
static uint64_t since_of(const sab_waiter_t *w) { return ((const sab_sema_ask_t *)w->ctx)->since; }

/* ---- F5: the retries' list of a bucket (under its lock) ---- */

static void retry_link(sab__bucket_t *b, sab_sema_ask_t *a) {
  if (a->retrying) return;
  a->rprev = NULL;
  a->rnext = b->retry;
  if (b->retry != NULL) b->retry->rprev = a;
  b->retry = a;
  __atomic_store_n(&a->retrying, 1, __ATOMIC_RELEASE); /* also read unlocked: ask_done */
}

static void retry_unlink(sab__bucket_t *b, sab_sema_ask_t *a) {
  if (!a->retrying) return;
  if (a->rprev != NULL)
    a->rprev->rnext = a->rnext;
  else
    b->retry = a->rnext;
  if (a->rnext != NULL) a->rnext->rprev = a->rprev;
  a->rnext = a->rprev = NULL;
  __atomic_store_n(&a->retrying, 0, __ATOMIC_RELEASE);
}

/* Retries of s's semaphore that asked before `since`. */
static uint32_t retries_before(const sab__bucket_t *b, const sab_sema_t *s, uint64_t since) {
  uint32_t n = 0;
  for (const sab_sema_ask_t *a = b->retry; a != NULL; a = a->rnext)
    n += a->view.base == s->base && a->since < since;
  return n;
}

/* The fairness rules (sema_fair.h) over the lot's records: a record's
 * since is its ask's, the bound is the view's. */
#define F_(name)         lsf_##name
#define F_C              sab__bucket_t *
#define F_H              sab_waiter_t *
#define F_NIL            NULL
#define F_KEY_T          uintptr_t
#define F_WAKES_T        sab__wake_list_t
#define F_OLDEST(c, key) sab__oldest_locked((c), (key))
#define F_SINCE(c, h)    ((void)(c), since_of(h))
#define F_BOUND(c, s, h) ((void)(c), (void)(h), (s)->fair_ns)
#define F_OWNER(c, h)    ((void)(c), (h)->owner)
#define F_HAND(c, h, t, x) \
  ((h)->token = (t), sab__wake_list_add((x), sab__dequeue_locked((c), (h), SAB_W_NOTIFIED)))
#define F_RETRY(c, s, h, x)                                \
  ((void)(s), retry_link((c), (sab_sema_ask_t *)(h)->ctx), \
   sab__wake_list_add((x), sab__dequeue_locked((c), (h), SAB_W_NOTIFIED)))
#define F_RETRIES_BEFORE(c, s, since) retries_before((c), (s), (since))
#define F_RECLAIM(c, s, force)        ((void)(c), (void)(force), reclaim(s)) /* R1: by the epoch */
#include "sema_fair.h"

/* After unlocking, when a slot may have become free: wake those who wait
 * for a refill (JS's resumeFn, lib/sema.js), if any. They park on frees,
 * then look for a free slot (K2). */
static void refilled(const sab_sema_t *s) {
  uintptr_t addr = (uintptr_t)&s->base[W_AVAIL];
  if (__atomic_load_n(&sab_bucket_counts()[sab_bucket_of(addr) * SAB_COUNT_STRIDE],
                      __ATOMIC_SEQ_CST) != 0) {
    sab_notify(addr, UINT64_MAX);
  }
}

/* Under the lock: R1, then free slots to the queued waiters (lsf_sync). */
static int sync_deaths(sab__bucket_t *b, const sab_sema_t *s, sab__wake_list_t *l, int all,
                       uint64_t now) {
  return lsf_sync(b, s, key_of(s), 0, all, l, now);
}

/* The records' death hook (R2), called with the oldest queued record. */
static void on_death(sab__bucket_t *b, sab_waiter_t *w, sab__wake_list_t *l) {
  /* A copy: w->ctx may live in the frame of a blocking waiter, gone once
   * hand_out has dequeued that waiter. */
  sab_sema_t view = ((const sab_sema_ask_t *)w->ctx)->view;
  /* A view checked by the record's owner; w keeps the memory alive (R2).
   * Slots left over after every waiter got one stay pooled. Those who wait
   * for a refill (resumeFn) watch every death themselves and look again, so
   * no refill wake is sent from here (it would take a second bucket lock). */
  sync_deaths(b, &view, l, 1, sab_now());
}

int sab_sema_ask(sab_sema_ask_t *a, uint32_t owner, sab_waiter_t *w, uint32_t *token) {
  const sab_sema_t *s = &a->view;
  uintptr_t key = key_of(s);
  int32_t *count = &sab_bucket_counts()[sab_bucket_of(key) * SAB_COUNT_STRIDE];
  sab__wake_list_t l;
  uint32_t t = SAB_SEMA_NO_TOKEN;
  int r, back;
  sab__wake_list_init(&l);
  sab__bucket_t *b = sab__lock(key);
  /* R3 and K2: raise the counter before the epoch and the holders are read
   * (the search reads holders seq-cst). */
  __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
  retry_unlink(b, a); /* F5: back (a retry) */
  uint64_t now = sab_now();
  if (a->since == 0 || a->since > now) a->since = now;
  t = lsf_ask(b, s, key, owner, a->since, 0, &l, now, &back); /* F4, F3, F1, K3 */
  if (t != SAB_SEMA_NO_TOKEN) {
    *token = t;
    r = SAB_OK;
  } else if (w == NULL) {
    r = SAB_TIMED_OUT;
  } else {
    w->owner = owner;
    w->ctx = a;
    w->token = SAB_SEMA_NO_TOKEN;
    w->on_death = on_death;
    sab__enqueue_by_since_locked(b, w, key); /* F2 */
    r = SAB_PENDING;
  }
  __atomic_fetch_sub(count, 1, __ATOMIC_SEQ_CST); /* the enqueue counted it again */
  sab__unlock(b);
  sab__wake_list_run(&l);
  if (back > 0) refilled(s);
  return r;
}

int sab_sema_try(const sab_sema_t *s, uint32_t owner, uint32_t *token) {
  sab_sema_ask_t a;
  sab_sema_ask_init(&a, s);
  return sab_sema_ask(&a, owner, NULL, token);
}

void sab_sema_ask_init(sab_sema_ask_t *a, const sab_sema_t *s) {
  a->view = *s;
  a->since = 0;
  a->rnext = a->rprev = NULL;
  a->retrying = 0;
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
  uint32_t h = RD(&holder_of(s)[slot]);
  return !is_free(h) && (h & OWNER_MASK) == (owner & OWNER_MASK) ? slot : -1;
}

int sab__sema_hand(const sab_sema_t *s, int64_t slot, uint32_t from, uint32_t to) {
  if (!holder_cas(s, (uint64_t)slot, from & OWNER_MASK, to & OWNER_MASK)) return SAB_E_CORRUPT;
  uint32_t stamp_now = RD(&s->base[W_STAMP]) + 1;
  WR(&stamp_of(s)[slot], stamp_now);
  WR(&s->base[W_STAMP], stamp_now);
  return 0;
}

int sab__sema_pool_put(const sab_sema_t *s, int64_t slot, uint32_t owner) {
  if (!holder_cas(s, (uint64_t)slot, owner & OWNER_MASK, 0)) return SAB_E_CORRUPT;
  frees_add(s, 1);
  return 0;
}

int sab_sema_release(const sab_sema_t *s, uint32_t owner, int64_t slot, uint32_t *info) {
  uintptr_t key = key_of(s);
  sab__wake_list_t l;
  uint32_t flags = 0, free_before;
  int r, back;
  if (owner == 0 || (owner & ~OWNER_MASK) != 0) return SAB_E_BAD_TOKEN;
  sab__wake_list_init(&l);
  sab__bucket_t *b = sab__lock(key);
  r = lsf_release_held(b, s, key, owner, slot, &l, sab_now(), &flags, &back, &free_before);
  sab__unlock(b);
  sab__wake_list_run(&l);
  if ((flags & SAB_SEMA_POOLED) || back > 0) refilled(s);
  if (info != NULL) *info = flags;
  return r;
}

void sab_sema_give_back(sab_sema_ask_t *a, uint32_t owner, uint32_t token) {
  if (token == SAB_SEMA_NO_TOKEN) {
    /* F4: a wake to try again that will never be used: pass it on, and
     * the place it kept (F5). */
    sab__bucket_t *b = sab__lock(key_of(&a->view));
    retry_unlink(b, a);
    sab__unlock(b);
    (void)sab_sema_kick(&a->view);
    return;
  }
  /* BAD_TOKEN here means: reclaimed already (the owner was seen dead). */
  (void)sab_sema_release(&a->view, owner, token & ~SAB_SEMA_RECOVERED, NULL);
}

void sab_sema_ask_done(sab_sema_ask_t *a) {
  /* Set and cleared under the lock; read here by the ask's own thread,
   * after the wake that set it reached it (or after its own ask). */
  if (__atomic_load_n(&a->retrying, __ATOMIC_ACQUIRE)) sab_sema_give_back(a, 0, SAB_SEMA_NO_TOKEN);
}

uint32_t sab_sema_waiting(const sab_sema_t *s) {
  /* One lock for both: a record moves between the queue and the retries
   * only under it, so it is counted once. */
  sab__bucket_t *b = sab__lock(key_of(s));
  uint32_t n = sab__waiters_locked(b, key_of(s)) + retries_before(b, s, UINT64_MAX);
  sab__unlock(b);
  return n;
}

int sab_sema_kick(const sab_sema_t *s) {
  sab__wake_list_t l;
  sab__wake_list_init(&l);
  sab__bucket_t *b = sab__lock(key_of(s));
  int back = sync_deaths(b, s, &l, 1, sab_now());
  sab__unlock(b);
  sab__wake_list_run(&l);
  refilled(s);
  return back;
}

int sab_sema_available(const sab_sema_t *s) {
  sab__wake_list_t l;
  int r;
  sab__wake_list_init(&l);
  sab__bucket_t *b = sab__lock(key_of(s));
  int back = sync_deaths(b, s, &l, 0, sab_now());
  r = (int)sab__sema_count_free(s);
  sab__unlock(b);
  sab__wake_list_run(&l);
  if (back > 0) refilled(s);
  return r;
}

int sab_sema_wait(const sab_sema_t *s, uint32_t owner, uint64_t timeout_ns, uint32_t *token) {
  uint64_t deadline = UINT64_MAX;
  if (timeout_ns != UINT64_MAX) {
    uint64_t now = sab_now();
    deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
  }
  sab_sema_ask_t a; /* F2: a retry keeps its place */
  sab_sema_ask_init(&a, s);
  for (;;) {
    sab_waiter_t w;
    sab_waiter_init_blocking(&w);
    int r = sab_sema_ask(&a, owner, timeout_ns == 0 ? NULL : &w, token);
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
    /* F4: woken to try again past the deadline, it still tries once, so
     * the wake is not lost. */
    if (sab_now() >= deadline) return sab_sema_ask(&a, owner, NULL, token);
  }
}
