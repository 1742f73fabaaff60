/*
 * The training loop (src/train) driven directly, on 1 or more ranks under
 * mpirun, on a synthetic data set:
 *   - the engine sync mode on N ranks with batch 48/N ends where a plain
 *     single-process loop (src/nn only: forward, loss, backward, SGD step)
 *     with batch 32 ends (the reference path of tests/apps/test_train.sh):
 *     bitwise on 1 rank, within 1e-4 on more;
 *   - a sync mode written here (an all-reduce after backward that leaves
 *     the update to the loop, owns_step = 0) reaches the same weights, and
 *     the loop calls its hooks as sync.h promises (every gradient once per
 *     step in decreasing order, end_backward once per step);
 *   - step hooks run once per step in order and add their time bucket;
 *   - the batches prefetched by a background thread give bitwise the
 *     weights of batches gathered in the training thread;
 *   - failures: a data directory missing on one rank alone, ranks that
 *     disagree on --epochs, an unknown sync mode and a sync mode whose
 *     set-up fails on one rank: every rank returns 1.
 * Prints "FAIL ..." and exits 1 on a failed check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gradsync/ps.h"
#include "train_ctx.h"

/* 48 samples per step in all: 48, 24 or 16 per rank on 1, 2 or 3 ranks. */
enum { SAMPLES = 4096, STEPS = 8, GLOBAL_BATCH = 48 };

static int fails, rank_, size_;

#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond)) {                                                  \
      printf("FAIL rank %d: %s:%d: ", rank_, __FILE__, __LINE__); \
      printf(__VA_ARGS__);                                          \
      printf("\n");                                                 \
      fflush(stdout);                                               \
      fails++;                                                      \
    }                                                               \
  } while (0)

/* The reference: one process, batch 48, the same seeds, no communication. */
static float *reference_weights(size_t *n) {
  gs_nn_dataset ds = {0};
  gs_nn_net *net = NULL;
  gs_nn_sgd *opt = NULL;
  gs_nn_sampler sm = {0};
  gs_nn_model_options mopt = {.c = 1, .h = 28, .w = 28, .classes = 10};
  gs_nn_sgd_config scfg = {.lr = 0.05f, .momentum = 0.9f};
  if (gs_nn_dataset_synthetic(&ds, SAMPLES, 1, 28, 28, 10, 1.0f, 7) != GS_OK ||
      gs_nn_model_create(&net, GS_NN_MODEL_MLP, GLOBAL_BATCH, 1, &mopt) != GS_OK ||
      gs_nn_sgd_create(&opt, net, &scfg) != GS_OK ||
      gs_nn_sampler_init(&sm, ds.n, 0, 1, 1, 1) != GS_OK ||
      gs_nn_sampler_set_epoch(&sm, 0) != GS_OK) {
    printf("FAIL reference set-up: %s\n", gs_last_error());
    exit(1);
  }
  float *x = malloc((size_t)GLOBAL_BATCH * 784 * sizeof(float));
  int32_t *y = malloc(GLOBAL_BATCH * sizeof(int32_t));
  for (int s = 0; s < STEPS; s++) {
    float loss;
    if (gs_nn_dataset_gather(&ds, sm.indices + (size_t)s * GLOBAL_BATCH, GLOBAL_BATCH, x, y) ||
        gs_nn_forward(net, x, GLOBAL_BATCH, NULL) || gs_nn_loss(net, y, &loss, NULL) ||
        gs_nn_backward(net) || gs_nn_sgd_step(opt)) {
      printf("FAIL reference step %d: %s\n", s, gs_last_error());
      exit(1);
    }
  }
  *n = gs_nn_param_total(net);
  float *w = malloc(*n * sizeof(float));
  memcpy(w, gs_nn_weights_flat(net), *n * sizeof(float));
  free(x);
  free(y);
  gs_nn_sampler_free(&sm);
  gs_nn_sgd_destroy(opt);
  gs_nn_net_destroy(net);
  gs_nn_dataset_free(&ds);
  return w;
}

/* The largest difference relative to the largest reference magnitude; a
 * non-finite weight is an infinite difference. */
static double rel_diff(const float *a, const float *ref, size_t n) {
  double dmax = 0, rmax = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) return INFINITY;
    dmax = fmax(dmax, fabs((double)a[i] - ref[i]));
    rmax = fmax(rmax, fabs((double)ref[i]));
  }
  return rmax > 0 ? dmax / rmax : dmax;
}

static void base_config(gs_train_config *c) {
  gs_train_config_init(c);
  c->model = GS_NN_MODEL_MLP;
  c->synthetic = SAMPLES;
  c->batch = GLOBAL_BATCH / size_;
  c->max_steps = STEPS;
  c->policy = "wfbp";
}

/* ---- A sync mode of the test's own: all-reduce after backward ---------- */

typedef struct {
  train_ctx *t;
  long grad_calls, order_errors, end_calls, flushes;
  size_t last_index, nparams;
  int fail_create_on; /* the rank whose create fails, or -1 */
} allreduce_sync;

static allreduce_sync probe;

