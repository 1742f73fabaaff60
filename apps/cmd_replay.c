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
 * Exit status: 0 on success, 2 on bad options, a bad profile or an
 * unwritable GRADSYNC_TIMELINE (all found before any work), 1 on a runtime
 * failure. A rank that fails alone (a profile missing on one node,
 * an allocation) stops every rank: they agree before each policy's
 * iterations (cli.h); a failure during the iterations ends the job.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"

#define VERB "replay"

/* Time scales from a millionth (a profile projected onto a far faster
 * device) to a thousand; an iteration's scaled compute of at most an hour.
 * Beyond these a replay only sleeps for days. */
#define REPLAY_MIN_SCALE 1e-6
#define REPLAY_MAX_SCALE 1e3
#define REPLAY_MAX_ITER_S 3600.0

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync replay --profile FILE --policy P|all [--iters N]\n"
          "                       [--warmup N] [--rounds R] [--time-scale X]\n"
          "                       [--compress [auto:]SPEC] [--json]\n"
          "\nReplays a model profile on every rank: compute by sleeping, gradients\n"
          "averaged for real through the engine. Run it under gradsync run.\n\n"
          "  --profile FILE    model profile (JSON, see profiles/)\n"
          "  --policy P|all    wfbp, single, bucket[:<MB>[,first=<MB>]], mgwfbp,\n"
          "                    optimal, dear, auto, a comma-separated list of them\n"
          "                    or all of them, in turn\n"
          "  --iters N         measured iterations per policy (default 10)\n"
          "  --warmup N        engine warm-up iterations, not measured (default 5)\n"
          "  --rounds R        run the policies R times in turn, odd rounds in\n"
          "                    reverse order (default 1); each round is reported\n"
          "  --time-scale X    multiply every compute time by X, from 1e-6 to 1000\n"
          "                    (default 1); one iteration's scaled compute must\n"
          "                    stay within an hour\n"
          "  --compress SPEC   send every group compressed (topk:0.01, qsgd:16, ...;\n"
          "                    auto:SPEC: each group dense or compressed, as planned);\n"
          "                    the gradients then hold seeded random values, and\n"
          "                    with every policy, dear (which cannot) is left out\n"
          "  --json            one JSON object per policy and line\n"
          "  --help            this text\n"
          "\nGRADSYNC_TIMELINE=FILE writes a Chrome trace per rank (docs/ENGINE.md).\n");
}

/* Runs one policy through gs_engine_replay: returns 0, or 1 on every rank
 * after a failure before the iterations (reported); a failure during them
 * ends the job. */
static int run_policy(cli_rank *cr, const gs_profile *prof, void **bufs, const char *spec,
                      const char *compress, int warmup, int iters, gs_replay_result *r) {
  int in_flight = 0;
  gs_status st = gs_engine_replay_compress(cr->comm, prof, bufs, spec, compress, warmup, iters,
                                           r, &in_flight);
  if (st != GS_OK && in_flight) cli_rank_abort(cr, "%s", gs_last_error());
  if (st != GS_OK) {
    cli_rank_error(cr, "%s", gs_last_error());
    return 1;
  }
  return 0;
}

/* grad_bytes: the profile's whole gradient (what one iteration's messages
 * carry), computed once by the caller. */
