/*
 * The record pool (pool.h).
 *
 * A chunk: its header, then SAB_POOL_SLOTS records. Slots below `fresh`
 * have been handed out at least once; a slot given back goes on the
 * chunk's free list (linked by the record's w.next), and the bit of a live
 * slot is set in `live_bits`. Slots at or above `fresh` have never been
 * touched, so a chunk costs resident memory only for what it has held.
 * Built with AddressSanitizer, free and never-used slots are poisoned
 * (except a free slot's link), so a record used after it was given back is
 * reported as such.
 */
#include "pool.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define SAB_POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SAB_POOL_ASAN 1
#endif
#endif
#ifdef SAB_POOL_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct sab_pool_chunk_s {
  sab_pool_t *pool;
  sab_pool_chunk_t *next, *prev; /* in pool->open while a slot is free */
  sab_waiter_t *free;            /* slots given back, linked by w.next */
  uint32_t index;                /* in pool->chunks */
  uint32_t live;                 /* live records */
  uint32_t fresh;                /* slots from here on were never used */
  uint32_t in_open;
  uint64_t live_bits[SAB_POOL_SLOTS / 64];
  _Alignas(16) unsigned char records[];
};

static sab_waiter_t *slot_at(const sab_pool_chunk_t *c, uint32_t slot) {
  return (sab_waiter_t *)(void *)(c->records + (size_t)slot * c->pool->size);
}

static sab_pool_chunk_t *chunk_of(const sab_waiter_t *w) {
  return (sab_pool_chunk_t *)(void *)((unsigned char *)w - w->user16 -
                                      offsetof(sab_pool_chunk_t, records));
}

static uint32_t slot_of(const sab_pool_chunk_t *c, const sab_waiter_t *w) {
  return (uint32_t)(w->user16 / c->pool->size);
}

void sab_pool_init(sab_pool_t *p, size_t size, void *owner) {
  memset(p, 0, sizeof *p);
  p->size = (size + 7) & ~(size_t)7;
  p->owner = owner;
}

static void open_push(sab_pool_t *p, sab_pool_chunk_t *c) {
  c->prev = NULL;
  c->next = p->open;
  if (p->open != NULL) p->open->prev = c;
  p->open = c;
  c->in_open = 1;
}

static void open_remove(sab_pool_t *p, sab_pool_chunk_t *c) {
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    p->open = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  c->next = c->prev = NULL;
  c->in_open = 0;
}

/* A new empty chunk in the first free index, on the open list. */
static sab_pool_chunk_t *chunk_new(sab_pool_t *p) {
  uint32_t i = 0;
  while (i < p->nchunks && p->chunks[i] != NULL) i++;
  if ((uint64_t)(i + 1) * SAB_POOL_SLOTS > SAB_POOL_MAX_ID) return NULL;
  if (i == p->cap) {
    uint32_t cap = p->cap != 0 ? p->cap * 2 : 8;
    sab_pool_chunk_t **a = realloc(p->chunks, cap * sizeof *a);
    if (a == NULL) return NULL;
    p->chunks = a;
    p->cap = cap;
  }
  size_t bytes = offsetof(sab_pool_chunk_t, records) + SAB_POOL_SLOTS * p->size;
  sab_pool_chunk_t *c = malloc(bytes);
  if (c == NULL) return NULL;
  memset(c, 0, offsetof(sab_pool_chunk_t, records));
  c->pool = p;
  c->index = i;
  POISON(c->records, SAB_POOL_SLOTS * p->size);
  p->chunks[i] = c;
  if (i == p->nchunks) p->nchunks++;
  open_push(p, c);
  p->empty++;
  return c;
}

static void chunk_free(sab_pool_t *p, sab_pool_chunk_t *c) {
  if (c->in_open) open_remove(p, c);
  p->chunks[c->index] = NULL;
  while (p->nchunks > 0 && p->chunks[p->nchunks - 1] == NULL) p->nchunks--;
  UNPOISON(c->records, SAB_POOL_SLOTS * p->size);
  free(c);
}

sab_waiter_t *sab_pool_alloc(sab_pool_t *p) {
  sab_pool_chunk_t *c = p->open;
  if (c == NULL && (c = chunk_new(p)) == NULL) return NULL;
  sab_waiter_t *w;
  if (c->free != NULL) {
    w = c->free;
    UNPOISON(w, p->size);
    c->free = w->next;
  } else {
    w = slot_at(c, c->fresh++);
    UNPOISON(w, p->size);
  }
  if (c->live++ == 0) p->empty--;
  if (c->free == NULL && c->fresh == SAB_POOL_SLOTS) open_remove(p, c);
  memset(w, 0, p->size);
  w->user16 = (uint16_t)((unsigned char *)w - c->records);
  uint32_t slot = slot_of(c, w);
  c->live_bits[slot / 64] |= (uint64_t)1 << (slot % 64);
  return w;
}

void sab_pool_free(sab_waiter_t *w) {
  sab_pool_chunk_t *c = chunk_of(w);
  sab_pool_t *p = c->pool;
  uint32_t slot = slot_of(c, w);
  c->live_bits[slot / 64] &= ~((uint64_t)1 << (slot % 64));
  w->next = c->free;
  c->free = w;
  POISON((unsigned char *)w + sizeof w->next, p->size - sizeof w->next);
  if (!c->in_open) open_push(p, c);
  if (--c->live == 0) {
    /* Keep one empty chunk, so that a count of records going to and fro
     * across a chunk's edge does not malloc and free it each time. */
    if (p->empty++ > 0) {
      p->empty--;
      chunk_free(p, c);
    }
  }
}

void *sab_pool_owner(const sab_waiter_t *w) { return chunk_of(w)->pool->owner; }

uint32_t sab_pool_id(const sab_waiter_t *w) {
  const sab_pool_chunk_t *c = chunk_of(w);
  return c->index * SAB_POOL_SLOTS + slot_of(c, w);
}

sab_waiter_t *sab_pool_find(const sab_pool_t *p, uint32_t id) {
  uint32_t i = id / SAB_POOL_SLOTS, slot = id % SAB_POOL_SLOTS;
  if (i >= p->nchunks || p->chunks[i] == NULL) return NULL;
  const sab_pool_chunk_t *c = p->chunks[i];
  if (!(c->live_bits[slot / 64] & ((uint64_t)1 << (slot % 64)))) return NULL;
  return slot_at(c, slot);
}

void sab_pool_each(const sab_pool_t *p, void (*fn)(sab_waiter_t *w, void *arg), void *arg) {
  for (uint32_t i = 0; i < p->nchunks; i++) {
    const sab_pool_chunk_t *c = p->chunks[i];
    if (c == NULL) continue;
    for (uint32_t k = 0; k < SAB_POOL_SLOTS / 64; k++) {
      uint64_t bits = c->live_bits[k];
      while (bits != 0) {
        uint32_t b = (uint32_t)__builtin_ctzll(bits);
        bits &= bits - 1;
        fn(slot_at(c, k * 64 + b), arg);
      }
    }
  }
}

void sab_pool_destroy(sab_pool_t *p) {
  for (uint32_t i = 0; i < p->nchunks; i++) {
    if (p->chunks[i] != NULL) chunk_free(p, p->chunks[i]);
  }
  free(p->chunks);
  sab_pool_init(p, p->size, p->owner);
}
