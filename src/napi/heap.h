/*
 * A deadline heap: a binary min-heap of deadlines, each of an item that
 * keeps its own position in a uint32_t (`*index`, UINT32_MAX while it is
 * not in the heap), so that it can be taken out in O(log n) from anywhere.
 * An entry names its item by that field's address (the item is its
 * container: 16 bytes an entry). Plain C,
 * no Node-API: async.c keeps one per env for the timeouts of its waits.
 * Not thread-safe: one thread owns a heap.
 */
#ifndef SAB_NAPI_HEAP_H
#define SAB_NAPI_HEAP_H

#include <stdint.h>

typedef struct {
  uint64_t at;     /* the deadline (sab_now() scale) */
  uint32_t *index; /* the item's field that holds its position */
} sab_heap_entry_t;

typedef struct {
  sab_heap_entry_t *v;
  uint32_t len, cap;
} sab_heap_t;

/* Add the item whose position field is `index`, with deadline `at`;
 * *index is set. 0, or -1 out of memory. */
int sab_heap_push(sab_heap_t *h, uint32_t *index, uint64_t at);

/* Take out the item whose position is *index (nothing if UINT32_MAX);
 * *index becomes UINT32_MAX. */
void sab_heap_remove(sab_heap_t *h, uint32_t *index);

/* The entry with the earliest deadline, or NULL when empty. */
static inline const sab_heap_entry_t *sab_heap_min(const sab_heap_t *h) {
  return h->len > 0 ? &h->v[0] : (const sab_heap_entry_t *)0;
}

/* Free the heap's memory (its items are the caller's). */
void sab_heap_free(sab_heap_t *h);

#endif /* SAB_NAPI_HEAP_H */
