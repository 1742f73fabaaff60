/* Multi-rank test cases (mrt.h). */
#include "mrt.h"

#include <stdarg.h>
#include <stdio.h>

int g_rank, g_size;
gs_comm *g_comm;
long g_pass, g_fail;
char g_case[200];
int g_case_failed;
static long g_printed;

void mrt_init(int *argc, char ***argv) {
  if (gs_init(argc, argv) != GS_OK) {
    fprintf(stderr, "FAIL gs_init: %s\n", gs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (gs_comm_create(MPI_COMM_WORLD, &g_comm) != GS_OK) {
    fprintf(stderr, "FAIL rank %d case gs_comm_create: %s\n", g_rank, gs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

int mrt_finish(void) {
  long local[2] = {g_pass, g_fail}, total[2] = {0, 0};
  MPI_Allreduce(local, total, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%ld passed, %ld failed\n", total[0], total[1]);
  gs_finalize();
  return total[1] == 0 ? 0 : 1;
}

void begin_case(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_case, sizeof g_case, fmt, ap);
  va_end(ap);
  g_case_failed = 0;
}

void end_case(void) {
  if (g_case_failed) g_fail++;
  else g_pass++;
}

void fail(const char *fmt, ...) {
  if (g_case_failed) return; /* one line per case: its first failure */
  g_case_failed = 1;
  if (g_printed++ > MRT_MAX_PRINTED) return;
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL rank %d case %s: %s\n", g_rank, g_case, msg);
  fflush(stdout);
}
