/*
 * The core reads each word of shared memory once (src/core/sema.c,
 * rate.c): a word changed right after the core read and checked it must
 * not reach an index. Built with SAB_FUZZ_READS, so that the hook below
 * runs after every read and plays the racing thread, deterministically:
 * it writes a hostile value into the word the core has just read. A second
 * read of that word (the bug of grant(), which once took the ring's slot
 * from a re-read) then sees it; since the holder words are taken by CAS
 * (sema.c), the CAS must see it too. Asserts here survive NDEBUG.
 */
#define _POSIX_C_SOURCE 200809L
#include "sabsync.h"
#include "check.h"

#include <string.h>

#define NR         4
#define SLOT_OF(t) ((t) & ~SAB_SEMA_RECOVERED)
static int64_t mem[64]; /* room for a semaphore of NR and guards after it */
static int32_t *const base = (int32_t *)&mem[0];
static size_t bytes;

/* Which word to scribble after its next read, and with what. */
static const int32_t *target;
static int32_t value;
static int armed, fired;

void sab__fuzz_after_read(const void *word) {
  if (armed && word == target) {
    __atomic_store_n((int32_t *)target, value, __ATOMIC_RELAXED);
    armed = 0;
    fired++;
  }
}

static void arm(const int32_t *word, int32_t v) {
  target = word;
  value = v;
  armed = 1;
}

static int guards_intact(void) {
  for (size_t i = bytes / 8; i < sizeof mem / sizeof mem[0]; i++)
    if (mem[i] != 0x5A5A5A5A5A5A5A5ALL) return 0;
  return 1;
}

int main(void) {
  static const int32_t bad[] = {NR, NR + 1, 0x7fffffff, -1, 0x100000};
  sab_sema_t s;
  bytes = sab_sema_bytes(NR);
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    /* The search's start (next) and then every holder word in turn, as
     * the first word a search reads. */
    for (uint32_t head = 0; head <= NR; head++) {
      for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) mem[i] = 0x5A5A5A5A5A5A5A5ALL;
      CHECK(sab_sema_init(&s, base, bytes, NR) == 0);
      uint32_t owner = sab_owner_new(), tok;
      for (uint32_t i = 0; i < head % NR; i++) { /* move next along */
        CHECK(sab_sema_try(&s, owner, &tok) == SAB_OK);
        CHECK(sab_sema_release(&s, owner, tok, NULL) == (int)tok);
      }
      fired = 0;
      arm(head == NR ? &base[3] : &base[8 + NR + head], bad[k]);
      tok = SAB_SEMA_NO_TOKEN;
      int r = sab_sema_try(&s, owner, &tok);
      armed = 0;
      CHECK(fired == 1);
      CHECK(r == SAB_OK || r == SAB_TIMED_OUT);
      if (r == SAB_OK) CHECK(SLOT_OF(tok) < NR);
      CHECK(guards_intact());
    }
  }
  /* The rate limiter's head and ring, the same way. */
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    sab_rate_t rl;
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++) mem[i] = 0x5A5A5A5A5A5A5A5ALL;
    bytes = sab_rate_bytes(NR);
    CHECK(sab_rate_init(&rl, base, bytes, NR, 1000, 0) == 0);
    uint64_t at, wait;
    fired = 0;
    arm(&base[3], bad[k]); /* head */
    int r = sab_rate_take(&rl, &at, &wait);
    armed = 0;
    CHECK(fired == 1 && (r == SAB_OK || r == SAB_PENDING));
    CHECK(guards_intact());
  }
  return report("test_reads");
}
