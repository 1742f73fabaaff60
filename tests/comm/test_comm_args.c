/*
 * Single-process checks of the communicator API that need no running MPI:
 * algorithm names, and argument errors that must be reported before any
 * communicator is touched (a NULL communicator is an error, not a crash).
 * The multi-rank behaviour is in test_collectives.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync.h"

static void test_algo_names(void **state) {
  (void)state;
  const char *names[GS_ALGO_COUNT] = {
      "auto", "mpi", "ring", "rd", "rabenseifner", "hier", "pipeline",
      "binomial", "pairwise", "dissemination"};
  for (int i = 0; i < GS_ALGO_COUNT; i++) {
    assert_string_equal(gs_algo_name((gs_algo)i), names[i]);
    gs_algo a = GS_ALGO_COUNT;
    assert_int_equal(gs_algo_parse(names[i], &a), GS_OK);
    assert_int_equal(a, i);
  }
  assert_non_null(gs_algo_name(GS_ALGO_COUNT));
  assert_non_null(gs_algo_name((gs_algo)-1));
  gs_algo a = GS_ALGO_RING;
  assert_int_equal(gs_algo_parse("tree", &a), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "'tree'"));
  assert_int_equal(a, GS_ALGO_RING);
  assert_int_equal(gs_algo_parse("", &a), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_algo_parse(NULL, &a), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_algo_parse("ring", NULL), GS_ERR_INVALID_ARG);
}

#define EXPECT_NULL_COMM(call)                                          \
  do {                                                                  \
    gs_clear_error();                                                   \
    assert_int_equal((call), GS_ERR_INVALID_ARG);                       \
    assert_true(strlen(gs_last_error()) > 0);                           \
  } while (0)

/* Every collective reports a NULL communicator instead of dereferencing it,
 * and leaves *req NULL. */
static void test_null_comm(void **state) {
  (void)state;
  float buf[64] = {0};
  size_t counts[8] = {1, 1, 1, 1, 1, 1, 1, 1}, displs[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  gs_request *req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_iallreduce(NULL, buf, buf + 8, 4, GS_F32, GS_SUM, GS_ALGO_AUTO, &req));
  assert_null(req);
  req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_ireduce_scatter(NULL, buf, buf + 8, 4, GS_F32, GS_SUM, GS_ALGO_AUTO, &req));
  assert_null(req);
  req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_iallgather(NULL, buf, buf + 8, 4, GS_F32, GS_ALGO_AUTO, &req));
  assert_null(req);
  req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_iallgatherv(NULL, buf, 1, buf + 8, counts, displs, GS_F32,
                                  GS_ALGO_AUTO, &req));
  assert_null(req);
  req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_ibcast(NULL, buf, 4, GS_F32, 0, GS_ALGO_AUTO, &req));
  assert_null(req);
  req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_ialltoall(NULL, buf, buf + 8, 1, GS_F32, GS_ALGO_AUTO, &req));
  assert_null(req);
  req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_ialltoallv(NULL, buf, counts, displs, buf + 8, counts, displs,
                                 GS_F32, GS_ALGO_AUTO, &req));
  assert_null(req);
  req = (gs_request *)buf;
  EXPECT_NULL_COMM(gs_ibarrier(NULL, GS_ALGO_AUTO, &req));
  assert_null(req);

  EXPECT_NULL_COMM(gs_allreduce(NULL, buf, buf + 8, 4, GS_F32, GS_SUM, GS_ALGO_AUTO));
  EXPECT_NULL_COMM(gs_reduce_scatter(NULL, buf, buf + 8, 4, GS_F32, GS_SUM, GS_ALGO_AUTO));
  EXPECT_NULL_COMM(gs_allgather(NULL, buf, buf + 8, 4, GS_F32, GS_ALGO_AUTO));
  EXPECT_NULL_COMM(gs_bcast(NULL, buf, 4, GS_F32, 0, GS_ALGO_AUTO));
  EXPECT_NULL_COMM(gs_alltoall(NULL, buf, buf + 8, 1, GS_F32, GS_ALGO_AUTO));
  EXPECT_NULL_COMM(gs_barrier(NULL, GS_ALGO_AUTO));
}

static void test_requests_and_lifecycle_without_mpi(void **state) {
  (void)state;
  assert_int_equal(gs_wait(NULL), GS_OK);
  int done = 0;
  assert_int_equal(gs_test(NULL, &done), GS_OK);
  assert_int_equal(done, 1);
  assert_int_equal(gs_test(NULL, NULL), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_comm_destroy(NULL), GS_OK);
  gs_comm *c = (gs_comm *)&done;
  assert_int_equal(gs_comm_create(MPI_COMM_WORLD, NULL), GS_ERR_INVALID_ARG);
  /* MPI is not initialised in this process. */
  assert_int_equal(gs_comm_create(MPI_COMM_WORLD, &c), GS_ERR_STATE);
  assert_null(c);
  assert_non_null(strstr(gs_last_error(), "MPI"));
  /* A request pointer is required. */
  float buf[4];
  assert_int_equal(gs_iallreduce(NULL, buf, buf, 1, GS_F32, GS_SUM, GS_ALGO_AUTO, NULL),
                   GS_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_algo_names),
      cmocka_unit_test(test_null_comm),
      cmocka_unit_test(test_requests_and_lifecycle_without_mpi),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
