/*
 * gradsync replay: trains a model profile's schedule without its math.
 * Compute is replayed by sleeping (the forward pass, then each tensor's
 * backward time, in reverse order), communication is real: buffers of the
 * profile's sizes go through the engine. Run it under `gradsync run`, e.g.
 *
 *   gradsync run -np 4 --net 1gbit -- gradsync replay \
 *       --profile profiles/resnet50.json --policy all --time-scale 0.5
 *
 * It reports per policy the median iteration time, the planner's predicted
 * time (the scaled profile under the engine's fitted a and b), the time the
 * collectives took and how much of it was hidden behind compute. With
 * --rounds R the policies run R times in turn (odd rounds in reverse
 * order), so that a machine whose speed drifts during the run (a shared VM)
 * does not favour the policies measured first; each round is reported.
 * Exit status: 0 on success, 2 on bad options or a bad profile, 1 on a
 * runtime failure.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gradsync.h"

#define VERB "replay"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync replay --profile FILE --policy P|all [--iters N]\n"
          "                       [--warmup N] [--rounds R] [--time-scale X] [--json]\n"
          "\nReplays a model profile on every rank: compute by sleeping, gradients\n"
          "averaged for real through the engine. Run it under gradsync run.\n\n"
          "  --profile FILE    model profile (JSON, see profiles/)\n"
          "  --policy P|all    wfbp, single, bucket[:<MB>[,first=<MB>]], mgwfbp,\n"
          "                    optimal, dear, auto, or all of them in turn\n"
          "  --iters N         measured iterations per policy (default 10)\n"
          "  --warmup N        engine warm-up iterations, not measured (default 5)\n"
          "  --rounds R        run the policies R times in turn, odd rounds in\n"
          "                    reverse order (default 1); each round is reported\n"
          "  --time-scale X    multiply every compute time by X > 0 (default 1)\n"
          "  --json            one JSON object per policy and line\n"
          "  --help            this text\n"
          "\nGRADSYNC_TIMELINE=FILE writes a Chrome trace per rank (docs/ENGINE.md).\n");
}

static int parse_pos_double(const char *s, double *out) {
  if (s == NULL || *s == '\0') return -1;
  char *end;
  double v = strtod(s, &end);
  if (*end != '\0' || !isfinite(v) || v <= 0) return -1;
  *out = v;
  return 0;
}

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

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct result {
  const char *spec;
  gs_plan_policy_kind chosen;
  size_t ngroups;
  double iter_s, predicted_s, engine_predicted_s, comm_s, exposed_s, hidden_frac;
  gs_plan_cost cost;
  int cost_measured;
} result;

/* Runs one policy: warm-up + iters iterations; fills *r on every rank
 * (iteration time: the slowest rank's median). */
