/* A program built against an installed gradsync's training library: two
 * short runs of the public loop (gradsync/train.h) on a synthetic set, one
 * with the engine's all-reduce and one over a parameter server (the last
 * rank), each ending with a weights copy every worker agrees on; and the
 * library's option check, which must refuse an unknown sync mode. */
#include <gradsync.h>
#include <gradsync/train.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int epochs_seen;

static void on_epoch(void *user, const gs_train_epoch *e) {
  (void)user;
  epochs_seen++;
  printf("consumer_train: epoch %ld, test accuracy %.3f\n", e->epoch, e->test_accuracy);
}

static int run(gs_comm *comm, int rank, int size, const char *sync, int servers) {
  gs_train_events ev = {.epoch = on_epoch};
  gs_train_config c;
  gs_train_config_init(&c);
  c.model = GS_NN_MODEL_MLP;
  c.synthetic = 256;
  c.batch = 16;
  c.max_steps = 5;
  c.policy = "wfbp";
  c.sync = sync;
  c.ps_servers = servers;
  c.events = &ev;
  gs_train_ranks ranks = {.job = "consumer", .comm = comm, .rank = rank, .size = size};
  gs_train_result res;
  epochs_seen = 0;
  int rc = gs_train_run(&c, &ranks, &res);
  int bad = rc != 0;
  if (rc != 0) fprintf(stderr, "consumer_train: %s: exit %d\n", sync, rc);
  int worker = rank < size - servers;
  if (!bad && worker) {
    for (size_t i = 0; i < res.nweights; i++) bad |= !isfinite(res.weights[i]);
    bad |= res.nweights == 0 || res.epochs_done != 1;
    if (bad) fprintf(stderr, "consumer_train: %s: no finite weights after 1 epoch\n", sync);
  }
  if (!bad && rank == 0 && epochs_seen != 1) {
    fprintf(stderr, "consumer_train: %s: %d epoch events, expected 1\n", sync, epochs_seen);
    bad = 1;
  }
  gs_train_result_free(&res);
  return bad;
}

int main(int argc, char **argv) {
  if (gs_init(&argc, &argv) != GS_OK) return 1;
  gs_comm *comm;
  if (gs_comm_create(MPI_COMM_WORLD, &comm) != GS_OK) return 1;
  int rank = gs_comm_rank(comm), size = gs_comm_size(comm);
  gs_train_config c;
  gs_train_config_init(&c);
  c.sync = "sideways";
  int bad = gs_train_config_check(&c) == GS_OK;
  if (bad) fprintf(stderr, "consumer_train: sync 'sideways' was accepted\n");
  bad |= run(comm, rank, size, "engine", 0);
  if (size > 1) bad |= run(comm, rank, size, "bsp", 1);
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (!any && rank == 0) printf("consumer_train: both runs trained: ok\n");
  gs_comm_destroy(comm);
  gs_finalize();
  return any;
}
