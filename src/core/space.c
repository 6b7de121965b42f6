/*
 * A named space of shared memory: the file, the mapping, the header and the
 * directory of named objects. (Queues: space_lot.c; owners: lifeline.c.)
 *
 * Opening. The file is /dev/shm/sabsync.NAME, opened with O_NOFOLLOW and
 * created with the caller's mode (then fchmod'ed to exactly that mode, so
 * the umask does not widen or narrow it). Every opener holds an exclusive
 * flock on it while it looks at the header; one that finds the file empty,
 * or its header not marked ready, initialises it. A process that dies while
 * initialising drops its flock with its descriptors, so the next opener
 * finds `ready` still 0 and starts again: no crash leaves a half-made space
 * that later openers believe.
 *
 * One mapping per name per process: a process-local registry (a list under
 * `registry_mu`) counts the references to each mapping (opens, JS buffers,
 * pending waits, a held directory lock) and unmaps at the last. A mapping
 * must outlive every robust mutex of it that a thread of this process
 * holds: glibc links held robust mutexes into a per-thread list through the
 * mutexes themselves, and an unmapped one in that list would be followed
 * at the next unlock. The lifeline a registered thread holds and the
 * directory lock held across an object's initialisation each hold a
 * reference for that reason; bucket locks are never held across calls.
 *
 * Directory entries are written only under the directory lock, a robust
 * mutex in the header. A creator takes an entry (DIR_CREATING) and its heap
 * bytes and keeps the lock while its caller initialises the object, then
 * publishes it (DIR_READY). A creator that dies meanwhile leaves the lock to
 * the kernel; the next locker gets EOWNERDEAD, and the entry, still
 * CREATING, is handed to the next caller of that key to initialise again.
 * So two processes creating one key at the same moment meet under the lock,
 * and no reader ever sees an entry before its object is initialised.
 *
 * Shared words read here, and how each is checked:
 *
 *   word             read by          checked / used as
 *   magic, version   attach           == SPACE_MAGIC, SAB_SPACE_VERSION, else VERSION
 *   abi              attach           == this build's, else VERSION
 *   size             attach           == the file's size, else VERSION
 *   ready            attach           1: use it; 0 with magic 0 or SPACE_MAGIC: an
 *                                     initialisation never finished, redo it (flock
 *                                     held); anything else: VERSION
 *   heap_used        lookup           <= heap_bytes, else SAB_E_CORRUPT; an offset
 *   dir_count        lookup           <= NDIR, else SAB_E_CORRUPT; a loop bound
 *   entry.state      lookup           one of DIR_*; anything else: entry skipped
 *   entry.keylen     lookup           <= SAB_SPACE_KEY_MAX before the key is compared
 *   entry.off/bytes  lookup           inside the heap (64-aligned) before it is
 *                                     handed out, else SAB_E_CORRUPT
 *   entry.kind/params lookup          compared only
 */
#define _GNU_SOURCE
#include "space_internal.h"
#include "glibc_old.h"

#include <stdio.h>
#include <string.h>

#if defined(__linux__)

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ABI_WORD ((uint32_t)sizeof(pthread_mutex_t) | (uint32_t)sizeof(void *) << 8)

_Static_assert(sizeof(sab__slot_t) <= SLOT_BYTES, "slot layout");
_Static_assert(sizeof(sab__sbucket_t) <= BUCKET_BYTES, "bucket layout");
_Static_assert(sizeof(sab__record_t) == RECORD_BYTES, "record layout");
_Static_assert(sizeof(sab__dirent_t) == DIR_BYTES, "directory layout");
_Static_assert(HDR_DIR_LOCK + sizeof(pthread_mutex_t) <= HDR_BYTES, "header layout");

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static sab_space_t *registry;

/* ---- geometry ---- */

static uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) & ~(a - 1); }

/* The tables' places for a space of `size` bytes; 0, or -1 if too small. */
static int space_geometry(sab_space_t *sp, uint32_t size) {
  uint32_t at = HDR_BYTES;
  sp->size = size;
  sp->slots_off = at;
  at += NSLOTS * SLOT_BYTES;
  sp->buckets_off = at;
  at += NBUCKETS * BUCKET_BYTES;
  sp->records_off = at;
  at += NRECORDS * RECORD_BYTES;
  sp->dir_off = at;
  at += NDIR * DIR_BYTES;
  sp->pub_off = at;
  at += 64 + NBUCKETS * COUNT_STRIDE;
  sp->heap_off = align_up(at, 64);
  if (size < sp->heap_off + 4096) return -1;
  sp->heap_bytes = size - sp->heap_off;
  return 0;
}

/* ---- names ---- */

static int name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > SAB_SPACE_NAME_MAX) return 0;
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c == '/' || c < 0x20 || c == 0x7f) return 0;
  }
  return 1;
}

