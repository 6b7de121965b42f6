/*
 * A named space of shared memory: the file, the mapping, the header and the
 * directory of named objects. (Queues: space_lot.c; owners: lifeline.c.)
 *
 * Opening. The file is /dev/shm/sabsync.NAME, and /dev/shm is writable by
 * every user, so a file found at a name is somebody's claim, not ours:
 *
 *  - A space is made whole before it has a name: an unnamed file
 *    (O_TMPFILE in /dev/shm; where the kernel lacks it, a random name made
 *    with O_EXCL) is sized, mapped and initialised, then linked to the
 *    name, which fails if the name exists. So a file at the name was
 *    complete when it got it, a creator that dies leaves no half-made
 *    space, and of racing creators exactly one names its file (the others
 *    attach to it).
 *  - Attaching never initialises anything. The file is opened with
 *    O_NOFOLLOW and must be a regular file this user owns, or, where the
 *    mode asked gives the group or others access, one no wider than that
 *    mode (a squatter's file is neither); then its header must be a space
 *    of this layout, else SAB_E_SPACE_VERSION: a zeroed or foreign header
 *    is reported, never made anew under the processes that use it.
 *
 * One mapping per name per process: a process-local registry (a list under
 * `registry_mu`) counts the references to each mapping (opens, JS buffers,
 * pending waits, a held directory lock) and unmaps at the last. The
 * mapping's open file description stays open as long (sp->fd): it holds
 * the lifeline of the process's lock id, and threads open theirs from it
 * (lifeline.c).
 *
 * Directory entries are written only under the directory lock, a
 * bookkeeping lock word in the header (space_sys.c) held by the caller's
 * owner id. A creator takes an entry (DIR_CREATING) and its heap bytes and
 * keeps the lock while its caller initialises the object, then publishes
 * it (DIR_READY). A creator that dies meanwhile (its thread, or its
 * process) leaves its id dead; the next locker takes the lock over, and
 * the entry, still CREATING, is handed to the next caller of that key to
 * initialise again. So two processes creating one key at the same moment
 * meet under the lock, and no reader ever sees an entry before its object
 * is initialised.
 *
 * Shared words read here, and how each is checked:
 *
 *   word             read by          checked / used as
 *   magic, version   attach           == SPACE_MAGIC, SAB_SPACE_VERSION, else VERSION
 *   abi, size, ready attach           == this build's, the file's size, 1, else VERSION
 *   heap_used        lookup           <= heap_bytes and 64-aligned, else SAB_E_CORRUPT;
 *                                     an offset
 *   dir_count        lookup           <= NDIR, else SAB_E_CORRUPT; a loop bound
 *   entry.state      lookup           one of DIR_*; anything else: entry skipped
 *   entry.keylen     lookup           <= SAB_SPACE_KEY_MAX before the key is compared
 *   entry.off/bytes  lookup           inside the heap (64-aligned) before it is
 *                                     handed out, else SAB_E_CORRUPT
 *   entry.kind/params lookup          compared only
 */
#define _GNU_SOURCE
#include "space_lock.h"
#include "glibc_old.h"

#include <stdio.h>
#include <string.h>

#if defined(__linux__)

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_TMPFILE
#define O_TMPFILE (020000000 | O_DIRECTORY)
#endif

#define ABI_WORD ((uint32_t)sizeof(void *))

_Static_assert(sizeof(sab__slot_t) <= SLOT_BYTES, "slot layout");
_Static_assert(sizeof(sab__sbucket_t) <= BUCKET_BYTES, "bucket layout");
_Static_assert(sizeof(sab__record_t) == RECORD_BYTES, "record layout");
_Static_assert(sizeof(sab__dirent_t) == DIR_BYTES, "directory layout");
_Static_assert(HDR_DIR_LOCK * 4 + 4 <= HDR_BYTES, "header layout");

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
  sp->users_off = at;
  at += NDIR * USERS_BYTES;
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

/* ---- making and attaching ---- */

