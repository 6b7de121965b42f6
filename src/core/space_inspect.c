/*
 * Seeing inside a space (include/sabsync_inspect.h): the parties behind
 * owner ids, and the directory's objects with their queued waiters.
 *
 * Nothing here takes a lock of the space: a reader must never be held up
 * by a stuck holder, and never hold up a caller, so a snapshot is a pass
 * over the tables with each word read once, as the memory says at that
 * moment. Entries and records change under it; what it answers is a
 * snapshot of claims for a person, never an input to a decision. The
 * words read, and how each is checked before use:
 *
 *   word                 checked / used as
 *   slot.word            LIVE with a generation in range, the id's, else not a party
 *   slot.pid             1 .. SAB_PID_MAX, else reported unknown (0)
 *   slot.thread          its high half names the id, else no thread id
 *   hdr.heap_used        clamped to the heap (reported only)
 *   hdr.dir_count        clamped to NDIR: the loop bound
 *   entry.state          one of CREATING, READY, RETIRED; EMPTY and FREE skipped;
 *                        anything else reported with SAB_INSPECT_BAD_STATE
 *   entry.keylen         <= SAB_SPACE_KEY_MAX before the key is copied, else BAD_KEY
 *   entry.off, .bytes    inside the heap, else BAD_PLACE (reported 0)
 *   entry.kind, .params  copied, named by the caller
 *   record.owner         != 0: taken
 *   record.state         WAITING or PARKED: queued
 *   record.key           & ~1 compared with the objects' ranges only
 */
#define _GNU_SOURCE
#include "lifeline.h"
#include "space_layout.h"
#include "sabsync_inspect.h"

#include <string.h>

/* A slot's thread word for the id a process holds bucket locks with
 * (sp->lock_id), which no JS thread is. */
#define THREAD_BOOKKEEPING 0xFFFFFFFFu

void sab_space_thread_set(sab_space_t *sp, uint32_t id, uint32_t thread_id) {
  uint32_t i, gen, lock_id = __atomic_load_n(&sp->lock_id, __ATOMIC_ACQUIRE);
  if (thread_id == THREAD_BOOKKEEPING || !sab__id_parts(id, &i, &gen)) return;
  __atomic_store_n(&sab__slot(sp, i)->thread, (uint64_t)id << 32 | thread_id, __ATOMIC_RELEASE);
  if (sab__id_parts(lock_id, &i, &gen)) {
    __atomic_store_n(&sab__slot(sp, i)->thread, (uint64_t)lock_id << 32 | THREAD_BOOKKEEPING,
                     __ATOMIC_RELEASE);
  }
}

/* Slot i's party, if its word says LIVE for `id` (0: whatever id it
 * names) and the kernel holds its lifeline. */
static int party_of(sab_space_t *sp, uint32_t i, uint32_t id, sab_space_party_t *out) {
  uint32_t live = sab__slot_live_id(sp, i);
  if (live == 0 || (id != 0 && live != id) || sab__slot_alive(sp, live) != 1) return 0;
  sab__slot_t *s = sab__slot(sp, i);
  uint32_t pid = __atomic_load_n(&s->pid, __ATOMIC_RELAXED);
  uint64_t thread = __atomic_load_n(&s->thread, __ATOMIC_ACQUIRE);
  out->id = live;
  out->pid = pid >= 1 && pid <= SAB_PID_MAX ? pid : 0;
  int mine = (uint32_t)(thread >> 32) == live;
  out->bookkeeping = mine && (uint32_t)thread == THREAD_BOOKKEEPING;
  out->has_thread = mine && !out->bookkeeping;
  out->thread_id = out->has_thread ? (uint32_t)thread : 0;
  return 1;
}

int sab_space_party(sab_space_t *sp, uint32_t id, sab_space_party_t *out) {
  uint32_t i, gen;
  if (!sab__id_parts(id, &i, &gen)) return 0;
  return party_of(sp, i, id, out);
}

