/*
 * The deadline heap (heap.h). Invariant: for every i > 0,
 * v[(i - 1) / 2].at <= v[i].at, and *v[i].index == i.
 */
#include "heap.h"

#include <stdlib.h>

static void put(sab_heap_t *h, uint32_t i, sab_heap_entry_t d) {
  h->v[i] = d;
  *d.index = i;
}

static void up(sab_heap_t *h, uint32_t i) {
  sab_heap_entry_t d = h->v[i];
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (h->v[p].at <= d.at) break;
    put(h, i, h->v[p]);
    i = p;
  }
  put(h, i, d);
}

static void down(sab_heap_t *h, uint32_t i) {
  sab_heap_entry_t d = h->v[i];
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = l;
    if (l >= h->len) break;
    if (r < h->len && h->v[r].at < h->v[l].at) m = r;
    if (h->v[m].at >= d.at) break;
    put(h, i, h->v[m]);
    i = m;
  }
  put(h, i, d);
}

int sab_heap_push(sab_heap_t *h, uint32_t *index, uint64_t at) {
  if (h->len == h->cap) {
    if (h->cap > UINT32_MAX / 4) return -1;
    uint32_t cap = h->cap != 0 ? h->cap * 2 : 64;
    sab_heap_entry_t *v = realloc(h->v, cap * sizeof *v);
    if (v == NULL) return -1;
    h->v = v;
    h->cap = cap;
  }
  h->v[h->len] = (sab_heap_entry_t){at, index};
  up(h, h->len++);
  return 0;
}

void sab_heap_remove(sab_heap_t *h, uint32_t *index) {
  uint32_t i = *index;
  if (i == UINT32_MAX) return;
  *index = UINT32_MAX;
  h->len--;
  if (i == h->len) return;
  put(h, i, h->v[h->len]);
  down(h, i);
  up(h, i);
}

void sab_heap_free(sab_heap_t *h) {
  free(h->v);
  h->v = NULL;
  h->len = h->cap = 0;
}
