/*
 * A pool of fixed-size waiter records, one per env and kind (async.c).
 *
 * Why not malloc per record: a pending waitAsync's memory is most of what
 * it costs (bench/cases/atomics.js), and a malloc'd record pays a header
 * and a rounding up to 16 bytes, and needs a list of its own so that the
 * env's teardown can find it. Here records lie side by side in chunks of
 * SAB_POOL_SLOTS; a record finds its chunk from the byte offset the pool
 * keeps in its w.user16 (sabsync.h), a chunk knows which of its slots are
 * live, and teardown visits those. Every record starts with its
 * sab_waiter_t.
 *
 * Ids: a live record is named by its chunk's index times SAB_POOL_SLOTS
 * plus its slot, below SAB_POOL_MAX_ID; a chunk keeps its index while it
 * exists, so an id names the same slot until that chunk is freed (a chunk
 * is freed when it is empty and another empty one is kept). Callers that
 * hand ids out keep a serial number in the record to tell a reused slot
 * from the one they named.
 *
 * The env's thread only: nothing here is thread-safe, except that
 * sab_pool_owner may be called from any thread for a live record (it
 * reads what never changes while the record lives).
 */
#ifndef SAB_NAPI_POOL_H
#define SAB_NAPI_POOL_H

/* check.h first: it defines _GNU_SOURCE, which uv.h (the portable
 * parker's sabsync.h includes it) needs for the POSIX types. */
#include "check.h"
#include "sabsync.h"

#include <stddef.h>
#include <stdint.h>

#define SAB_POOL_SLOTS  128
#define SAB_POOL_MAX_ID (1u << 24)

typedef struct sab_pool_chunk_s sab_pool_chunk_t;

typedef struct {
  size_t size;               /* bytes per record, a multiple of 8 */
  void *owner;               /* what sab_pool_owner answers (the env) */
  sab_pool_chunk_t **chunks; /* by index; NULL where a chunk was freed */
  uint32_t nchunks, cap;     /* used and allocated length of chunks */
  sab_pool_chunk_t *open;    /* chunks with a free slot, doubly linked */
  uint32_t empty;            /* chunks with no live record (at most 1 kept) */
} sab_pool_t;

/* An empty pool of records of `size` bytes (at least a sab_waiter_t's;
 * the records of one chunk must span under 64 KiB). Allocates nothing. */
void sab_pool_init(sab_pool_t *p, size_t size, void *owner);
/* A zeroed record, except w.user16 (the pool's), or NULL when out of
 * memory or SAB_POOL_MAX_ID records are live. */
sab_waiter_t *sab_pool_alloc(sab_pool_t *p);
/* Give a live record back. */
void sab_pool_free(sab_waiter_t *w);
/* The owner of the pool of a live record. */
void *sab_pool_owner(const sab_waiter_t *w);
/* The id of a live record, and the live record with an id (NULL if none). */
uint32_t sab_pool_id(const sab_waiter_t *w);
sab_waiter_t *sab_pool_find(const sab_pool_t *p, uint32_t id);
/* Call fn on each live record. fn must not free records or allocate. */
void sab_pool_each(const sab_pool_t *p, void (*fn)(sab_waiter_t *w, void *arg), void *arg);
/* Free every chunk (records still live are gone with them). */
void sab_pool_destroy(sab_pool_t *p);

#endif /* SAB_NAPI_POOL_H */
