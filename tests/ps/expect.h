/*
 * The parameter-server tests' check: a failed condition prints
 * "FAIL [rank R ]FILE:LINE: message" and counts it in `failures`, which the
 * including file defines (static int failures;), as it defines EXPECT_RANK
 * (its rank variable) before this header in a multi-rank test.
 */
#ifndef GS_TESTS_PS_EXPECT_H
#define GS_TESTS_PS_EXPECT_H

#include <stdio.h>

#ifdef EXPECT_RANK
#define EXPECT_WHERE() printf("FAIL rank %d %s:%d: ", EXPECT_RANK, __FILE__, __LINE__)
#else
#define EXPECT_WHERE() printf("FAIL %s:%d: ", __FILE__, __LINE__)
#endif

#define EXPECT(cond, ...)      \
  do {                         \
    if (!(cond)) {             \
      EXPECT_WHERE();          \
      printf(__VA_ARGS__);     \
      printf("\n");            \
      fflush(stdout);          \
      failures++;              \
    }                          \
  } while (0)

#endif /* GS_TESTS_PS_EXPECT_H */
