/*
 * In-process owner ids and the JS threads they name (sabsync_inspect.h).
 *
 * An open-addressing table of (id, thread id) pairs under one mutex: it is
 * written once per thread that loads the addon and read only to tell a
 * person who holds a lock, so a lock costs nothing here. Ids are never 0
 * (owner.c), which marks an empty cell. When the table is full it is
 * rebuilt without the ids that died since (sab_owner_alive), and doubled
 * only if the living still fill half of it: a process that starts and ends
 * workers for ever keeps a table the size of its living threads.
 */
#include "internal.h"
#include "sabsync_inspect.h"

#include <stdlib.h>

typedef struct {
  uint32_t id, thread_id;
} pair_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pair_t *table; /* guarded by mu, as cap and used */
static uint32_t cap, used;

static uint32_t hash(uint32_t id) { return id * 0x9E3779B1u; }

/* Under mu: put a pair in a table with room (used < cap). */
static void put(pair_t *t, uint32_t n, uint32_t id, uint32_t thread_id) {
  for (uint32_t i = hash(id) & (n - 1);; i = (i + 1) & (n - 1)) {
    if (t[i].id == 0 || t[i].id == id) {
      t[i].id = id;
      t[i].thread_id = thread_id;
      return;
    }
  }
}

/* Under mu: a table with room for one more, the dead left out. */
static int make_room(void) {
  if (table != NULL && used + 1 <= cap / 2) return 0;
  uint32_t live = 0;
  for (uint32_t i = 0; i < cap; i++) live += table[i].id != 0 && sab_owner_alive(table[i].id);
  uint32_t n = cap == 0 ? 64 : cap;
  while (live + 1 > n / 2) n *= 2;
  pair_t *t = calloc(n, sizeof *t);
  if (t == NULL) return -1;
  for (uint32_t i = 0; i < cap; i++) {
    if (table[i].id != 0 && sab_owner_alive(table[i].id))
      put(t, n, table[i].id, table[i].thread_id);
  }
  free(table);
  table = t;
  cap = n;
  used = live;
  return 0;
}

int sab_owner_thread_set(uint32_t id, uint32_t thread_id) {
  if (id == 0) return SAB_E_INVAL;
  if (pthread_mutex_lock(&mu) != 0) abort();
  int r = make_room();
  if (r == 0) {
    uint32_t before = 0;
    for (uint32_t i = hash(id) & (cap - 1); table[i].id != 0; i = (i + 1) & (cap - 1)) {
      if (table[i].id == id) before = 1;
    }
    put(table, cap, id, thread_id);
    used += !before;
  }
  if (pthread_mutex_unlock(&mu) != 0) abort();
  return r;
}

int sab_owner_thread(uint32_t id, uint32_t *thread_id) {
  int found = 0;
  if (id == 0 || !sab_owner_alive(id)) return 0;
  if (pthread_mutex_lock(&mu) != 0) abort();
  for (uint32_t i = cap == 0 ? 0 : hash(id) & (cap - 1); cap != 0 && table[i].id != 0;
       i = (i + 1) & (cap - 1)) {
    if (table[i].id == id) {
      *thread_id = table[i].thread_id;
      found = 1;
      break;
    }
  }
  if (pthread_mutex_unlock(&mu) != 0) abort();
  return found;
}