static void path_of(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "/dev/shm/sabsync.%s", name);
}

/* ---- initialisation and checks (flock held) ---- */

static int init_space(sab_space_t *sp) {
  uint32_t *h = sab__hdr(sp);
  memset(sp->base, 0, sp->size);
  h[HDR_VERSION] = SAB_SPACE_VERSION;
  h[HDR_ABI] = ABI_WORD;
  h[HDR_SIZE] = sp->size;
  if (sab__robust_init(sab__dir_lock(sp)) != 0) return SAB_E_SPACE_SYS;
  for (uint32_t i = 0; i < NSLOTS; i++) {
    if (sab__robust_init(&sab__slot(sp, i)->lifeline) != 0) return SAB_E_SPACE_SYS;
  }
  sab__space_lot_init(sp);
  h[HDR_MAGIC] = SPACE_MAGIC;
  /* Last: an opener that sees ready sees everything above. */
  __atomic_store_n(&h[HDR_READY], 1, __ATOMIC_RELEASE);
  return 0;
}

static int check_space(sab_space_t *sp) {
  uint32_t *h = sab__hdr(sp);
  if (sab__ld(&h[HDR_MAGIC]) != SPACE_MAGIC || sab__ld(&h[HDR_VERSION]) != SAB_SPACE_VERSION ||
      sab__ld(&h[HDR_ABI]) != ABI_WORD || sab__ld(&h[HDR_SIZE]) != sp->size) {
    return SAB_E_SPACE_VERSION;
  }
  return 0;
}

/* Open or create the file and map it; the registry lock is held. */
static int map_space(const char *name, uint32_t size, unsigned mode, sab_space_t *sp,
                     int *created) {
  char path[sizeof "/dev/shm/sabsync." + SAB_SPACE_NAME_MAX];
  int fd, made = 0, r;
  off_t bytes;
  path_of(name, path, sizeof path);
  for (int tries = 0;; tries++) {
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 0777);
    if (fd >= 0) {
      if (fchmod(fd, mode & 0777) != 0) goto sys;
      break;
    }
    if (errno != EEXIST) return SAB_E_SPACE_SYS;
    fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) break;
    /* Unlinked between the two opens: try again, a few times. */
    if (errno != ENOENT || tries == 8) return SAB_E_SPACE_SYS;
  }
  /* The size by lseek rather than fstat, which glibc 2.33 versioned anew
   * (glibc_old.h). Not a regular file (a pipe): not a space. */
  if (flock(fd, LOCK_EX) != 0) goto sys;
  bytes = lseek(fd, 0, SEEK_END);
  if (bytes < 0) {
    r = SAB_E_SPACE_VERSION;
    goto fail;
  }
  if (bytes == 0) {
    /* New, or its creator died before it sized it: ours to make. */
    uint32_t want = size == 0 ? SAB_SPACE_DEFAULT_SIZE : size;
    if (space_geometry(sp, want) != 0) {
      r = SAB_E_SPACE_SIZE;
      goto fail;
    }
    if (ftruncate(fd, want) != 0) goto sys;
    made = 1;
  } else {
    if (bytes > SAB_SPACE_MAX_SIZE || space_geometry(sp, (uint32_t)bytes) != 0) {
      r = SAB_E_SPACE_VERSION;
      goto fail;
    }
    if (size != 0 && size != sp->size) {
      r = SAB_E_SPACE_SIZE;
      goto fail;
    }
  }
  sp->base = mmap(NULL, sp->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (sp->base == MAP_FAILED) {
    sp->base = NULL;
    goto sys;
  }
  uint32_t ready = __atomic_load_n(&sab__hdr(sp)[HDR_READY], __ATOMIC_ACQUIRE);
  uint32_t magic = __atomic_load_n(&sab__hdr(sp)[HDR_MAGIC], __ATOMIC_RELAXED);
  if (ready == 0 && (magic == 0 || magic == SPACE_MAGIC)) {
    /* New (zero-filled), or its initialiser died half-way: init_space zeroes
     * everything and stores the magic before `ready`. Anything else is not
     * ours to overwrite. */
    r = init_space(sp);
    made = 1;
  } else {
    r = ready == 1 ? check_space(sp) : SAB_E_SPACE_VERSION;
  }
  if (r != 0) {
    munmap(sp->base, sp->size);
    sp->base = NULL;
    goto fail;
  }
  /* Unlock explicitly: the mapping keeps the open file description (and
   * with it the flock) alive after close. */
  flock(fd, LOCK_UN);
  close(fd);
  *created = made;
  return 0;
sys:
  r = SAB_E_SPACE_SYS;
fail : {
  int e = errno;
  flock(fd, LOCK_UN);
  close(fd);
  errno = e;
}
  return r;
}

