/*
 * Sync-Switch's momentum ramp (docs/SYNC.md: at a switch to ASP the
 * momentum ramps from 1/W of ASP's, doubling every momentum_ramp_steps
 * pushes) belongs to the switch, not to a resume. Under mpirun, 2 workers
 * and 1 server (test_ps_resume_ramp, np 3):
 *   fresh    switch:offline:0.5: BSP pushes carry mu, the first ASP pushes
 *            after the switch mu_async / W (the ramp)
 *   resumed  the same job resumed past its BSP share (gs_ps_worker_resume):
 *            every push is ASP with mu_async itself. Until 2026-12-07 the
 *            ramp started again at the resume, as if the job had just
 *            switched.
 *   share 0  switch:offline:0 starts in ASP and never switches: no ramp,
 *            as under asp.
 * Prints "FAIL ..." and exits non-zero on a failed check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync/nn.h"
#include "gradsync/ps.h"

static int rank;
static int failures;

#define EXPECT_RANK rank
#include "expect.h"

static const size_t counts[] = {300, 20};
#define NT (sizeof counts / sizeof *counts)
#define N 320
#define MU 0.9f

/* The server's record of the momentum of every update it applied. */
static float mus[4096];
static int nmu;

static void sgd_shard(void *ctx, float *w, const float *g, float *v, size_t n, float lr,
                      float mu) {
  (void)ctx;
  if (nmu < (int)(sizeof mus / sizeof *mus)) mus[nmu++] = mu;
  gs_nn_sgd_config c = {.lr = lr, .momentum = mu};
  gs_nn_sgd_update(&c, w, g, v, n);
}

/* One job of 1000 samples under `spec`, from `done` samples; returns on
 * the server the momenta it applied (mus, nmu). */
static void job(const char *spec, long done) {
  gs_ps_config cfg = {.servers = 1, .sample_budget = 1000, .momentum_ramp_steps = 20};
  if (gs_ps_sync_parse(spec, &cfg.sync) != GS_OK) {
    EXPECT(0, "parse: %s", gs_last_error());
    return;
  }
  gs_ps *ps = NULL;
  if (gs_ps_create(MPI_COMM_WORLD, &cfg, counts, NT, &ps) != GS_OK) {
    EXPECT(0, "gs_ps_create: %s", gs_last_error());
    return;
  }
  nmu = 0;
  if (gs_ps_is_server(ps)) {
    EXPECT(gs_ps_serve(ps, sgd_shard, NULL) == GS_OK, "serve: %s", gs_last_error());
  } else {
    float w[N], g[N];
    for (int i = 0; i < N; i++) w[i] = (float)(i % 13) / 13.0f - 0.5f;
    EXPECT(gs_ps_worker_resume(ps, w, NULL, 0, done) == GS_OK, "resume: %s", gs_last_error());
    for (long t = 0; t < 100; t++) {
      for (int i = 0; i < N; i++) g[i] = 0.1f * w[i] + 0.01f * (float)sin((double)(i + t));
      gs_ps_step_info info = {.batch = 32, .lr = 0.05f, .momentum = MU};
      gs_ps_step_result res;
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step: %s", gs_last_error());
      if (res.stop) break;
    }
    gs_ps_finish(ps);
  }
  gs_ps_destroy(ps);
}

int main(int argc, char **argv) {
  int provided, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT(size == 3, "needs 3 ranks (2 workers, 1 server), not %d", size);
  const float async_mu = MU - (1.0f - 1.0f / 2); /* W = 2 */
  if (size == 3) {
    job("switch:offline:0.5", 0);
    if (rank == 2) {
      int bsp = 0, ramped = 0, other = 0;
      for (int i = 0; i < nmu; i++) {
        if (mus[i] == MU) bsp++;
        else if (fabsf(mus[i] - async_mu / 2) < 1e-6f) ramped++;
        else other++;
      }
      EXPECT(bsp > 0 && ramped > 0, "fresh: %d BSP updates, %d ramped ASP ones (mu %g), %d other",
             bsp, ramped, (double)(async_mu / 2), other);
    }
    /* Past the BSP share of 500; and a share of 0, which never switches
     * (it ramped from its first push until 2026-12-07, unlike asp). */
    for (int c = 0; c < 2; c++) {
    job(c == 0 ? "switch:offline:0.5" : "switch:offline:0", c == 0 ? 600 : 0);
    if (rank == 2) {
      int full = 0, other = 0;
      float odd = 0;
      for (int i = 0; i < nmu; i++) {
        if (fabsf(mus[i] - async_mu) < 1e-6f) full++;
        else {
          other++;
          odd = mus[i];
        }
      }
      EXPECT(full > 0 && other == 0, "%s: %d updates with ASP's momentum %g, %d with "
             "another (%g): a ramp without a switch", c == 0 ? "resumed past the switch" :
             "switch:offline:0", full, (double)async_mu, other, (double)odd);
    }
    }
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (all == 0 && rank == 0) printf("ok ps_resume_ramp\n");
  return all ? 1 : 0;
}