static void print_json(const char *spec, const char *compress, const gs_replay_result *r,
                       const gs_profile *prof, double grad_bytes,
                       double scale, int ranks, int nodes, int iters, int warmup,
                       int round, int rounds) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "profile", prof->name);
  cJSON_AddStringToObject(o, "policy", spec);
  cJSON_AddStringToObject(o, "chosen", gs_plan_policy_name(r->chosen));
  cJSON_AddStringToObject(o, "compress", compress ? compress : "none");
  cJSON_AddNumberToObject(o, "compressed_groups", (double)r->compressed_groups);
  cJSON_AddNumberToObject(o, "bytes_per_step", r->bytes_per_step);
  cJSON_AddNumberToObject(o, "ranks", ranks);
  cJSON_AddNumberToObject(o, "nodes", nodes);
  cJSON_AddNumberToObject(o, "iters", iters);
  cJSON_AddNumberToObject(o, "warmup", warmup);
  cJSON_AddNumberToObject(o, "round", round);
  cJSON_AddNumberToObject(o, "rounds", rounds);
  cJSON_AddNumberToObject(o, "time_scale", scale);
  cJSON_AddNumberToObject(o, "ngroups", (double)r->ngroups);
  cJSON_AddNumberToObject(o, "grad_bytes", grad_bytes);
  cJSON_AddNumberToObject(o, "iter_s", r->iter_s);
  cJSON_AddNumberToObject(o, "predicted_s", r->predicted_s);
  cJSON_AddNumberToObject(o, "engine_predicted_s", r->engine_predicted_s);
  cJSON_AddNumberToObject(o, "comm_s", r->comm_s);
  cJSON_AddNumberToObject(o, "exposed_comm_s", r->exposed_s);
  cJSON_AddNumberToObject(o, "hidden_frac", r->hidden_frac);
  cJSON_AddNumberToObject(o, "a", r->cost.ar.a);
  cJSON_AddNumberToObject(o, "b", r->cost.ar.b);
  cJSON_AddBoolToObject(o, "cost_measured", r->cost_measured);
  /* DeAR's halves (what `simulate --rs/--ag` take): fitted from its own
   * messages once it has run (rsag_measured), else half of the all-reduce's
   * fit, or the communicator's model when nothing is measured. */
  cJSON_AddNumberToObject(o, "rs_a", r->cost.rs.a);
  cJSON_AddNumberToObject(o, "rs_b", r->cost.rs.b);
  cJSON_AddNumberToObject(o, "ag_a", r->cost.ag.a);
  cJSON_AddNumberToObject(o, "ag_b", r->cost.ag.b);
  cJSON_AddBoolToObject(o, "rsag_measured", r->rsag_measured);
  char *s = cJSON_PrintUnformatted(o);
  if (s) printf("%s\n", s);
  cJSON_free(s);
  cJSON_Delete(o);
}

/* Seeded values of a gradient's kind for the compressors to select from:
 * the sum of two uniforms in (-1, 1) per element (a triangular
 * distribution, symmetric around 0, no value repeated in bulk), from
 * splitmix64. Each rank gets its own seed, as each worker its own
 * gradient. */
static void replay_fill(void *buf, size_t n, uint64_t seed) {
  float *x = buf;
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = (double)(z >> 40) / (double)(1u << 24), v = (double)(z & 0xffffff) / (1u << 24);
    x[i] = (float)(u + v - 1.0);
  }
}

typedef struct replay_opts {
  const char *profile_path, *policy, *compress; /* compress: NULL when dense */
  /* --policy A,B,...: the policies in turn (pointers into list) */
  char list[512];
  const char *listed[CLI_MAX_POLICIES];
  size_t nlisted;
  int iters, warmup, json, rounds;
  double scale;
} replay_opts;