int sab_space_open(const char *name, uint32_t size, unsigned mode, sab_space_t **out,
                   int *created) {
  int r;
  *created = 0;
  if (!name_ok(name)) return SAB_E_SPACE_NAME;
  if (size != 0 && (size < SAB_SPACE_MIN_SIZE || size > SAB_SPACE_MAX_SIZE)) {
    return SAB_E_SPACE_SIZE;
  }
  if (size != 0) size = align_up(size, 4096);
  if (pthread_mutex_lock(&registry_mu) != 0) abort();
  for (sab_space_t *s = registry; s != NULL; s = s->next) {
    if (strcmp(s->name, name) == 0) {
      r = size != 0 && size != s->size ? SAB_E_SPACE_SIZE : 0;
      if (r == 0) {
        s->refs++;
        *out = s;
      }
      pthread_mutex_unlock(&registry_mu);
      return r;
    }
  }
  sab_space_t *sp = calloc(1, sizeof *sp);
  if (sp == NULL) {
    pthread_mutex_unlock(&registry_mu);
    errno = ENOMEM;
    return SAB_E_SPACE_SYS;
  }
  r = map_space(name, size, mode, sp, created);
  if (r != 0) {
    int e = errno;
    free(sp);
    pthread_mutex_unlock(&registry_mu);
    errno = e;
    return r;
  }
  memcpy(sp->name, name, strlen(name) + 1);
  sp->refs = 1;
  sp->next = registry;
  registry = sp;
  *out = sp;
  pthread_mutex_unlock(&registry_mu);
  return 0;
}

void sab_space_ref(sab_space_t *sp) {
  if (pthread_mutex_lock(&registry_mu) != 0) abort();
  sp->refs++;
  pthread_mutex_unlock(&registry_mu);
}

void sab_space_close(sab_space_t *sp) {
  if (pthread_mutex_lock(&registry_mu) != 0) abort();
  if (--sp->refs > 0) {
    pthread_mutex_unlock(&registry_mu);
    return;
  }
  for (sab_space_t **p = &registry; *p != NULL; p = &(*p)->next) {
    if (*p == sp) {
      *p = sp->next;
      break;
    }
  }
  pthread_mutex_unlock(&registry_mu);
  munmap(sp->base, sp->size);
  free(sp);
}

int sab_space_unlink(const char *name) {
  char path[sizeof "/dev/shm/sabsync." + SAB_SPACE_NAME_MAX];
  if (!name_ok(name)) return SAB_E_SPACE_NAME;
  path_of(name, path, sizeof path);
  return unlink(path) == 0 ? 0 : SAB_E_SPACE_SYS;
}

void sab_space_info(const sab_space_t *sp, sab_space_info_t *info) {
  info->base = sp->base;
  info->size = sp->size;
  info->pub_off = sp->pub_off;
  info->heap_off = sp->heap_off;
  info->epoch_off = sp->pub_off;
  info->counts_off = sp->pub_off + 64;
  info->count_stride = COUNT_STRIDE;
  info->bucket_bits = BUCKET_BITS;
  info->nslots = NSLOTS;
}

uint32_t sab_space_epoch(const sab_space_t *sp) { return sab__epoch_now(sp); }

/* ---- the directory ---- */

static uint32_t hash_key(const char *key, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)key[i]) * 16777619u;
  return h;
}

static int same_params(const sab__dirent_t *e, uint32_t kind, const uint32_t *params,
                       uint32_t bytes) {
  if (sab__ld(&e->kind) != kind || sab__ld(&e->bytes) != bytes) return 0;
  for (int i = 0; i < SAB_SPACE_NPARAMS; i++) {
    if (sab__ld(&e->params[i]) != params[i]) return 0;
  }
  return 1;
}

/* An entry's object, checked to lie in the heap: its offset, or 0. */
static uint32_t entry_off(const sab_space_t *sp, const sab__dirent_t *e, uint32_t bytes) {
  uint32_t off = sab__ld(&e->off);
  if (off < sp->heap_off || off % 64 != 0 || off > sp->size || sp->size - off < bytes) return 0;
  return off;
}

static int key_matches(const sab__dirent_t *e, const char *key, size_t n, uint32_t hash) {
  if (sab__ld(&e->hash) != hash) return 0;
  uint32_t len = sab__ld(&e->keylen);
  if (len != n) return 0;
  char copy[SAB_SPACE_KEY_MAX];
  memcpy(copy, e->key, n); /* n <= SAB_SPACE_KEY_MAX: checked by lookup */
  return memcmp(copy, key, n) == 0;
}

static int dir_lock(sab_space_t *sp) {
  return sab__robust_lock(sab__dir_lock(sp)) < 0 ? SAB_E_CORRUPT : 0;
}

