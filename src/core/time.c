/* The monotonic clock. */
#include <time.h>

#include "gs_internal.h"

uint64_t gs_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double gs_now(void) { return (double)gs_now_ns() * 1e-9; }