static void init_space(sab_space_t *sp) {
  uint32_t *h = sab__hdr(sp);
  /* The file is new and unnamed: nobody else sees it yet. */
  h[HDR_VERSION] = SAB_SPACE_VERSION;
  h[HDR_ABI] = ABI_WORD;
  h[HDR_SIZE] = sp->size;
  h[HDR_MAGIC] = SPACE_MAGIC;
  h[HDR_READY] = 1;
}

static int check_space(sab_space_t *sp) {
  uint32_t *h = sab__hdr(sp);
  if (sab__ld(&h[HDR_MAGIC]) != SPACE_MAGIC || sab__ld(&h[HDR_VERSION]) != SAB_SPACE_VERSION ||
      sab__ld(&h[HDR_ABI]) != ABI_WORD || sab__ld(&h[HDR_SIZE]) != sp->size ||
      sab__ld(&h[HDR_READY]) != 1) {
    return SAB_E_SPACE_VERSION;
  }
  return 0;
}

/* Whether the file at the name may be attached for a caller asking `mode`. */
static int trusted(const struct stat *st, unsigned mode) {
  if (!S_ISREG(st->st_mode)) return 0;
  if (st->st_uid == geteuid()) return 1;
  return (mode & 077) != 0 && (st->st_mode & 0777 & ~(mode & 0777)) == 0;
}

static int map_fd(sab_space_t *sp, int fd) {
  sp->base = mmap(NULL, sp->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (sp->base == MAP_FAILED) {
    sp->base = NULL;
    return SAB_E_SPACE_SYS;
  }
  return 0;
}

/* Attach to the file at `path`: 0, 1 if there is none, or an error. */
static int attach(const char *path, uint32_t size, unsigned mode, sab_space_t *sp) {
  struct stat st;
  int r, fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? 1 : errno == ELOOP ? SAB_E_SPACE_FOREIGN : SAB_E_SPACE_SYS;
  if (sab__fstat(fd, &st) != 0) {
    r = SAB_E_SPACE_SYS;
  } else if (!trusted(&st, mode)) {
    r = SAB_E_SPACE_FOREIGN;
  } else if (st.st_size <= 0 || st.st_size > SAB_SPACE_MAX_SIZE ||
             space_geometry(sp, (uint32_t)st.st_size) != 0) {
    r = SAB_E_SPACE_VERSION;
  } else if (size != 0 && size != sp->size) {
    r = SAB_E_SPACE_SIZE;
  } else {
    r = map_fd(sp, fd);
    if (r == 0 && (r = check_space(sp)) != 0) {
      munmap(sp->base, sp->size);
      sp->base = NULL;
    }
  }
  if (r != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return r;
  }
  sp->fd = fd;
  return 0;
}

/* An unnamed file in /dev/shm of the exact mode (fchmod: the umask neither
 * widens nor narrows it); *tmp gets the name it has where the kernel has
 * no O_TMPFILE (empty otherwise). */
static int unnamed_file(unsigned mode, char *tmp, size_t cap) {
  tmp[0] = 0;
  int fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, mode & 0777);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    for (int tries = 0; tries < 16 && fd < 0; tries++) {
      uint64_t salt =
          sab_now() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)tries * 0x9E3779B97F4A7C15ull;
      snprintf(tmp, cap, "/dev/shm/.sabsync-new.%d.%016llx", (int)getpid(),
               (unsigned long long)salt);
      fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 0777);
      if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) tmp[0] = 0;
  }
  if (fd >= 0 && fchmod(fd, mode & 0777) != 0) {
    int e = errno;
    close(fd);
    if (tmp[0]) unlink(tmp);
    errno = e;
    return -1;
  }
  return fd;
}

/* Make a space and name it `path`: 0, 1 if the name was taken meanwhile,
 * or an error. */