/* Returns 0, 1 for --help, or 2 after reporting bad options. */
static int parse_opts(int argc, char **argv, replay_opts *o) {
  static const struct option longopts[] = {
      {"profile", required_argument, 0, 'p'}, {"policy", required_argument, 0, 'P'},
      {"iters", required_argument, 0, 'i'},   {"warmup", required_argument, 0, 'w'},
      {"time-scale", required_argument, 0, 's'}, {"json", no_argument, 0, 'j'},
      {"rounds", required_argument, 0, 'r'},  {"compress", required_argument, 0, 'z'},
      {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
  *o = (replay_opts){.iters = 10, .warmup = 5, .rounds = 1, .scale = 1.0};
  optind = 1;
  opterr = 0;
  int c;
  cli_seen seen = {{0}};
  while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
    if (c != '?' && c != ':' && cli_once(VERB, &seen, c, longopts)) return 2;
    switch (c) {
      case 'p': o->profile_path = optarg; break;
      case 'P': o->policy = optarg; break;
      case 'i':
        if (cli_parse_int(optarg, 1, 1000000, &o->iters) != 0) {
          cli_error(VERB, "--iters: expected an integer from 1 to 1000000, got '%s'", optarg);
          return 2;
        }
        break;
      case 'w':
        if (cli_parse_int(optarg, 0, 1000000, &o->warmup) != 0) {
          cli_error(VERB, "--warmup: expected an integer from 0 to 1000000, got '%s'",
                    optarg);
          return 2;
        }
        break;
      case 'r':
        if (cli_parse_int(optarg, 1, 1000, &o->rounds) != 0) {
          cli_error(VERB, "--rounds: expected an integer from 1 to 1000, got '%s'", optarg);
          return 2;
        }
        break;
      case 's':
        if (cli_parse_double(optarg, REPLAY_MIN_SCALE, REPLAY_MAX_SCALE, &o->scale) != 0) {
          cli_error(VERB, "--time-scale: expected a number from %g to %g, got '%s'",
                    REPLAY_MIN_SCALE, REPLAY_MAX_SCALE, optarg);
          return 2;
        }
        break;
      case 'z':
        if (cli_compress_arg("replay", optarg)) return 2;
        o->compress = optarg;
        break;
      case 'j': o->json = 1; break;
      case 'h': usage(stdout); return 1;
      default: return cli_getopt_error(VERB, c, argv, longopts);
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (o->profile_path == NULL || o->policy == NULL) {
    cli_error(VERB, "--profile FILE and --policy P|all are required");
    return 2;
  }
  gs_compress_spec z;
  if (gs_compress_spec_parse(o->compress, &z) != GS_OK) {
    cli_error(VERB, "--compress: %s", gs_last_error());
    return 2;
  }
  if (z.off) o->compress = NULL;
  if (strcmp(o->policy, "all") != 0) {
    if (cli_policy_list(VERB, o->policy, o->list, sizeof o->list, o->listed,
                        CLI_MAX_POLICIES, &o->nlisted) != 0)
      return 2;
    for (size_t k = 0; k < o->nlisted; k++) {
      gs_plan_policy pp;
      gs_plan_policy_parse(o->listed[k], &pp); /* parsed above */
      if (gs_plan_policy_check_compress(&pp, &z) != GS_OK) {
        cli_error(VERB, "--compress: %s", gs_last_error());
        return 2;
      }
    }
  }
  return 0;
}

int cmd_replay(int argc, char **argv) {
  replay_opts o;
  /* The options are every rank's alike: rank 0 alone says what is wrong
   * (each rank said it until 2026-12-06). */
  cli_argv_errors(1);
  int rc = parse_opts(argc, argv, &o);
  cli_argv_errors(0);
  if (rc == 1) return 0; /* --help */
  if (rc != 0 && !cli_under_launcher()) return rc; /* no other rank to tell */
  static const char *all_specs[] = {"wfbp", "single", "bucket", "mgwfbp",
                                    "optimal", "dear", "auto"};
  static const char *all_but_dear[] = {"wfbp", "single", "bucket", "mgwfbp",
                                       "optimal", "auto"};
  const char **specs = all_specs;
  size_t nspecs = sizeof all_specs / sizeof all_specs[0];
  gs_compress_spec z = {.off = 1};
  if (rc == 0 && o.compress) gs_compress_spec_parse(o.compress, &z); /* parsed above */
  if (rc == 0 && !z.off && !z.automatic) {
    /* Every group compressed: dear's reduce-scatter and all-gather cannot
     * be, so among every policy it is left out. */
    specs = all_but_dear;
    nspecs = sizeof all_but_dear / sizeof all_but_dear[0];
  }
  if (rc == 0 && strcmp(o.policy, "all") != 0) {
    specs = o.listed;
    nspecs = o.nlisted;
  }
  cli_rank cr;
  if (cli_rank_init(&cr, VERB, &argc, &argv)) return rc ? rc : 1;
  /* Each rank reads its own copy of the profile (nodes need not share a
   * file system): a missing or broken one on any rank stops them all. */
  gs_profile *prof = NULL;
  char reason[160] = "bad options";
  /* Names reach the table, the JSON lines, the engine's messages and the
   * timeline: cleaned once here, they are valid UTF-8 in all of them. */
  gs_status lst = rc == 0 ? gs_profile_load(o.profile_path, &prof) : GS_OK;
  if (lst == GS_OK && prof) lst = cli_clean_profile(prof);
  if (lst != GS_OK) {
    snprintf(reason, sizeof reason, "%s", gs_last_error());
    rc = lst == GS_ERR_NOMEM ? 1 : 2;
    if (rc == 2) cli_rank_usage_error(&cr, "%s", reason);
    else cli_rank_error(&cr, "%s", reason);
  }
  if (rc == 0) {
    /* The scaled compute of one iteration, bounded so that a replay ends. */
    double compute = prof->forward_s;
    for (size_t i = 0; i < prof->ntensors; i++) compute += prof->tensors[i].backward_s;
    if (!(compute * o.scale <= REPLAY_MAX_ITER_S)) {
      snprintf(reason, sizeof reason, "%s: one iteration's compute is %g s at --time-scale "
               "%g; at most %g s is replayed", o.profile_path, compute * o.scale, o.scale,
               REPLAY_MAX_ITER_S);
      cli_rank_usage_error(&cr, "%s", reason);
      rc = 2;
    }
  }
  /* Every rank writes its own timeline: the path is probed before any
   * work, not discovered unwritable when the engine starts. */
  const char *timeline = getenv("GRADSYNC_TIMELINE");
  if (rc == 0 && timeline && *timeline &&
      cli_check_writable(timeline, "GRADSYNC_TIMELINE") != GS_OK) {
    snprintf(reason, sizeof reason, "%s", gs_last_error());
    cli_rank_usage_error(&cr, "%s", reason);
    rc = 2;
  }
  rc = cli_rank_connect(&cr, 0, rc, reason);
  if (rc) {
    gs_profile_free(prof);
    return rc;
  }
  prof->forward_s *= o.scale;
  for (size_t i = 0; i < prof->ntensors; i++) prof->tensors[i].backward_s *= o.scale;
  gs_comm *comm = cr.comm;
  int rank = cr.rank, ranks = cr.size, nodes = gs_comm_nodes(comm);
  gs_status st = GS_OK;
  void **bufs = gs_calloc(prof->ntensors ? prof->ntensors : 1, sizeof(void *));
  double bytes = 0, bwd = 0;
  for (size_t i = 0; bufs && i < prof->ntensors && st == GS_OK; i++) {
    size_t b = gs_profile_tensor_bytes(prof, i);
    bytes += (double)b;
    bwd += prof->tensors[i].backward_s;
    bufs[i] = gs_calloc(1, b);
    if (bufs[i] == NULL) st = GS_ERR_NOMEM;
    else if (o.compress && prof->tensors[i].dtype == GS_F32)
      replay_fill(bufs[i], prof->tensors[i].numel, (uint64_t)rank * 1000003u + i);
  }
  if (bufs == NULL || st != GS_OK)
    st = gs_error(GS_ERR_NOMEM, "out of memory for the gradients (%.1f MB)", bytes / 1e6);
  rc = cli_agree_status(&cr, st);
  /* The ranks must run the same iterations over tensors of the same count:
   * a different profile on one node would otherwise hang the others. */
  const int64_t shared[] = {(int64_t)prof->ntensors, (int64_t)bytes, o.iters, o.warmup,
                            o.rounds, (int64_t)nspecs};
  static const char *const names[] = {"the profile's tensor count", "the profile's bytes",
                                      "--iters", "--warmup", "--rounds", "the policies"};
  if (rc == 0) rc = cli_agree_equal(&cr, shared, names, 6);
  if (rank == 0 && !o.json && rc == 0) {
    printf("replay %s: %zu tensors, %.1f MB, compute %.1f ms (forward %.1f, backward "
           "%.1f; time scale %g), %d ranks on %d nodes, %d+%d iterations\n",
           prof->name, prof->ntensors, bytes / 1e6, (prof->forward_s + bwd) * 1e3,
           prof->forward_s * 1e3, bwd * 1e3, o.scale, ranks, nodes, o.warmup, o.iters);
    if (o.compress)
      printf("compression: %s (the gradients hold seeded random values)\n", o.compress);
    printf("\n");
    printf("%-5s %-10s %-8s %6s %10s %10s %7s %9s %9s %7s %10s %10s\n", "round",
           "policy", "chosen", "groups", "iter ms", "pred ms", "pred/m", "comm ms",
           "exposed", "hidden", "a (s)", "b (s/B)");
  }
  for (int round = 0; round < o.rounds && rc == 0; round++) {
    for (size_t j = 0; j < nspecs && rc == 0; j++) {
      size_t k = round % 2 ? nspecs - 1 - j : j;
      gs_replay_result r;
      memset(&r, 0, sizeof r);
      rc = run_policy(&cr, prof, bufs, specs[k], o.compress, o.warmup, o.iters, &r);
      if (rc != 0 || rank != 0) continue;
      if (o.json) {
        print_json(specs[k], o.compress ? z.normalised : NULL, &r, prof, bytes, o.scale, ranks, nodes, o.iters, o.warmup, round,
                   o.rounds);
      } else {
        printf("%-5d %-10s %-8s %6zu %10.1f %10.1f %7.3f %9.1f %9.1f %6.0f%% %10.3g "
               "%10.3g\n", round, specs[k], gs_plan_policy_name(r.chosen), r.ngroups,
               r.iter_s * 1e3, r.predicted_s * 1e3, r.predicted_s / r.iter_s,
               r.comm_s * 1e3, r.exposed_s * 1e3, r.hidden_frac * 100, r.cost.ar.a,
               r.cost.ar.b);
      }
      fflush(stdout);
    }
  }
  for (size_t i = 0; bufs && i < prof->ntensors; i++) gs_free(bufs[i]);
  gs_free(bufs);
  gs_profile_free(prof);
  return cli_rank_finish(&cr, rc);
}
