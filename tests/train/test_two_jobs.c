/*
 * Two independent training jobs on the two halves of one MPI world: every
 * module runs on the communicator it is given, not on MPI_COMM_WORLD
 * (issue 35). Under mpirun:
 *
 *   test_two_jobs halves OUTDIR     (4 ranks) ranks 0-1 train job A, ranks
 *                                    2-3 job B, at the same time
 *   test_two_jobs A|B|C OUTDIR      (2 ranks) that job alone on the world
 *
 * Job A is K-FAC (dkfac: its own communicator, factors all-reduced), job B
 * parameter servers (1 server, 1 worker, BSP), job C the engine (with
 * "halves2" the halves run A and C): each writes its final weights to
 * OUTDIR/JOB-MODE.bin from its first rank, and test_two_jobs.sh compares a
 * job on a half with the same job alone, bitwise. A module that used
 * MPI_COMM_WORLD inside a half would wait for the other half's ranks (or
 * refuse: K-FAC checked the world's size), and the halves' run fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gradsync.h"
#include "optim_kfac.h"
#include "gradsync/train.h"

static int fail(const char *what) {
  printf("FAIL %s: %s\n", what, gs_last_error());
  fflush(stdout);
  return 1;
}

/* Job `job`'s configuration: the same whatever the ranks it runs on. */
static void job_config(char job, gs_train_config *c, gs_train_kfac_options *k) {
  gs_train_config_init(c);
  c->model = GS_NN_MODEL_MLP;
  c->synthetic = 256;
  c->batch = 16;
  c->max_steps = 6;
  c->policy = "wfbp";
  if (job == 'A') {
    gs_train_kfac_options_init(k);
    k->inv_every = 2;
    c->momentum = GS_TRAIN_KFAC_MOMENTUM;
    c->optimizer = "kfac";
    c->kfac = k;
  } else if (job == 'B') {
    c->ps_servers = 1;
    c->sync = "bsp";
  }
}

/* Runs `job` on `mpi` (every rank of it) and writes the weights. */
static int run_job(char job, MPI_Comm mpi, const char *outdir, const char *mode) {
  int rank, size;
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &size);
  gs_comm *comm = NULL;
  if (gs_comm_create(mpi, &comm) != GS_OK) return fail("gs_comm_create");
  gs_train_ranks ranks = {.job = "two-jobs", .comm = comm, .rank = rank, .size = size};
  gs_train_config c;
  gs_train_kfac_options k;
  job_config(job, &c, &k);
  gs_train_result res;
  int rc = gs_train_run(&c, &ranks, &res);
  if (rc != 0) {
    printf("FAIL job %c (%s) on rank %d of %d: exit %d\n", job, mode, rank, size, rc);
  } else if (rank == 0) { /* a worker in every job: servers are the last ranks */
    char path[4096];
    snprintf(path, sizeof path, "%s/%c-%s.bin", outdir, job, mode);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(res.weights, sizeof(float), res.nweights, f) != res.nweights) {
      printf("FAIL job %c: cannot write %s\n", job, path);
      rc = 1;
    }
    if (f) fclose(f);
    printf("job %c (%s): %zu weights, test accuracy %.4f\n", job, mode, res.nweights,
           res.test_accuracy);
  }
  if (rc == 0) gs_free(res.weights);
  if (gs_comm_destroy(comm) != GS_OK && rc == 0) rc = fail("gs_comm_destroy");
  return rc;
}

int main(int argc, char **argv) {
  if (gs_init(&argc, &argv) != GS_OK) return fail("gs_init");
  if (argc != 3) {
    printf("FAIL usage: test_two_jobs halves|halves2|A|B|C OUTDIR\n");
    gs_finalize();
    return 2;
  }
  const char *mode = argv[1], *outdir = argv[2];
  int wrank, wsize, rc;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (strncmp(mode, "halves", 6) == 0) {
    if (wsize != 4) {
      printf("FAIL %s needs 4 ranks, not %d\n", mode, wsize);
      gs_finalize();
      return 2;
    }
    int half = wrank / 2;
    MPI_Comm mine;
    MPI_Comm_split(MPI_COMM_WORLD, half, wrank, &mine);
    char job = half == 0 ? 'A' : strcmp(mode, "halves2") == 0 ? 'C' : 'B';
    rc = run_job(job, mine, outdir, "half");
    MPI_Comm_free(&mine);
  } else {
    rc = run_job(mode[0], MPI_COMM_WORLD, outdir, "alone");
  }
  /* Both halves end together: neither leaves MPI while the other runs. */
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  gs_finalize();
  return any;
}
