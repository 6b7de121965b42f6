/*
 * The rate limiter: the times of the last rps grants, in shared memory.
 *
 * Layout: from an 8-byte aligned base.
 *
 *   bytes        name    written        meaning
 *   0            magic   init           SAB_RATE_MAGIC (int32); &base[0] keys the bucket lock
 *   4            rps     init           grants allowed per unit (int32)
 *   8            flags   init           bit 0: uniform spacing (int32)
 *   12           head    bucket lock    ring index of the oldest of the last rps grants
 *   16           unit    init           the window, ns (int64)
 *   24           -       init           0
 *   32 ..        ring    bucket lock    rps int64: grant times (sab_now() scale);
 *                                       EMPTY (INT64_MIN) for never
 *
 * Invariant, under the bucket lock: ring[head] is the oldest of the last rps
 * grants and ring[head - 1] the newest; grant times never decrease (the
 * clock is read under the lock). A grant at t needs t >= ring[head] + unit,
 * so the rps+1 most recent grants span at least `unit`: no half-open window
 * of `unit` holds more than rps of them. With uniform spacing a grant also
 * needs t >= ring[head - 1] + unit / rps.
 *
 * Untrusted memory. Any thread's JS can write these words at any moment.
 * Every word is read once into a local, the local is checked, and only the
 * local is used; rps comes from the view that sab_rate_open checked against
 * the memory's size, never from a later read. Each read, and its bounds:
 *
 *   word      read by              checked / used as
 *   magic     open                 == SAB_RATE_MAGIC, else SAB_E_CORRUPT
 *   rps       open                 1 .. SAB_RATE_MAX and fits the bytes; then
 *                                  only the view's copy is used
 *   flags     uniform              bit 0 only
 *   head      take                 < rps, else SAB_E_CORRUPT; an index
 *   unit      take, unit_ns        1 .. INT64_MAX / 4 (take), else SAB_E_CORRUPT;
 *                                  unit_ns hands it to JS as a number
 *   ring[i]   take (head, head-1)  EMPTY or 0 .. now, else SAB_E_CORRUPT (so
 *                                  oldest + unit cannot overflow)
 *
 * The ring's indexes are the checked head and (head + rps - 1) % rps.
 *
 * Nothing is held between calls: a caller that dies after a grant used
 * it, one that dies while it waits for its turn had nothing recorded. The
 * lock is the lot's bucket mutex, held only inside sab_rate_take, which a
 * terminated thread cannot be interrupted in. In a shared space the lock is
 * instead the space's bucket of the limiter's turn (space_sema.c), which
 * every process shares and a killed process cannot leave held (robust).
 */
#include "internal.h"

enum { W_MAGIC = 0, W_RPS = SAB_RATE_W_RPS, W_FLAGS = 2, W_HEAD = 3 };
#define HEADER_BYTES SAB_RATE_HEADER_BYTES
#define EMPTY        INT64_MIN

#define RD32(p)    sab__rd32(p)
#define WR32(p, v) __atomic_store_n((p), (int32_t)(v), __ATOMIC_RELAXED)
#define RD64(p)    sab__rd64(p)
#define WR64(p, v) __atomic_store_n((p), (int64_t)(v), __ATOMIC_RELAXED)

static int64_t *unit_of(const sab_rate_t *r) { return (int64_t *)((char *)r->base + 16); }
static int64_t *ring_of(const sab_rate_t *r) { return (int64_t *)((char *)r->base + HEADER_BYTES); }

size_t sab_rate_bytes(uint32_t rps) {
  if (rps == 0 || rps > SAB_RATE_MAX) return 0;
  return HEADER_BYTES + 8 * (size_t)rps;
}

int sab_rate_init(sab_rate_t *r, void *mem, size_t bytes, uint32_t rps, uint64_t unit_ns,
                  int uniform) {
  size_t need = sab_rate_bytes(rps);
  if (need == 0 || bytes < need || mem == NULL || ((uintptr_t)mem & 7) != 0) return SAB_E_INVAL;
  if (unit_ns == 0 || unit_ns > (uint64_t)INT64_MAX / 4) return SAB_E_INVAL;
  r->base = mem;
  r->rps = rps;
  int64_t *ring = ring_of(r);
  for (uint32_t i = 0; i < rps; i++) WR64(&ring[i], EMPTY);
  WR32(&r->base[W_RPS], rps);
  WR32(&r->base[W_FLAGS], uniform ? 1 : 0);
  WR32(&r->base[W_HEAD], 0);
  WR64(unit_of(r), unit_ns);
  WR64((int64_t *)((char *)mem + 24), 0);
  __atomic_store_n(&r->base[W_MAGIC], SAB_RATE_MAGIC, __ATOMIC_RELEASE);
  return 0;
}

int sab_rate_open(sab_rate_t *r, void *mem, size_t bytes) {
  int32_t *base = mem;
  if (mem == NULL || ((uintptr_t)mem & 7) != 0 || bytes < HEADER_BYTES) return SAB_E_CORRUPT;
  if (__atomic_load_n(&base[W_MAGIC], __ATOMIC_ACQUIRE) != SAB_RATE_MAGIC) return SAB_E_CORRUPT;
  uint32_t rps = RD32(&base[W_RPS]);
  size_t need = sab_rate_bytes(rps);
  if (need == 0 || bytes < need) return SAB_E_CORRUPT;
  r->base = base;
  r->rps = rps;
  return 0;
}

uint64_t sab_rate_unit_ns(const sab_rate_t *r) { return (uint64_t)RD64(unit_of(r)); }
int sab_rate_uniform(const sab_rate_t *r) { return (int)(RD32(&r->base[W_FLAGS]) & 1); }

/* The take, under whichever lock guards this limiter: the lot's bucket
 * (sab_rate_take), or in a shared space the bucket of its turn
 * (space_sema.c). */
int sab__rate_take_locked(const sab_rate_t *r, uint64_t *at, uint64_t *wait_ns) {
  int64_t unit = RD64(unit_of(r));
  if (unit <= 0 || unit > INT64_MAX / 4) return SAB_E_CORRUPT;
  int64_t spacing = sab_rate_uniform(r) ? unit / r->rps : 0;
  int64_t *ring = ring_of(r);
  uint32_t head = RD32(&r->base[W_HEAD]);
  if (head >= r->rps) return SAB_E_CORRUPT;
  int64_t now = (int64_t)sab_now();
  int64_t oldest = RD64(&ring[head]);
  int64_t newest = RD64(&ring[(head + r->rps - 1) % r->rps]);
  /* Recorded times are never later than the clock (I, above); one that is
   * was not written here, and would make the wait below overflow. */
  if ((oldest != EMPTY && (oldest > now || oldest < 0)) ||
      (newest != EMPTY && (newest > now || newest < 0))) {
    return SAB_E_CORRUPT;
  }
  int64_t ready = oldest == EMPTY ? now : oldest + unit;
  if (spacing > 0 && newest != EMPTY && newest + spacing > ready) ready = newest + spacing;
  if (ready > now) {
    *wait_ns = (uint64_t)(ready - now);
    return SAB_PENDING;
  }
  WR64(&ring[head], now);
  WR32(&r->base[W_HEAD], (head + 1) % r->rps);
  *at = (uint64_t)now;
  return SAB_OK;
}

int sab_rate_take(const sab_rate_t *r, uint64_t *at, uint64_t *wait_ns) {
  sab__bucket_t *b = sab__lock((uintptr_t)r->base);
  int result = sab__rate_take_locked(r, at, wait_ns);
  sab__unlock(b);
  return result;
}