static gs_status ar_create(train_ctx *t, void **self) {
  probe.t = t;
  probe.nparams = t->nparams;
  *self = &probe;
  if (t->rank == probe.fail_create_on)
    return gs_error(GS_ERR_INVALID_ARG, "test: create fails on rank %d", t->rank);
  return GS_OK;
}

static gs_status ar_grad_ready(void *self, size_t i) {
  allreduce_sync *s = self;
  /* Decreasing order inside a step, starting from the top tensor. */
  size_t expect = s->grad_calls % (long)s->nparams == 0 ? s->nparams - 1 : s->last_index - 1;
  if (i != expect) s->order_errors++;
  s->last_index = i;
  s->grad_calls++;
  return GS_OK;
}

static gs_status ar_end_backward(void *self, const train_step *st) {
  allreduce_sync *s = self;
  (void)st;
  s->end_calls++;
  float *g = gs_nn_grads_flat(s->t->net);
  size_t n = gs_nn_param_total(s->t->net);
  gs_status r = gs_allreduce(s->t->comm, GS_IN_PLACE, g, n, GS_F32, GS_SUM, GS_ALGO_AUTO);
  for (size_t i = 0; i < n && r == GS_OK; i++) g[i] /= (float)s->t->size;
  return r;
}

static gs_status ar_flush(void *self) {
  ((allreduce_sync *)self)->flushes++;
  return GS_OK;
}

static void ar_stats(void *self, gs_train_stats *out) {
  allreduce_sync *s = self;
  out->messages = (uint64_t)s->end_calls;
  out->bytes = (uint64_t)s->end_calls * gs_nn_param_total(s->t->net) * sizeof(float);
}

static gs_status ar_destroy(void *self) {
  (void)self;
  return GS_OK;
}

static const train_sync_ops allreduce_ops = {
    .name = "test-allreduce",
    .owns_step = 0,
    .create = ar_create,
    .grad_ready = ar_grad_ready,
    .end_backward = ar_end_backward,
    .flush = ar_flush,
    .stats = ar_stats,
    .destroy = ar_destroy,
};

/* ---- A step hook that records the order of its calls ------------------- */

static char hook_log[4 * STEPS + 1];
static size_t hook_len;

static gs_status hk_create(train_ctx *t, void **self) {
  (void)t;
  *self = NULL;
  hook_len = 0;
  return GS_OK;
}
static gs_status hk_note(char c) {
  if (hook_len < sizeof hook_log - 1) hook_log[hook_len++] = c;
  hook_log[hook_len] = '\0';
  return GS_OK;
}
static gs_status hk_bf(void *s, const train_step *st) { (void)s; (void)st; return hk_note('f'); }
static gs_status hk_af(void *s, const train_step *st) { (void)s; (void)st; return hk_note('F'); }
static gs_status hk_bb(void *s, const train_step *st) { (void)s; (void)st; return hk_note('b'); }
static gs_status hk_ab(void *s, const train_step *st) { (void)s; (void)st; return hk_note('B'); }
static void hk_breakdown(void *s, gs_train_breakdown *b) {
  (void)s;
  gs_train_breakdown_add(b, "hook_test", 1.5);
}

static const train_hook_ops hook_ops = {
    .name = "test-hook", .create = hk_create, .before_forward = hk_bf,
    .after_forward = hk_af, .before_backward = hk_bb, .after_backward = hk_ab,
    .breakdown = hk_breakdown};