static int create(const char *path, uint32_t size, unsigned mode, sab_space_t *sp) {
  char tmp[64], self[32];
  int r, fd;
  if (space_geometry(sp, size == 0 ? SAB_SPACE_DEFAULT_SIZE : size) != 0) return SAB_E_SPACE_SIZE;
  fd = unnamed_file(mode, tmp, sizeof tmp);
  if (fd < 0) return SAB_E_SPACE_SYS;
  r = ftruncate(fd, sp->size) == 0 ? map_fd(sp, fd) : SAB_E_SPACE_SYS;
  if (r == 0) {
    init_space(sp);
    if (tmp[0]) {
      r = link(tmp, path);
    } else {
      snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
      r = linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
    }
    r = r == 0 ? 0 : errno == EEXIST ? 1 : SAB_E_SPACE_SYS;
    if (r != 0) {
      munmap(sp->base, sp->size);
      sp->base = NULL;
    }
  }
  int e = errno;
  if (tmp[0]) unlink(tmp);
  if (r != 0) {
    close(fd);
    errno = e;
    return r;
  }
  sp->fd = fd;
  return 0;
}

/* The process's own descriptions and lock id (lifeline.c). */
static int take_lock_id(sab_space_t *sp) {
  char self[32];
  snprintf(self, sizeof self, "/proc/self/fd/%d", sp->fd);
  sp->probe_fd = open(self, O_RDWR | O_CLOEXEC);
  if (sp->probe_fd < 0) return SAB_E_SPACE_SYS;
  int r = sab__slot_claim_fd(sp, sp->fd, &sp->lock_id, NULL);
  if (r != 0) {
    close(sp->probe_fd);
    sp->probe_fd = -1;
  }
  return r;
}

static void unmap_space(sab_space_t *sp) {
  if (sp->lock_id != 0) sab__slot_free_quietly(sp, sp->lock_id);
  munmap(sp->base, sp->size);
  if (sp->probe_fd >= 0) close(sp->probe_fd);
  close(sp->fd);
}

/* A forked child inherits the parent's descriptions, and with them the
 * parent's lifelines: its own lock id, and any thread's slot, must come
 * from descriptions of its own, or a child killed inside a bucket lock
 * would leave it naming its parent, alive. Only async-signal-safe calls
 * here (the parent may have had other threads). */
static void atfork_prepare(void) {
  if (pthread_mutex_lock(&registry_mu) != 0) abort();
}

static void atfork_parent(void) { pthread_mutex_unlock(&registry_mu); }

static void atfork_child(void) {
  for (sab_space_t *sp = registry; sp != NULL; sp = sp->next) {
    for (uint32_t i = 0; i < NSLOTS; i++) {
      int fd = sp->slot_fd[i];
      sp->slot_fd[i] = -1;
      if (fd >= 0 && fd != sp->fd) close(fd);
    }
    sp->lock_id = 0;  /* the child's own at its first lock (lifeline.c) */
    sp->watch = NULL; /* its thread is the parent's */
    sp->watch_users = 0;
  }
  pthread_mutex_unlock(&registry_mu);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

/* Open the file at the name, or make it; the registry lock is held. */
static int map_space(const char *name, uint32_t size, unsigned mode, sab_space_t *sp,
                     int *created) {
  char path[sizeof "/dev/shm/sabsync." + SAB_SPACE_NAME_MAX];
  path_of(name, path, sizeof path);
  for (uint32_t i = 0; i < NSLOTS; i++) sp->slot_fd[i] = -1;
  sp->probe_fd = -1;
  for (int tries = 0; tries < 8; tries++) {
    int r = attach(path, size, mode, sp);
    if (r == 1) {
      r = create(path, size, mode, sp);
      if (r == 0) *created = 1;
    }
    if (r == 1) continue; /* created (or unlinked) by another meanwhile */
    if (r == 0 && (r = take_lock_id(sp)) != 0) {
      int e = errno;
      munmap(sp->base, sp->size);
      close(sp->fd);
      errno = e;
    }
    return r;
  }
  errno = EAGAIN;
  return SAB_E_SPACE_SYS;
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
  pthread_once(&atfork_once, atfork_register);
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
  unmap_space(sp);
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

static int dir_lock(sab_space_t *sp, uint32_t id) {
  return sab__slock(sp, sab__dir_lock(sp), id) < 0 ? SAB_E_SPACE_BUSY : 0;
}

static void dir_unlock(sab_space_t *sp) { sab__sunlock(sab__dir_lock(sp)); }

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
    if ((st == DIR_CREATING || st == DIR_READY || st == DIR_RETIRED) &&
        key_matches(e, key, n, hash))
      return e;
  }
  return NULL;
}