static int run_policy(gs_comm *comm, const gs_profile *prof, void **bufs,
                      const char *spec, int warmup, int iters, result *r) {
  size_t L = prof->ntensors;
  double total_bwd = 0;
  for (size_t i = 0; i < L; i++) total_bwd += prof->tensors[i].backward_s;
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = spec;
  cfg.warmup_iters = warmup;
  cfg.forward_overlap = 1; /* the forward below calls wait_tensor */
  gs_engine *e = NULL;
  if (gs_engine_create(comm, &cfg, &e) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    return 2;
  }
  int ids_ok = 1;
  for (size_t i = 0; i < L && ids_ok; i++)
    ids_ok = gs_engine_register(e, prof->tensors[i].name, bufs[i], prof->tensors[i].numel,
                                prof->tensors[i].dtype, NULL) == GS_OK;
  double *it_s = calloc((size_t)iters + 1, sizeof(double));
  double *comm_s = calloc((size_t)iters + 1, sizeof(double));
  double *exp_s = calloc((size_t)iters + 1, sizeof(double));
  int rc = 0;
  if (!ids_ok || !it_s || !comm_s || !exp_s) {
    cli_error(VERB, "rank %d: %s", gs_comm_rank(comm), gs_last_error());
    rc = 1;
  }
  gs_barrier(comm, GS_ALGO_AUTO);
  gs_engine_stats s0, s1;
  gs_engine_get_stats(e, &s0);
  for (int it = 0; rc == 0 && it < warmup + iters; it++) {
    double t0 = gs_now(), deadline = t0;
    /* Forward, layer by layer: each first waits for its parameters (dear's
     * all-gathers), then computes its share of forward_s. */
    for (size_t i = 0; i < L && rc == 0; i++) {
      double w0 = gs_now();
      if (gs_engine_wait_tensor(e, (int)i) != GS_OK) rc = 1;
      double w1 = gs_now();
      /* A layer starts when its parameters are there: only a wait that
       * blocked moves the schedule (a sleep's overshoot must not). */
      if (w1 - w0 > 20e-6 && deadline < w1) deadline = w1;
      deadline += total_bwd > 0 ? prof->forward_s * prof->tensors[i].backward_s / total_bwd
                                : prof->forward_s / (double)L;
      sleep_until(deadline);
    }
    for (size_t i = L; i-- > 0 && rc == 0;) {
      deadline += prof->tensors[i].backward_s;
      sleep_until(deadline);
      if (gs_engine_grad_ready(e, (int)i) != GS_OK) rc = 1;
    }
    if (rc == 0 && gs_engine_wait(e) != GS_OK) rc = 1;
    double t1 = gs_now();
    gs_engine_get_stats(e, &s1);
    if (it >= warmup) {
      it_s[it - warmup] = t1 - t0;
      comm_s[it - warmup] = s1.comm_s - s0.comm_s;
      exp_s[it - warmup] = s1.wait_s - s0.wait_s;
    }
    s0 = s1;
  }
  if (rc != 0) cli_error(VERB, "rank %d, policy %s: %s", gs_comm_rank(comm), spec,
                         gs_last_error());
  gs_plan *plan = NULL;
  gs_engine_get_stats(e, &s1);
  if (rc == 0 && (gs_engine_get_plan(e, &plan) != GS_OK || plan == NULL)) rc = 1;
  if (rc == 0) {
    r->spec = spec;
    r->chosen = plan->chosen;
    r->ngroups = plan->ngroups;
    r->cost = s1.cost;
    r->cost_measured = s1.cost_measured;
    r->engine_predicted_s = s1.predicted_iter_s;
    gs_status st = plan->chosen == GS_PLAN_DEAR
                       ? gs_plan_predict_dear(prof, &s1.cost, plan->tensors, plan->offsets,
                                              plan->ngroups, &r->predicted_s, NULL, NULL)
                       : gs_plan_predict(prof, &s1.cost, plan->tensors, plan->offsets,
                                         plan->ngroups, &r->predicted_s);
    if (st != GS_OK) r->predicted_s = NAN;
    double exposed = median(exp_s, (size_t)iters);
    r->iter_s = median(it_s, (size_t)iters);
    r->comm_s = median(comm_s, (size_t)iters);
    r->exposed_s = exposed;
    r->hidden_frac = r->comm_s > 0 ? fmax(0.0, 1.0 - exposed / r->comm_s) : 1.0;
  }
  gs_plan_free(plan);
  if (gs_engine_destroy(e) != GS_OK && rc == 0) {
    cli_error(VERB, "%s", gs_last_error());
    rc = 1;
  }
  free(it_s);
  free(comm_s);
  free(exp_s);
  /* The slowest rank's median is the cluster's iteration time; a failure
   * anywhere fails every rank. */
  double mine[2] = {rc == 0 ? r->iter_s : 0, (double)rc}, all[2];
  MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  r->iter_s = all[0];
  return (int)all[1];
}

static void print_json(const result *r, const gs_profile *prof, double scale,
                       int ranks, int nodes, int iters, int warmup, int round,
                       int rounds) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "profile", prof->name);
  cJSON_AddStringToObject(o, "policy", r->spec);
  cJSON_AddStringToObject(o, "chosen", gs_plan_policy_name(r->chosen));
  cJSON_AddNumberToObject(o, "ranks", ranks);
  cJSON_AddNumberToObject(o, "nodes", nodes);
  cJSON_AddNumberToObject(o, "iters", iters);
  cJSON_AddNumberToObject(o, "warmup", warmup);
  cJSON_AddNumberToObject(o, "round", round);
  cJSON_AddNumberToObject(o, "rounds", rounds);
  cJSON_AddNumberToObject(o, "time_scale", scale);
  cJSON_AddNumberToObject(o, "ngroups", (double)r->ngroups);
  cJSON_AddNumberToObject(o, "iter_s", r->iter_s);
  cJSON_AddNumberToObject(o, "predicted_s", r->predicted_s);
  cJSON_AddNumberToObject(o, "engine_predicted_s", r->engine_predicted_s);
  cJSON_AddNumberToObject(o, "comm_s", r->comm_s);
  cJSON_AddNumberToObject(o, "exposed_comm_s", r->exposed_s);
  cJSON_AddNumberToObject(o, "hidden_frac", r->hidden_frac);
  cJSON_AddNumberToObject(o, "a", r->cost.ar.a);
  cJSON_AddNumberToObject(o, "b", r->cost.ar.b);
  cJSON_AddBoolToObject(o, "cost_measured", r->cost_measured);
  char *s = cJSON_PrintUnformatted(o);
  if (s) printf("%s\n", s);
  cJSON_free(s);
  cJSON_Delete(o);
}

