// A C++ program built against an installed gradsync: the public headers
// must compile as C++ (until 2026-12-07 comm.h and train.h declared
// functions _Noreturn, which C++ lacks), and the C functions link.
#include <gradsync.h>
#include <gradsync/train.h>

#include <cstdio>

int main(int argc, char **argv) {
  if (gs_init(&argc, &argv) != GS_OK) return 1;
  gs_comm *c;
  if (gs_comm_create(MPI_COMM_WORLD, &c) != GS_OK) {
    std::fprintf(stderr, "%s\n", gs_last_error());
    return 1;
  }
  // Never called: the declarations that never return must link as C.
  void (*abort_comm)(gs_comm *, int, const char *, ...) = gs_comm_abort;
  void (*abort_train)(const gs_train_ranks *, const char *, ...) = gs_train_rank_abort;
  int p = gs_comm_size(c);
  float x[3] = {1, 2, 3};
  bool bad = gs_allreduce(c, GS_IN_PLACE, x, 3, GS_F32, GS_SUM, GS_ALGO_AUTO) != GS_OK;
  bad = bad || x[0] != p || x[1] != 2 * p || x[2] != 3 * p;
  bad = bad || abort_comm == nullptr || abort_train == nullptr;
  gs_comm_destroy(c);
  gs_finalize();
  if (bad) std::fprintf(stderr, "consumer_cxx: wrong allreduce result\n");
  return bad ? 1 : 0;
}
