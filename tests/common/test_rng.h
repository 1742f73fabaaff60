/*
 * The tests' random numbers: splitmix64 (Steele, Lea & Flood, OOPSLA 2014),
 * one stream per test program. Define TEST_RNG_SEED before including to
 * choose where it starts (default 1); the same seed gives the same inputs
 * on every machine.
 */
#ifndef GRADSYNC_TEST_RNG_H
#define GRADSYNC_TEST_RNG_H

#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 1
#endif

static uint64_t rng_state = TEST_RNG_SEED;

static inline uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1), 53 bits. */
static inline double unif(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

#endif /* GRADSYNC_TEST_RNG_H */
