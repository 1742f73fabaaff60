/* Replaying a profile's schedule through the engine (engine.h,
 * gs_engine_replay): compute by sleeping, communication for real. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"
#include "gradsync/engine.h"
#include "gs_internal.h"

/* Sleeps until an absolute CLOCK_MONOTONIC time (the clock of gs_now), so
 * that errors of one sleep do not accumulate over the next. */
static void sleep_until(double t) {
  struct timespec ts;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
  }
}

/* Every rank learns whether any failed before the iterations; the failed
 * rank's message travels to the others. */
static gs_status agree(gs_comm *comm, gs_status st) {
  gs_agreement ag;
  const char *why = st != GS_OK ? gs_last_error() : NULL;
  char reason[200] = "";
  if (why) snprintf(reason, sizeof reason, "%s", why);
  gs_status ast = gs_agree(comm, gs_comm_mpi(comm), "replay", st, reason, NULL, 0, &ag);
  if (ast != GS_OK) return ast;
  gs_status out = GS_OK;
  if (ag.failed > 0) {
    out = st != GS_OK ? st : GS_ERR_STATE;
    if (st == GS_OK)
      gs_error(GS_ERR_STATE, "rank %d failed: %s", ag.first, ag.votes[ag.first].message);
    else
      gs_error(st, "%s", reason);
  }
  gs_agreement_free(&ag);
  return out;
}

/* One iteration: forward layer by layer (each first waits for its
 * parameters, then computes its share of forward_s), backward tensor by
 * tensor, the engine's wait. */
static gs_status iteration(gs_engine *e, const gs_profile *prof, double total_bwd) {
  size_t L = prof->ntensors;
  double deadline = gs_now();
  for (size_t i = 0; i < L; i++) {
    double w0 = gs_now();
    gs_status st = gs_engine_wait_tensor(e, (int)i);
    if (st != GS_OK) return st;
    double w1 = gs_now();
    /* A layer starts when its parameters are there: only a wait that
     * blocked moves the schedule (a sleep's overshoot must not). */
    if (w1 - w0 > 20e-6 && deadline < w1) deadline = w1;
    deadline += total_bwd > 0 ? prof->forward_s * prof->tensors[i].backward_s / total_bwd
                              : prof->forward_s / (double)L;
    sleep_until(deadline);
  }
  for (size_t i = L; i-- > 0;) {
    deadline += prof->tensors[i].backward_s;
    sleep_until(deadline);
    gs_status st = gs_engine_grad_ready(e, (int)i);
    if (st != GS_OK) return st;
  }
  return gs_engine_wait(e);
}

gs_status gs_engine_replay(gs_comm *comm, const gs_profile *prof, void **bufs,
                           const char *policy, int warmup, int iters, gs_replay_result *out,
                           int *in_flight) {
  return gs_engine_replay_compress(comm, prof, bufs, policy, NULL, warmup, iters, out,
                                   in_flight);
}