int cmd_replay(int argc, char **argv) {
  static const struct option longopts[] = {
      {"profile", required_argument, 0, 'p'}, {"policy", required_argument, 0, 'P'},
      {"iters", required_argument, 0, 'i'},   {"warmup", required_argument, 0, 'w'},
      {"time-scale", required_argument, 0, 's'}, {"json", no_argument, 0, 'j'},
      {"rounds", required_argument, 0, 'r'},
      {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
  const char *profile_path = NULL, *policy = NULL;
  int iters = 10, warmup = 5, json = 0, rounds = 1;
  double scale = 1.0;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
      case 'p': profile_path = optarg; break;
      case 'P': policy = optarg; break;
      case 'i':
        if (cli_parse_int(optarg, 1, 1000000, &iters) != 0) {
          cli_error(VERB, "--iters: expected a positive integer, got '%s'", optarg);
          return 2;
        }
        break;
      case 'w':
        if (cli_parse_int(optarg, 0, 1000000, &warmup) != 0) {
          cli_error(VERB, "--warmup: expected an integer >= 0, got '%s'", optarg);
          return 2;
        }
        break;
      case 'r':
        if (cli_parse_int(optarg, 1, 1000, &rounds) != 0) {
          cli_error(VERB, "--rounds: expected an integer from 1 to 1000, got '%s'", optarg);
          return 2;
        }
        break;
      case 's':
        if (parse_pos_double(optarg, &scale) != 0) {
          cli_error(VERB, "--time-scale: expected a number > 0, got '%s'", optarg);
          return 2;
        }
        break;
      case 'j': json = 1; break;
      case 'h': usage(stdout); return 0;
      case ':':
        cli_error(VERB, "option '%s' needs a value", argv[optind - 1]);
        return 2;
      default:
        cli_error(VERB, "unknown option '%s' (see gradsync replay --help)",
                  argv[optind - 1]);
        return 2;
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (profile_path == NULL || policy == NULL) {
    cli_error(VERB, "--profile FILE and --policy P|all are required (see --help)");
    return 2;
  }
  static const char *all_specs[] = {"wfbp", "single", "bucket", "mgwfbp",
                                    "optimal", "dear", "auto"};
  const char **specs = all_specs;
  size_t nspecs = sizeof all_specs / sizeof all_specs[0];
  if (strcmp(policy, "all") != 0) {
    gs_plan_policy pp;
    if (gs_plan_policy_parse(policy, &pp) != GS_OK) {
      cli_error(VERB, "--policy: %s", gs_last_error());
      return 2;
    }
    specs = (const char **)&policy;
    nspecs = 1;
  }
  gs_profile *prof = NULL;
  if (gs_profile_load(profile_path, &prof) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    return 2;
  }
  prof->forward_s *= scale;
  for (size_t i = 0; i < prof->ntensors; i++) prof->tensors[i].backward_s *= scale;

  if (gs_init(&argc, &argv) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    gs_profile_free(prof);
    return 1;
  }
  gs_comm *comm = NULL;
  if (gs_comm_create(MPI_COMM_WORLD, &comm) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    gs_profile_free(prof);
    gs_finalize();
    return 1;
  }
  int rank = gs_comm_rank(comm), ranks = gs_comm_size(comm), nodes = gs_comm_nodes(comm);
  int rc = 0;
  void **bufs = calloc(prof->ntensors, sizeof(void *));
  double bytes = 0, bwd = 0;
  for (size_t i = 0; bufs && i < prof->ntensors; i++) {
    size_t b = gs_profile_tensor_bytes(prof, i);
    bytes += (double)b;
    bwd += prof->tensors[i].backward_s;
    bufs[i] = calloc(1, b);
    if (bufs[i] == NULL) rc = 1;
  }
  if (bufs == NULL || rc) {
    cli_error(VERB, "rank %d: out of memory for the gradients", rank);
    rc = 1;
  }
  if (rank == 0 && !json && rc == 0) {
    printf("replay %s: %zu tensors, %.1f MB, compute %.1f ms (forward %.1f, backward "
           "%.1f; time scale %g), %d ranks on %d nodes, %d+%d iterations\n\n",
           prof->name, prof->ntensors, bytes / 1e6, (prof->forward_s + bwd) * 1e3,
           prof->forward_s * 1e3, bwd * 1e3, scale, ranks, nodes, warmup, iters);
    printf("%-5s %-10s %-8s %6s %10s %10s %7s %9s %9s %7s %10s %10s\n", "round",
           "policy", "chosen", "groups", "iter ms", "pred ms", "pred/m", "comm ms",
           "exposed", "hidden", "a (s)", "b (s/B)");
  }
  for (int round = 0; round < rounds && rc == 0; round++) {
    for (size_t j = 0; j < nspecs && rc == 0; j++) {
      size_t k = round % 2 ? nspecs - 1 - j : j;
      result r;
      memset(&r, 0, sizeof r);
      rc = run_policy(comm, prof, bufs, specs[k], warmup, iters, &r);
      if (rc != 0 || rank != 0) continue;
      if (json) {
        print_json(&r, prof, scale, ranks, nodes, iters, warmup, round, rounds);
      } else {
        printf("%-5d %-10s %-8s %6zu %10.1f %10.1f %7.3f %9.1f %9.1f %6.0f%% %10.3g "
               "%10.3g\n", round, r.spec, gs_plan_policy_name(r.chosen), r.ngroups,
               r.iter_s * 1e3, r.predicted_s * 1e3, r.predicted_s / r.iter_s,
               r.comm_s * 1e3, r.exposed_s * 1e3, r.hidden_frac * 100, r.cost.ar.a,
               r.cost.ar.b);
      }
      fflush(stdout);
    }
  }
  for (size_t i = 0; bufs && i < prof->ntensors; i++) free(bufs[i]);
  free(bufs);
  gs_profile_free(prof);
  gs_comm_destroy(comm);
  gs_finalize();
  return rc;
}