static uint32_t dir_index(const sab_space_t *sp, const sab__dirent_t *e) {
  return (uint32_t)(((const char *)e - (sp->base + sp->dir_off)) / DIR_BYTES);
}

/* The caller's slot uses entry e (see sab_space_retire in the header). */
static void mark_user(sab_space_t *sp, const sab__dirent_t *e, uint32_t id) {
  uint32_t s = id & (NSLOTS - 1);
  __atomic_fetch_or(&sab__users(sp, dir_index(sp, e))[s / 32], 1u << (s % 32), __ATOMIC_SEQ_CST);
}

/* Under the directory lock: whether a live thread uses entry i. Each users word is read once; a bit
 * set for a slot whose tenant lives counts, whoever that tenant is (a tenant clears its bit when it
 * registers, so a bit is never a later tenant's unless it looked the entry up). A co-tenant that
 * clears bits can get an object reclaimed under its users: that breaks the space's semantics, never
 * its bounds (a reclaimed object's bytes stay in the heap). */
static int entry_used(sab_space_t *sp, uint32_t i, unsigned *budget) {
  uint32_t *u = sab__users(sp, i);
  for (uint32_t w = 0; w < NSLOTS / 32; w++) {
    uint32_t bits = __atomic_load_n(&u[w], __ATOMIC_SEQ_CST);
    while (bits != 0) {
      uint32_t b = (uint32_t)__builtin_ctz(bits);
      bits &= bits - 1;
      uint32_t slot = w * 32 + b;
      uint32_t live = sab__slot_live_id(sp, slot);
      if (live == 0) continue;
      if (*budget == 0) return 1; /* this call's probes are spent: the next call goes on */
      --*budget;
      /* -1: dead and not yet buried; what it left in queues is found by
       * records_in, and its id in the object's words goes with the object. */
      if (sab__slot_alive(sp, live) == 1) return 1;
    }
  }
  return 0;
}

/* Whether a taken waiter record lies in [off, off + bytes): its waiter
 * (live, or dead and not yet buried) still names the object. Each record's
 * words are read once. */
static int records_in(sab_space_t *sp, uint32_t off, uint32_t bytes) {
  for (uint32_t i = 1; i <= NRECORDS; i++) {
    sab__record_t *r = sab__record(sp, i);
    if (sab__ld(&r->owner) == 0) continue;
    uint32_t k = sab__ld(&r->key) & ~1u;
    if (k >= off && k - off < bytes) return 1;
  }
  return 0;
}

/* Under the directory lock: reclaim every retired entry that nobody uses.
 * Counts in *freed
 * those among them whose index `match` marks (may be NULL). */
/* Probes of live slots one sweep may make: forged users bits cannot make
 * a lookup hold the directory lock for long (each probe is a fcntl). */
#define SWEEP_PROBES 64u

static void sweep(sab_space_t *sp, uint32_t count, const uint8_t *match, uint32_t *freed) {
  unsigned budget = SWEEP_PROBES;
  for (uint32_t i = 0; i < count; i++) {
    sab__dirent_t *e = sab__dirent(sp, i);
    if (sab__ld(&e->state) != DIR_RETIRED) continue;
    uint32_t bytes = sab__ld(&e->bytes);
    uint32_t off = entry_off(sp, e, bytes);
    if (off == 0) continue; /* overwritten: never handed out again */
    if (entry_used(sp, i, &budget) || records_in(sp, off, bytes)) continue;
    uint32_t *u = sab__users(sp, i);
    for (uint32_t w = 0; w < NSLOTS / 32; w++) __atomic_store_n(&u[w], 0, __ATOMIC_SEQ_CST);
    sab__st(&e->keylen, 0);
    sab__st(&e->hash, 0);
    sab__st(&e->state, DIR_FREE);
    if (match != NULL && match[i] && freed != NULL) (*freed)++;
  }
}

