/*
 * The table of kept addresses (keep.h): open addressing with linear
 * probing, deletion by shifting the entries after it back (no tombstones),
 * grown when half full. Nearly always it holds a handful of entries.
 */
#include "keep.h"
#include "values.h"

#include <stdlib.h>

static size_t home(const sab_keep_t *k, uintptr_t key) {
  /* Fibonacci hashing of the word address. */
  uint64_t h = (uint64_t)(key >> 2) * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 32) & (k->cap - 1);
}

/* The slot of `key`, or of the empty slot where it would go. */
static size_t probe(const sab_keep_t *k, uintptr_t key) {
  size_t i = home(k, key);
  while (k->slots[i].key != 0 && k->slots[i].key != key) i = (i + 1) & (k->cap - 1);
  return i;
}

static int grow(sab_keep_t *k) {
  size_t cap = k->cap != 0 ? k->cap * 2 : 8;
  sab_keep_entry_t *old = k->slots;
  size_t old_cap = k->cap;
  sab_keep_entry_t *slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return -1;
  k->slots = slots;
  k->cap = cap;
  for (size_t i = 0; i < old_cap; i++) {
    if (old[i].key != 0) k->slots[probe(k, old[i].key)] = old[i];
  }
  free(old);
  return 0;
}

int sab_napi_keep(napi_env env, sab_keep_t *k, uintptr_t key, napi_value value, const char *what) {
  if (k->cap != 0) {
    size_t i = probe(k, key);
    if (k->slots[i].key == key) {
      k->slots[i].count++;
      return 0;
    }
  }
  if ((k->len + 1) * 2 > k->cap && grow(k) != 0) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return -1;
  }
  napi_ref ref;
  if (napi_create_reference(env, value, 1, &ref) != napi_ok) {
    sab_napi_throw_last(env, what);
    return -1;
  }
  sab_keep_entry_t *e = &k->slots[probe(k, key)];
  e->key = key;
  e->ref = ref;
  e->count = 1;
  k->len++;
  return 0;
}

void sab_napi_unkeep(napi_env env, sab_keep_t *k, uintptr_t key) {
  if (k->cap == 0) return;
  size_t i = probe(k, key);
  if (k->slots[i].key != key || --k->slots[i].count > 0) return;
  sab_napi_note_failure(napi_delete_reference(env, k->slots[i].ref));
  /* Shift back the entries of the run after i that may live there. */
  size_t mask = k->cap - 1;
  for (size_t j = (i + 1) & mask; k->slots[j].key != 0; j = (j + 1) & mask) {
    size_t h = home(k, k->slots[j].key);
    /* j's entry may move to i unless its home lies cyclically in (i, j]. */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      k->slots[i] = k->slots[j];
      i = j;
    }
  }
  k->slots[i].key = 0;
  k->slots[i].ref = NULL;
  k->slots[i].count = 0;
  k->len--;
}

void sab_napi_keep_free(napi_env env, sab_keep_t *k) {
  for (size_t i = 0; i < k->cap; i++) {
    if (k->slots[i].key != 0) sab_napi_note_failure(napi_delete_reference(env, k->slots[i].ref));
  }
  free(k->slots);
  k->slots = NULL;
  k->cap = k->len = 0;
}