int main(int argc, char **argv) {
  if (gs_init(&argc, &argv) != GS_OK) {
    printf("FAIL gs_init: %s\n", gs_last_error());
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  gs_comm *comm = NULL;
  if (gs_comm_create(MPI_COMM_WORLD, &comm) != GS_OK) {
    printf("FAIL gs_comm_create: %s\n", gs_last_error());
    return 1;
  }
  gs_train_ranks ranks = {.job = "train-test", .comm = comm, .rank = rank_, .size = size_};
  size_t nref = 0;
  float *ref = reference_weights(&nref);
  gs_train_config c;
  gs_train_result res;
  int rc;

  /* The engine path against the reference. */
  base_config(&c);
  rc = gs_train_run(&c, &ranks, &res);
  CHECK(rc == 0, "engine run: exit %d", rc);
  if (rc == 0) {
    CHECK(res.nweights == nref, "%zu weights, the reference has %zu", res.nweights, nref);
    double d = rel_diff(res.weights, ref, nref);
    if (size_ == 1)
      CHECK(d == 0, "1 rank: differs from the reference by %g (expected bitwise)", d);
    else
      CHECK(d <= 1e-4, "%d ranks: differ from the reference by %g", size_, d);
    CHECK(res.epochs_done == 1, "epochs done %ld", res.epochs_done);
    /* One rank runs without the engine (sync_engine.c's solo): nothing sent. */
    if (size_ == 1)
      CHECK(res.sync.messages == 0, "1 rank: %llu collectives (expected none, no engine)",
            (unsigned long long)res.sync.messages);
    else
      CHECK(res.sync.messages > 0, "the engine reported no collectives");
    CHECK(gs_train_breakdown_get(&res.breakdown, "compute") > 0, "no compute time");
    /* The prefetch thread changes when batches are gathered, never what
     * they hold: the weights without it are bitwise the same. */
    gs_train_result res2;
    base_config(&c);
    c.prefetch = 0;
    rc = gs_train_run(&c, &ranks, &res2);
    CHECK(rc == 0, "engine run without prefetch: exit %d", rc);
    if (rc == 0) {
      CHECK(memcmp(res2.weights, res.weights, nref * sizeof(float)) == 0,
            "without prefetch the weights differ by %g", rel_diff(res2.weights, res.weights, nref));
      gs_free(res2.weights);
    }
    gs_free(res.weights);
  }

  /* A sync mode that leaves the update to the loop, plus a step hook. */
  /* A commit at a step (--commit-every) is refused, as an option, exactly
   * for the parameter-server modes whose workers' step counts differ
   * (gs_ps_sync_lockstep, what the cluster manager goes by). */
  const char *ps_modes[] = {"bsp", "asp", "ssp:0", "ssp:3", "switch:offline:0.5",
                            "switch:online"};
  for (size_t i = 0; i < sizeof ps_modes / sizeof *ps_modes; i++) {
    base_config(&c);
    c.sync = ps_modes[i];
    c.ps_servers = 1;
    c.checkpoint_dir = "/nonexistent/gradsync-test";
    c.commit_every = 5;
    gs_ps_sync mode;
    CHECK(gs_ps_sync_parse(ps_modes[i], &mode) == GS_OK, "%s unparsed", ps_modes[i]);
    int ok = gs_train_config_check(&c) == GS_OK;
    CHECK(ok == gs_ps_sync_lockstep(&mode), "--sync %s --commit-every 5: %s (%s)", ps_modes[i],
          ok ? "accepted" : "refused", ok ? "" : gs_last_error());
  }

  base_config(&c);
  memset(&probe, 0, sizeof probe);
  probe.fail_create_on = -1;
  c.sync_ops = &allreduce_ops;
  c.hooks[0] = &hook_ops;
  c.nhooks = 1;
  rc = gs_train_run(&c, &ranks, &res);
  CHECK(rc == 0, "test sync mode: exit %d", rc);
  if (rc == 0) {
    double d = rel_diff(res.weights, ref, nref);
    CHECK(d <= (size_ == 1 ? 0 : 1e-4), "test sync mode: differs from the reference by %g", d);
    CHECK(probe.end_calls == STEPS, "end_backward called %ld times", probe.end_calls);
    CHECK(probe.order_errors == 0, "%ld gradients out of order", probe.order_errors);
    CHECK(probe.flushes == 1, "flush called %ld times", probe.flushes);
    CHECK(res.sync.messages == STEPS, "stats: %llu messages",
          (unsigned long long)res.sync.messages);
    char want[4 * STEPS + 1] = "";
    for (int s = 0; s < STEPS; s++) strcat(want, "fFbB");
    CHECK(strcmp(hook_log, want) == 0, "hooks ran as '%s', expected '%s'", hook_log, want);
    CHECK(gs_train_breakdown_get(&res.breakdown, "hook_test") == 1.5, "the hook's bucket is missing");
    gs_free(res.weights);
  }
  /* Every gradient once per step (the mlp has 6 tensors). */
  CHECK(probe.nparams == 6 && probe.grad_calls == STEPS * 6,
        "grad_ready called %ld times for %zu tensors x %d steps", probe.grad_calls,
        probe.nparams, STEPS);

  /* Failures, each agreed: every rank returns 1, or 2 where every rank
   * found the same bad input (missing data is bad input: one rank of one). */
  base_config(&c);
  if (rank_ == size_ - 1) {
    c.synthetic = 0;
    c.data_dir = "/nonexistent/gradsync-test";
  }
  rc = gs_train_run(&c, &ranks, NULL);
  CHECK(rc == (size_ == 1 ? 2 : 1), "data missing on rank %d alone: exit %d, expected %d",
        size_ - 1, rc, size_ == 1 ? 2 : 1);

  if (size_ > 1) {
    base_config(&c);
    if (rank_ == 1) c.epochs = 2;
    rc = gs_train_run(&c, &ranks, NULL);
    CHECK(rc == 1, "ranks disagreeing on --epochs: exit %d, expected 1", rc);
  }

  base_config(&c);
  c.sync = "nonesuch";
  rc = gs_train_run(&c, &ranks, NULL);
  /* Refused by gs_train_config_check before any work, as an option. */
  CHECK(rc == 2, "an unknown sync mode: exit %d, expected 2", rc);

  base_config(&c);
  memset(&probe, 0, sizeof probe);
  probe.fail_create_on = size_ - 1;
  c.sync_ops = &allreduce_ops;
  rc = gs_train_run(&c, &ranks, NULL);
  CHECK(rc == 1, "sync set-up failing on rank %d alone: exit %d, expected 1", size_ - 1, rc);

  free(ref);
  gs_comm_destroy(comm);
  gs_finalize();
  if (fails == 0) printf("ok rank %d: train loop checks passed\n", rank_);
  return fails != 0;
}