int sab_space_lookup(sab_space_t *sp, uint32_t id, const char *key, size_t keylen, uint32_t kind,
                     const uint32_t params[SAB_SPACE_NPARAMS], uint32_t bytes, uint32_t *off) {
  uint32_t hash, count, o;
  int corrupt;
  if (keylen == 0 || keylen > SAB_SPACE_KEY_MAX) return SAB_E_SPACE_KEY;
  hash = hash_key(key, keylen);
  if (bytes == 0 || bytes > sp->heap_bytes) return SAB_E_SPACE_FULL;
  if (dir_lock(sp, id) != 0) return SAB_E_SPACE_BUSY;
  sab__dirent_t *e = dir_find(sp, key, keylen, hash, &count, &corrupt);
  if (corrupt) {
    dir_unlock(sp);
    return SAB_E_CORRUPT;
  }
  /* Retired objects whose last user has gone are reclaimed at the next
   * lookup in any process (the one found here, if retired, is not: its
   * caller is about to use it). */
  sweep(sp, count, NULL, NULL);
  if (e != NULL && sab__ld(&e->state) == DIR_FREE) e = NULL;
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
    uint32_t est = sab__ld(&e->state);
    mark_user(sp, e, id);
    if (est == DIR_READY || est == DIR_RETIRED) {
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
  /* Only this file's own sums are believed: every one a multiple of 64
   * (align_up below) within the heap. */
  if (used > sp->heap_bytes || used % 64 != 0) {
    dir_unlock(sp);
    return SAB_E_CORRUPT;
  }
  uint32_t need = align_up(bytes, 64);
  /* A reclaimed entry: the smallest hole that fits, else any (its bytes
   * stay a hole, the object goes at the heap's end). */
  sab__dirent_t *hole = NULL, *spare = NULL;
  uint32_t hole_bytes = 0, hole_off = 0;
  for (uint32_t i = 0; i < count; i++) {
    sab__dirent_t *f = sab__dirent(sp, i);
    if (sab__ld(&f->state) != DIR_FREE) continue;
    uint32_t fb = sab__ld(&f->cap); /* read once; believed only 64-aligned and inside the heap */
    uint32_t fo = fb % 64 == 0 ? entry_off(sp, f, fb) : 0;
    if (spare == NULL) spare = f;
    if (fo != 0 && fb != 0 && fb >= need && (hole == NULL || fb < hole_bytes)) {
      hole = f;
      hole_bytes = fb;
      hole_off = fo;
    }
  }
  uint32_t new_count = count;
  if (hole != NULL) {
    e = hole;
    o = hole_off;
    need = hole_bytes; /* the entry keeps the whole hole */
  } else if (need <= sp->heap_bytes - used && (spare != NULL || count < NDIR)) {
    e = spare != NULL ? spare : sab__dirent(sp, count);
    new_count = spare != NULL ? count : count + 1;
    o = sp->heap_off + used;
    used += need;
  } else {
    dir_unlock(sp);
    return SAB_E_SPACE_FULL;
  }
  memset(sp->base + o, 0, need); /* zero, whatever a scribbler or an old object left there */
  for (uint32_t w = 0; w < NSLOTS / 32; w++)
    __atomic_store_n(&sab__users(sp, dir_index(sp, e))[w], 0, __ATOMIC_SEQ_CST);
  sab__st(&e->state, DIR_CREATING);
  sab__st(&e->kind, kind);
  sab__st(&e->off, o);
  sab__st(&e->bytes, bytes);
  sab__st(&e->cap, need);
  for (int i = 0; i < SAB_SPACE_NPARAMS; i++) sab__st(&e->params[i], params[i]);
  memcpy(e->key, key, keylen);
  sab__st(&e->keylen, (uint32_t)keylen);
  sab__st(&e->hash, hash);
  mark_user(sp, e, id);
  /* Entry first, then the counts that make it reachable: a holder that dies
   * in between leaves an unreachable entry, never a half-written one. */
  sab__st(&sab__hdr(sp)[HDR_HEAP_USED], used);
  sab__st(&sab__hdr(sp)[HDR_DIR_COUNT], new_count);
  *off = o;
  sab_space_ref(sp);
  return SAB_SPACE_CREATE;
}

int sab_space_entry(sab_space_t *sp, uint32_t id, const char *key, size_t keylen,
                    sab_space_entry_t *out) {
  uint32_t hash, count;
  int corrupt;
  if (keylen == 0 || keylen > SAB_SPACE_KEY_MAX) return SAB_E_SPACE_KEY;
  hash = hash_key(key, keylen);
  if (dir_lock(sp, id) != 0) return SAB_E_SPACE_BUSY;
  sab__dirent_t *e = dir_find(sp, key, keylen, hash, &count, &corrupt);
  if (e != NULL) {
    out->kind = sab__ld(&e->kind);
    out->bytes = sab__ld(&e->bytes);
    for (int i = 0; i < SAB_SPACE_NPARAMS; i++) out->params[i] = sab__ld(&e->params[i]);
  }
  dir_unlock(sp);
  if (corrupt) return SAB_E_CORRUPT;
  return e != NULL ? 1 : 0;
}

/* Whether entry e is `key`, or with versions a version of it (`key`, then
 * U+0002, then anything). Its keylen is read once and checked. */
static int key_or_version(const sab__dirent_t *e, const char *key, size_t n, int versions) {
  uint32_t len = sab__ld(&e->keylen);
  char copy[SAB_SPACE_KEY_MAX];
  if (len == 0 || len > SAB_SPACE_KEY_MAX || len < n) return 0;
  if (len > n && !versions) return 0;
  memcpy(copy, e->key, len);
  if (memcmp(copy, key, n) != 0) return 0;
  return len == n || copy[n] == '\x02';
}

int sab_space_retire(sab_space_t *sp, uint32_t id, const char *key, size_t keylen, uint32_t flags,
                     uint32_t keep_off, uint32_t *freed) {
  uint32_t count;
  uint8_t match[NDIR];
  int matched = 0;
  *freed = 0;
  if (keylen == 0 || keylen > SAB_SPACE_KEY_MAX) return SAB_E_SPACE_KEY;
  if (dir_lock(sp, id) != 0) return SAB_E_SPACE_BUSY;
  count = sab__ld(&sab__hdr(sp)[HDR_DIR_COUNT]);
  if (count > NDIR) {
    dir_unlock(sp);
    return SAB_E_CORRUPT;
  }
  for (uint32_t i = 0; i < count; i++) {
    sab__dirent_t *e = sab__dirent(sp, i);
    uint32_t st = sab__ld(&e->state);
    match[i] = 0;
    if (st != DIR_READY && st != DIR_RETIRED) continue;
    if (!key_or_version(e, key, keylen, (flags & SAB_RETIRE_VERSIONS) != 0)) continue;
    if (keep_off != 0 && sab__ld(&e->off) == keep_off) continue;
    match[i] = 1;
    matched++;
    sab__st(&e->state, DIR_RETIRED);
    if (flags & SAB_RETIRE_SELF) {
      uint32_t s = id & (NSLOTS - 1);
      __atomic_fetch_and(&sab__users(sp, i)[s / 32], ~(1u << (s % 32)), __ATOMIC_SEQ_CST);
    }
  }
  sweep(sp, count, match, freed); /* the caller's bit went above where it asked */
  dir_unlock(sp);
  return matched;
}

void sab_space_usage(sab_space_t *sp, sab_space_usage_t *out) {
  uint32_t count = sab__ld(&sab__hdr(sp)[HDR_DIR_COUNT]);
  uint32_t used = sab__ld(&sab__hdr(sp)[HDR_HEAP_USED]);
  if (count > NDIR) count = NDIR;
  if (used > sp->heap_bytes) used = sp->heap_bytes;
  out->objects = 0;
  out->retired = 0;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t st = sab__ld(&sab__dirent(sp, i)->state);
    if (st == DIR_READY || st == DIR_CREATING) out->objects++;
    if (st == DIR_RETIRED) out->retired++;
  }
  out->objects_max = NDIR;
  out->heap_used = used;
  out->heap_bytes = sp->heap_bytes;
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
