/*
 * What the core's C tests share: a CHECK that counts failures instead of
 * aborting (so one run reports them all; it survives NDEBUG), a millisecond
 * sleep, and the final report that .ci/run counts.
 */
#ifndef SAB_TEST_CHECK_H
#define SAB_TEST_CHECK_H

#include <stdio.h>
#include <time.h>

static int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define MS 1000000ull /* nanoseconds */

static inline void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The exit status of a test program named `name`. */
static int report(const char *name) {
  if (failures != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif /* SAB_TEST_CHECK_H */