gs_status gs_engine_replay_compress(gs_comm *comm, const gs_profile *prof, void **bufs,
                                    const char *policy, const char *compress, int warmup,
                                    int iters, gs_replay_result *out, int *in_flight) {
  *in_flight = 0;
  memset(out, 0, sizeof *out);
  if (iters < 1 || warmup < 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_replay: %d iterations after %d warm-up",
                    iters, warmup);
  size_t L = prof->ntensors;
  double total_bwd = 0;
  for (size_t i = 0; i < L; i++) total_bwd += prof->tensors[i].backward_s;
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = policy;
  cfg.compress = compress;
  cfg.warmup_iters = warmup;
  cfg.forward_overlap = 1; /* the forward calls wait_tensor */
  gs_engine *e = NULL;
  gs_status st = gs_engine_create(comm, &cfg, &e);
  for (size_t i = 0; i < L && st == GS_OK; i++)
    st = gs_engine_register(e, prof->tensors[i].name, bufs[i], prof->tensors[i].numel,
                            prof->tensors[i].dtype, NULL);
  double *it_s = gs_calloc((size_t)iters, sizeof(double));
  double *comm_s = gs_calloc((size_t)iters, sizeof(double));
  double *exp_s = gs_calloc((size_t)iters, sizeof(double));
  if (st == GS_OK && (!it_s || !comm_s || !exp_s))
    st = gs_error(GS_ERR_NOMEM, "out of memory for %d iterations' times", iters);
  /* Creating and registering are local: the engine has issued nothing yet. */
  st = agree(comm, st);
  if (st == GS_OK) st = gs_barrier(comm, GS_ALGO_AUTO);
  gs_engine_stats s0, s1;
  uint64_t bytes0 = 0;
  if (st == GS_OK) gs_engine_get_stats(e, &s0);
  for (int it = 0; st == GS_OK && it < warmup + iters; it++) {
    if (it == warmup) bytes0 = s0.bytes_sent;
    double t0 = gs_now();
    st = iteration(e, prof, total_bwd);
    if (st != GS_OK) {
      char why[600];
      snprintf(why, sizeof why, "%s", gs_last_error());
      st = gs_error(st, "policy %s, iteration %d: %s", policy, it, why);
      *in_flight = 1;
      break;
    }
    double t1 = gs_now();
    gs_engine_get_stats(e, &s1);
    if (it >= warmup) {
      it_s[it - warmup] = t1 - t0;
      comm_s[it - warmup] = s1.comm_s - s0.comm_s;
      exp_s[it - warmup] = s1.wait_s - s0.wait_s;
    }
    s0 = s1;
  }
  gs_plan *plan = NULL;
  if (st == GS_OK) {
    gs_engine_get_stats(e, &s1);
    st = gs_engine_get_plan(e, &plan);
    if (st == GS_OK && plan == NULL)
      st = gs_error(GS_ERR_STATE, "policy %s: the engine has no plan after %d iterations",
                    policy, warmup + iters);
  }
  if (st == GS_OK) {
    out->chosen = plan->chosen;
    out->ngroups = plan->ngroups;
    out->cost = s1.cost;
    out->cost_measured = s1.cost_measured;
    out->rsag_measured = s1.rsag_measured;
    out->engine_predicted_s = s1.predicted_iter_s;
    out->bytes_per_step = (double)(s1.bytes_sent - bytes0) / iters;
    out->compressed_groups = s1.compressed_groups;
    /* Compressed groups are priced by their exchange and coding as the
     * engine prices them when it plans (its compressor's payload and
     * measured coding rate); until 2026-12-06 a replay with --compress
     * printed no prediction (nan). */
    gs_plan_xchg x;
    gs_status pst = plan->chosen == GS_PLAN_DEAR
                        ? gs_plan_predict_dear(prof, &s1.cost, plan->tensors, plan->offsets,
                                               plan->ngroups, &out->predicted_s, NULL, NULL)
                        : eng_xchg_costs(e, &x);
    if (pst == GS_OK && plan->chosen != GS_PLAN_DEAR)
      pst = gs_plan_predict_xchg(prof, &s1.cost, &x, plan->tensors, plan->offsets,
                                 plan->ngroups, plan->group_xchg, &out->predicted_s);
    if (pst != GS_OK) out->predicted_s = NAN;
    out->iter_s = gs__median(it_s, (size_t)iters);
    out->comm_s = gs__median(comm_s, (size_t)iters);
    out->exposed_s = gs__median(exp_s, (size_t)iters);
    out->hidden_frac = out->comm_s > 0 ? fmax(0.0, 1.0 - out->exposed_s / out->comm_s) : 1.0;
  }
  gs_plan_free(plan);
  gs_free(it_s);
  gs_free(comm_s);
  gs_free(exp_s);
  if (*in_flight) {
    gs_engine_destroy(e); /* the caller ends the job */
    return st;
  }
  /* Every iteration's collectives are done (gs_engine_wait returned on
   * every rank, and dear's all-gathers are finished by destroy without new
   * collectives of the others'), so destroying issues nothing that the
   * others would not; its own failure (a timeline) is agreed. */
  gs_status dst = e ? gs_engine_destroy(e) : GS_OK;
  if (st == GS_OK) st = dst;
  st = agree(comm, st);
  /* The slowest rank's median is the cluster's iteration time. */
  if (st == GS_OK)
    st = gs_allreduce(comm, GS_IN_PLACE, &out->iter_s, 1, GS_F64, GS_MAX, GS_ALGO_MPI);
  return st;
}
