/*
 * Push/pull throughput of the parameter servers: ps_bench SYNC FLOATS STEPS
 * Each worker pushes FLOATS gradients and pulls FLOATS parameters per step
 * (a plain SGD update on the servers) for STEPS steps after 3 warm-up
 * steps; the peer, measured in the same run on the same workers, is
 * gradsync's all-reduce of the same FLOATS (its algorithm bandwidth: bytes
 * per second of each rank's buffer). Prints one JSON line (rank 0).
 * The servers are the last --ps ranks: PS_SERVERS (default 1). With
 * PS_BENCH_NET=NAME (a network preset, gs_cost_preset), the line also
 * carries the cost model's BSP round for these workers, servers and bytes,
 * each rank on a node of its own (gs_cost_ps, the servers' chunks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"
#include "gradsync/nn.h"
#include "gradsync/ps.h"

static void update(void *ctx, float *w, const float *g, float *v, size_t n, float lr, float mu) {
  (void)ctx;
  gs_nn_sgd_config c = {.lr = lr, .momentum = mu};
  gs_nn_sgd_update(&c, w, g, v, n);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: ps_bench SYNC FLOATS STEPS\n");
    return 2;
  }
  gs_init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t n = (size_t)atol(argv[2]);
  int steps = atoi(argv[3]);
  int servers = getenv("PS_SERVERS") ? atoi(getenv("PS_SERVERS")) : 1;
  gs_ps_config cfg = {.servers = servers};
  if (gs_ps_sync_parse(argv[1], &cfg.sync) != GS_OK) {
    fprintf(stderr, "%s\n", gs_last_error());
    return 2;
  }
  gs_ps *ps = NULL;
  if (gs_ps_create(MPI_COMM_WORLD, &cfg, &n, 1, &ps) != GS_OK) {
    fprintf(stderr, "%s\n", gs_last_error());
    return 1;
  }
  double ps_s = 0, ar_s = 0;
  if (gs_ps_is_server(ps)) {
    gs_ps_serve(ps, update, NULL);
  } else {
    float *w = calloc(n, sizeof *w), *g = calloc(n, sizeof *g);
    for (size_t i = 0; i < n; i++) g[i] = 1e-6f * (float)(i % 7);
    gs_ps_worker_init(ps, w, 0);
    gs_ps_step_info info = {.batch = 1, .lr = 0.01f, .momentum = 0.0f};
    for (int s = 0; s < 3; s++) gs_ps_step(ps, g, w, &info, NULL);
    MPI_Barrier(gs_ps_worker_comm(ps));
    double t0 = gs_now();
    for (int s = 0; s < steps; s++) gs_ps_step(ps, g, w, &info, NULL);
    ps_s = gs_now() - t0;
    gs_ps_finish(ps);
    /* The peer: all-reduce of the same bytes among the same workers. */
    gs_comm *wc = NULL;
    if (gs_comm_create(gs_ps_worker_comm(ps), &wc) == GS_OK) {
      for (int s = 0; s < 3; s++) gs_allreduce(wc, GS_IN_PLACE, g, n, GS_F32, GS_SUM, GS_ALGO_AUTO);
      gs_barrier(wc, GS_ALGO_AUTO);
      t0 = gs_now();
      for (int s = 0; s < steps; s++)
        gs_allreduce(wc, GS_IN_PLACE, g, n, GS_F32, GS_AVG, GS_ALGO_AUTO);
      ar_s = gs_now() - t0;
      gs_comm_destroy(wc);
    }
    free(w);
    free(g);
  }
  gs_ps_stats st;
  gs_ps_get_stats(ps, &st);
  double slowest = 0, ar = 0;
  MPI_Reduce(&ps_s, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&ar_s, &ar, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double bytes = (double)n * sizeof(float);
    double ps_step = slowest / steps, ar_step = ar / steps;
    /* push + pull per worker and step, in GB/s */
    double ps_gbs = 2 * bytes / ps_step / 1e9;
    double ar_algbw = bytes / ar_step / 1e9;
    printf("{\"sync\": \"%s\", \"servers\": %d, \"workers\": %d, \"bytes\": %.0f, "
           "\"steps\": %d, \"ps_step_s\": %.6f, \"ps_pushpull_gbs_per_worker\": %.4f, "
           "\"allreduce_step_s\": %.6f, \"allreduce_algbw_gbs\": %.4f, "
           "\"ps_step_over_allreduce\": %.3f",
           argv[1], servers, size - servers, bytes, steps, ps_step, ps_gbs, ar_step, ar_algbw,
           ps_step / ar_step);
    const char *net = getenv("PS_BENCH_NET");
    gs_cost_params c;
    gs_cost_ps_out o;
    if (net && *net && gs_cost_preset(net, &c) == GS_OK &&
        gs_cost_ps(&c, size - servers, servers, bytes, (double)GS_PS_CHUNK_BYTES, &o) == GS_OK)
      printf(", \"net\": \"%s\", \"predicted_round_s\": %.6f, \"predicted_drain_s\": %.6f",
             net, o.round_s, o.drain_s);
    printf("}\n");
  }
  gs_ps_destroy(ps);
  gs_finalize();
  return 0;
}
