/* A program built against an installed gradsync: allreduce on every rank. */
#include <gradsync.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (gs_init(&argc, &argv) != GS_OK) return 1;
  gs_comm *c;
  if (gs_comm_create(MPI_COMM_WORLD, &c) != GS_OK) {
    fprintf(stderr, "%s\n", gs_last_error());
    return 1;
  }
  int p = gs_comm_size(c);
  float x[3] = {1, 2, 3};
  int bad = gs_allreduce(c, GS_IN_PLACE, x, 3, GS_F32, GS_SUM, GS_ALGO_AUTO) != GS_OK;
  bad |= x[0] != p || x[1] != 2 * p || x[2] != 3 * p;
  gs_comm_destroy(c);
  gs_finalize();
  if (bad) fprintf(stderr, "consumer: wrong allreduce result\n");
  return bad;
}