uint32_t sab_space_parties(sab_space_t *sp, sab_space_party_t *out, uint32_t max) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < NSLOTS && n < max; i++) n += party_of(sp, i, 0, &out[n]);
  return n;
}

/* An entry as it reads, each word once; 0 for an empty or free one. */
static int read_entry(const sab_space_t *sp, uint32_t i, sab_space_object_t *o) {
  sab__dirent_t *e = sab__dirent(sp, i);
  uint32_t st = sab__ld(&e->state);
  if (st == DIR_EMPTY || st == DIR_FREE) return 0;
  memset(o, 0, sizeof *o);
  o->index = i;
  o->state = st;
  if (st != DIR_CREATING && st != DIR_READY && st != DIR_RETIRED) o->bad |= SAB_INSPECT_BAD_STATE;
  o->kind = sab__ld(&e->kind);
  uint32_t off = sab__ld(&e->off), bytes = sab__ld(&e->bytes);
  if (off >= sp->heap_off && off <= sp->size && bytes <= sp->size - off) {
    o->off = off;
    o->bytes = bytes;
  } else {
    o->bad |= SAB_INSPECT_BAD_PLACE;
  }
  for (int k = 0; k < SAB_SPACE_NPARAMS; k++) o->params[k] = sab__ld(&e->params[k]);
  uint32_t keylen = sab__ld(&e->keylen);
  if (keylen >= 1 && keylen <= SAB_SPACE_KEY_MAX) {
    /* Byte by byte, each once: the copy is what the caller reads. */
    for (uint32_t k = 0; k < keylen; k++) {
      o->key[k] = __atomic_load_n(&e->key[k], __ATOMIC_RELAXED);
      if (o->key[k] == '\0') o->bad |= SAB_INSPECT_BAD_KEY;
    }
    o->keylen = (o->bad & SAB_INSPECT_BAD_KEY) ? 0 : keylen;
  } else {
    o->bad |= SAB_INSPECT_BAD_KEY;
  }
  return 1;
}

uint32_t sab_space_objects(sab_space_t *sp, sab_space_object_t *out, uint32_t max,
                           sab_space_summary_t *sum) {
  uint32_t *h = sab__hdr(sp);
  memset(sum, 0, sizeof *sum);
  sum->size = sp->size;
  sum->heap_off = sp->heap_off;
  sum->heap_bytes = sp->heap_bytes;
  uint32_t used = sab__ld(&h[HDR_HEAP_USED]), count = sab__ld(&h[HDR_DIR_COUNT]);
  sum->heap_used = used <= sp->heap_bytes ? used : sp->heap_bytes;
  sum->dir_count = count <= NDIR ? count : NDIR;
  sum->epoch = sab__epoch_now(sp);
  uint32_t n = 0;
  for (uint32_t i = 0; i < sum->dir_count && n < max; i++) n += read_entry(sp, i, &out[n]);
  /* One pass over the records: each queued one counts for the object
   * whose bytes hold its cell. Objects do not overlap in the heap unless
   * the directory was scribbled; then the first that holds it counts it. */
  for (uint32_t r = 1; r <= NRECORDS; r++) {
    sab__record_t *rec = sab__record(sp, r);
    uint32_t owner = sab__ld(&rec->owner);
    if (owner == 0) continue;
    sum->records_used++;
    uint32_t state = sab__ld(&rec->state);
    if (state != SAB_W_WAITING && state != SAB_W_PARKED) continue;
    uint32_t cell = sab__ld(&rec->key) & ~1u;
    uint32_t k = 0;
    while (k < n && !(out[k].bytes != 0 && cell >= out[k].off && cell - out[k].off < out[k].bytes))
      k++;
    if (k == n) {
      sum->queued_elsewhere++;
      continue;
    }
    sab_space_object_t *o = &out[k];
    if (o->nwaiter_ids < sizeof o->waiter_ids / sizeof o->waiter_ids[0]) {
      o->waiter_ids[o->nwaiter_ids++] = owner;
    }
    o->waiting++;
  }
  return n;
}
