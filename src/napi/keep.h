/*
 * What keeps the memory of pending async waits alive: one reference per
 * waited address, however many records wait there, instead of one per
 * record (a napi_ref and its global handle cost more than the rest of a
 * record). Keyed by the address the records queue on (w.addr), so that a
 * record finds its entry again from its address alone.
 *
 * Why a reference at all: while a record is queued on an address, the
 * memory there must not be freed and reused by another buffer, whose
 * waiters would then share the queue (and a Sema's record reads its
 * memory when it gives a slot back at teardown). The entry references the
 * buffer of the first wait on the address; any buffer object over that
 * memory keeps it alive, and while the entry lives no other memory can
 * lie at that address.
 *
 * The env's thread only.
 */
#ifndef SAB_NAPI_KEEP_H
#define SAB_NAPI_KEEP_H

#include "check.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uintptr_t key; /* 0: an empty slot */
  napi_ref ref;
  size_t count; /* records that hold this entry */
} sab_keep_entry_t;

typedef struct {
  sab_keep_entry_t *slots; /* open addressing, linear probing */
  size_t cap, len;         /* cap: a power of two, or 0; len <= cap / 2 */
} sab_keep_t;

/* Count one more record on `key` (not 0), referencing `value` if it is the
 * first. 0, or -1 with an exception pending that names `what`. */
int sab_napi_keep(napi_env env, sab_keep_t *k, uintptr_t key, napi_value value, const char *what);
/* Count one record less on `key`; the last one deletes the reference. */
void sab_napi_unkeep(napi_env env, sab_keep_t *k, uintptr_t key);
/* Delete every reference left and the table (teardown). */
void sab_napi_keep_free(napi_env env, sab_keep_t *k);

#endif /* SAB_NAPI_KEEP_H */
