/*
 * Multi-rank test cases: what every MPI test program of tests/ shares.
 *
 * A case is begun with begin_case(name), checked with CHECK / CHECK_ST /
 * fail (the first failure of a case prints one line "FAIL rank R case C:
 * ...", at most MRT_MAX_PRINTED lines per rank), and ended with end_case.
 * mrt_init sets up gradsync and g_comm on MPI_COMM_WORLD (aborting the job
 * if it cannot); mrt_finish sums the cases over every rank, rank 0 prints
 * "N passed, M failed", and returns the exit status (1 if any failed).
 * Link tests/common/mrt.c.
 */
#ifndef GRADSYNC_TEST_MRT_H
#define GRADSYNC_TEST_MRT_H

#include "gradsync.h"

#define MRT_MAX_PRINTED 60

extern int g_rank, g_size;
extern gs_comm *g_comm;
extern long g_pass, g_fail;
extern char g_case[200];
extern int g_case_failed; /* the current case has failed */

/* gs_init, the rank and size, line-buffered stdout, g_comm. */
void mrt_init(int *argc, char ***argv);
/* The cases' total over every rank (MPI_COMM_WORLD, so g_comm may be gone),
 * gs_finalize; returns 0 if every case passed, else 1. */
int mrt_finish(void);

void begin_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void end_case(void);
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (0)

/* Checks a status and, on a mismatch, prints the library's message. */
#define CHECK_ST(call, want)                                                \
  do {                                                                      \
    gs_status st_ = (call);                                                 \
    if (st_ != (want))                                                      \
      fail("%s returned %s, expected %s (%s)", #call, gs_strerror(st_),     \
           gs_strerror(want), st_ == GS_OK ? "" : gs_last_error());         \
  } while (0)

#endif /* GRADSYNC_TEST_MRT_H */
