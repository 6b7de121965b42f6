/*
 * The core's clock: CLOCK_MONOTONIC in nanoseconds (process.hrtime's clock,
 * which the deadlines of JS callers are measured on too).
 */
#include "internal.h"

#include <time.h>

uint64_t sab_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
