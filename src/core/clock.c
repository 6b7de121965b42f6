/*
 * The core's clock: CLOCK_MONOTONIC in nanoseconds (process.hrtime's clock,
 * which the deadlines of JS callers are measured on too). On Windows that
 * clock is libuv's uv_hrtime (QueryPerformanceCounter), which Node exports.
 */
#include "internal.h"

#ifdef _WIN32

#include <uv.h>

uint64_t sab_now(void) { return uv_hrtime(); }

#else

#include <time.h>

uint64_t sab_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