static void dir_unlock(sab_space_t *sp) { pthread_mutex_unlock(sab__dir_lock(sp)); }

/* Under the directory lock: the entry of `key`, or NULL (*count gets the
 * checked number of entries). */
static sab__dirent_t *dir_find(sab_space_t *sp, const char *key, size_t n, uint32_t hash,
                               uint32_t *count, int *corrupt) {
  uint32_t c = sab__ld(&sab__hdr(sp)[HDR_DIR_COUNT]);
  *corrupt = 0;
  if (c > NDIR) {
    *corrupt = 1;
    return NULL;
  }
  *count = c;
  for (uint32_t i = 0; i < c; i++) {
    sab__dirent_t *e = sab__dirent(sp, i);
    uint32_t st = sab__ld(&e->state);
    if ((st == DIR_CREATING || st == DIR_READY) && key_matches(e, key, n, hash)) return e;
  }
  return NULL;
}

int sab_space_lookup(sab_space_t *sp, const char *key, size_t keylen, uint32_t kind,
                     const uint32_t params[SAB_SPACE_NPARAMS], uint32_t bytes, uint32_t *off) {
  uint32_t hash, count, o;
  int corrupt;
  if (keylen == 0 || keylen > SAB_SPACE_KEY_MAX) return SAB_E_SPACE_KEY;
  hash = hash_key(key, keylen);
  if (bytes == 0 || bytes > sp->heap_bytes) return SAB_E_SPACE_FULL;
  if (dir_lock(sp) != 0) return SAB_E_CORRUPT;
  sab__dirent_t *e = dir_find(sp, key, keylen, hash, &count, &corrupt);
  if (corrupt) {
    dir_unlock(sp);
    return SAB_E_CORRUPT;
  }
  if (e != NULL) {
    if (!same_params(e, kind, params, bytes)) {
      dir_unlock(sp);
      return SAB_E_SPACE_MISMATCH;
    }
    o = entry_off(sp, e, bytes);
    if (o == 0) {
      dir_unlock(sp);
      return SAB_E_CORRUPT;
    }
    *off = o;
    if (sab__ld(&e->state) == DIR_READY) {
      dir_unlock(sp);
      return SAB_SPACE_ATTACH;
    }
    /* CREATING under our lock: its creator died or gave up. Ours to make,
     * from zeroed memory as a new one would be. */
    memset(sp->base + o, 0, bytes);
    sab_space_ref(sp); /* the held lock pins the mapping (see above) */
    return SAB_SPACE_CREATE;
  }
  uint32_t used = sab__ld(&sab__hdr(sp)[HDR_HEAP_USED]);
  if (used > sp->heap_bytes) {
    dir_unlock(sp);
    return SAB_E_CORRUPT;
  }
  uint32_t need = align_up(bytes, 64);
  if (count == NDIR || need > sp->heap_bytes - used) {
    dir_unlock(sp);
    return SAB_E_SPACE_FULL;
  }
  o = sp->heap_off + used;
  e = sab__dirent(sp, count);
  memset(sp->base + o, 0, need); /* zero, whatever a scribbler left there */
  sab__st(&e->state, DIR_CREATING);
  sab__st(&e->kind, kind);
  sab__st(&e->off, o);
  sab__st(&e->bytes, bytes);
  for (int i = 0; i < SAB_SPACE_NPARAMS; i++) sab__st(&e->params[i], params[i]);
  memcpy(e->key, key, keylen);
  sab__st(&e->keylen, (uint32_t)keylen);
  sab__st(&e->hash, hash);
  /* Entry first, then the counts that make it reachable: a holder that dies
   * in between leaves an unreachable entry, never a half-written one. */
  sab__st(&sab__hdr(sp)[HDR_HEAP_USED], used + need);
  sab__st(&sab__hdr(sp)[HDR_DIR_COUNT], count + 1);
  *off = o;
  sab_space_ref(sp);
  return SAB_SPACE_CREATE;
}

void sab_space_publish(sab_space_t *sp, uint32_t off) {
  uint32_t count = sab__ld(&sab__hdr(sp)[HDR_DIR_COUNT]);
  if (count > NDIR) count = NDIR;
  for (uint32_t i = 0; i < count; i++) {
    sab__dirent_t *e = sab__dirent(sp, i);
    if (sab__ld(&e->off) == off && sab__ld(&e->state) == DIR_CREATING) {
      sab__st(&e->state, DIR_READY);
      break;
    }
  }
  dir_unlock(sp);
  sab_space_close(sp);
}

void sab_space_abandon(sab_space_t *sp) {
  dir_unlock(sp);
  sab_space_close(sp);
}

#endif /* __linux__ */
