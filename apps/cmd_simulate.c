/*
 * gradsync simulate: a discrete-event simulation of training iterations of
 * a model profile on N workers (docs/SIMULATE.md).
 *
 * The plans come from the planner (gs_plan_make_xchg), the costs from the
 * cost module for the cluster described (a preset, two links, or a cost
 * file), and the simulation from src/sim (gradsync/sim.h).
 * Exit status: 0 on success, 2 on bad options or input (a bad profile, an
 * unknown policy or preset, --per-node not dividing --workers, an
 * unwritable --trace), 1 on any other failure.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"
#include "gradsync/sim.h"

#define VERB "simulate"
#define SIM_MAX_WORKERS (1 << 20)
#define SIM_MAX_ITERS 100000

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync simulate --profile FILE --workers N [--per-node K]\n"
          "                         (--net NAME | --intra A,B --inter A,B |\n"
          "                          --ar A,B [--rs A,B] [--ag A,B] |\n"
          "                          --replay FILE[,FILE...] |\n"
          "                          --cost FILE) [--plan-ar A,B] [--policy P|all]\n"
          "                         [--compress [auto:]SPEC [--coding-rate NS]]\n"
          "                         [--iters I]\n"
          "                         [--jitter CV] [--jitter-dist lognormal|normal]\n"
          "                         [--jitter-scope iteration|op]\n"
          "                         [--seed S] [--algo A] [--compute-scale F]\n"
          "                         [--json] [--trace FILE]\n"
          "\nSimulates training iterations event by event on N workers: each\n"
          "worker's forward and backward per tensor from the profile, and the\n"
          "plan's messages on one network stream, each costing what the cost\n"
          "model gives for N workers, K per node (docs/SIMULATE.md).\n\n"
          "  --profile FILE     model profile (JSON, see profiles/)\n"
          "  --workers N        number of workers, 1 to %d\n"
          "  --per-node K       workers per node (default 1); must divide N.\n"
          "                     With K > 1 and N > K the all-reduce is the\n"
          "                     hierarchical one\n"
          "  --net NAME         a named network, the names of `gradsync run\n"
          "                     --net`: 100mbit, 1gbit, 10gbit, 25gbit, 100gbit,\n"
          "                     any rate (e.g. 2500mbit), aliases 1GbE, 10GbE,\n"
          "                     25GbE, 100GbIB; or shm (docs/NETWORK.md)\n"
          "  --intra A,B        latency (s) and time per byte (s/B) inside a node\n"
          "  --inter A,B        the same between nodes (with --intra)\n"
          "  --ar A,B           the all-reduce's measured cost T(M) = A + B*M (s,\n"
          "                     s/B), as the engine fits it and 'gradsync replay\n"
          "                     --json' reports it (a, b); reduce-scatter and\n"
          "                     all-gather are taken as half of it unless given:\n"
          "  --rs A,B           with --ar: DeAR's reduce-scatter of a group of M\n"
          "                     bytes costs A + B*M (replay --json: rs_a, rs_b)\n"
          "  --ag A,B           with --ar: its all-gather (ag_a, ag_b)\n"
          "  --replay FILE,...  costs fitted to the communication that\n"
          "                     'gradsync replay --json' measured on the same\n"
          "                     ranks and nodes (its rows' comm_s, ngroups and\n"
          "                     grad_bytes): the all-reduce's a + b*M from rows\n"
          "                     of every plan but dear, a reduce-scatter plus an\n"
          "                     all-gather from dear's rows (half each; without\n"
          "                     them half of the all-reduce's)\n"
          "  --cost FILE        cost parameters from 'gradsync bench --cost-out',\n"
          "                     for the cluster they were measured on: messages\n"
          "                     take the all-reduce time measured at their size\n"
          "                     (interpolated between the sizes the file holds)\n"
          "                     and plans use its line a + b*M, as the engine's\n"
          "                     do\n"
          "  --plan-ar A,B      plan with the all-reduce cost A + B*M instead (the\n"
          "                     fit an engine planned with: replay --json's a, b;\n"
          "                     reduce-scatter and all-gather half of it); the\n"
          "                     messages still cost what the options above give\n"
          "  --algo A           all-reduce algorithm: auto (default: hier with\n"
          "                     K > 1 and N > K, else the best flat one), ring,\n"
          "                     rd, rabenseifner, hier\n"
          "  --compute-scale F  multiply forward_s and every backward_s by F > 0\n"
          "  --policy P|all     wfbp, single, bucket[:<MB>[,first=<MB>]], mgwfbp,\n"
          "                     optimal, dear, auto, a comma-separated list of them\n"
          "                     or all of them, in turn (default all)\n"
          "  --compress SPEC    send every group compressed (topk:0.01, fp16,\n"
          "                     powersgd:4, ...); auto:SPEC lets each group choose\n"
          "                     (coding time measured on this machine at the\n"
          "                     profile's sizes, which differs from run to run)\n"
          "  --coding-rate NS   with --compress: the compressor's coding time in ns\n"
          "                     per element (encode and decode), the same at every\n"
          "                     message size, instead of measuring it: the device\n"
          "                     simulated, and the same output on every run (as\n"
          "                     gradsync plan's)\n"
          "  --iters I          iterations simulated (default 1 without jitter,\n"
          "                     20 with)\n"
          "  --jitter CV        coefficient of variation of the workers' compute\n"
          "                     times (default 0, up to 10)\n"
          "  --jitter-dist D    lognormal (default) or normal (clamped at 0)\n"
          "  --jitter-scope S   iteration (default: one factor per worker and\n"
          "                     iteration, a slow worker) or op (one per\n"
          "                     forward/backward of each tensor)\n"
          "  --seed S           seed of the jitter (default 1)\n"
          "  --json             one JSON object per policy and line\n"
          "  --trace FILE       Chrome trace (chrome://tracing, Perfetto) of the\n"
          "                     last simulated iteration: worker 0, the straggler\n"
          "                     and the network. With several policies, one file\n"
          "                     per policy: FILE's name with .POLICY before its\n"
          "                     extension\n"
          "  --help             this text\n",
          SIM_MAX_WORKERS);
}

/* "A,B": a latency (seconds, 0 to 3600) and a time per byte (0 to 1), for
 * the option called name; *have is set. Returns 0, or 2 after the message. */
static int parse_pair(const char *name, const char *s, double *a, double *b, int *have) {
  const char *comma = strchr(s, ',');
  char first[64];
  int ok = comma != NULL && comma - s < 64;
  if (ok) {
    memcpy(first, s, (size_t)(comma - s));
    first[comma - s] = '\0';
    ok = cli_parse_double(first, 0, 3600, a) == 0 && cli_parse_double(comma + 1, 0, 1, b) == 0;
  }
  if (!ok) {
    cli_error(VERB, "--%s: expected A,B (seconds 0-3600, seconds per byte 0-1), got '%s'",
              name, s);
    return 2;
  }
  *have = 1;
  return 0;
}

/* The trace path of one policy among several: "t.json" -> "t.wfbp.json". */
static void trace_path(char *out, size_t cap, const char *path, const char *policy,
                       int several) {
  if (!several) {
    snprintf(out, cap, "%s", path);
    return;
  }
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  if (dot == NULL || (slash && dot < slash) || dot == (slash ? slash + 1 : path))
    snprintf(out, cap, "%s.%s", path, policy);
  else
    snprintf(out, cap, "%.*s.%s%s", (int)(dot - path), path, policy, dot);
}

typedef struct sim_opts {
  const char *profile, *policy, *net, *cost_file, *compress, *trace, *algo, *replay;
  int workers, per_node, iters, json, have_intra, have_inter, have_ar, have_rs, have_ag;
  int have_plan_ar;
  double intra_a, intra_b, inter_a, inter_b, ar_a, ar_b, rs_a, rs_b, ag_a, ag_b;
  double plan_a, plan_b;
  double jitter, scale;
  double coding_ns; /* --coding-rate; < 0: measured */
  gs_cost_coding coding; /* the coding time used with --compress */
  gs_sim_jitter dist;
  gs_sim_jitter_scope scope;
  uint64_t seed;
} sim_opts;

static int parse_opts(int argc, char **argv, sim_opts *o) {
  static const struct option longs[] = {
      {"profile", required_argument, 0, 'p'},  {"workers", required_argument, 0, 'w'},
      {"per-node", required_argument, 0, 'k'}, {"net", required_argument, 0, 'n'},
      {"intra", required_argument, 0, 'I'},    {"inter", required_argument, 0, 'E'},
      {"cost", required_argument, 0, 'c'},     {"policy", required_argument, 0, 'P'},
      {"compress", required_argument, 0, 'z'}, {"iters", required_argument, 0, 'i'},
      {"jitter", required_argument, 0, 'j'},   {"jitter-dist", required_argument, 0, 'd'},
      {"seed", required_argument, 0, 's'},     {"json", no_argument, 0, 'J'},
      {"jitter-scope", required_argument, 0, 'S'},
      {"algo", required_argument, 0, 'A'},     {"compute-scale", required_argument, 0, 'x'},
      {"trace", required_argument, 0, 't'},    {"help", no_argument, 0, 'h'},
      {"ar", required_argument, 0, 'a'},       {"rs", required_argument, 0, 'R'},
      {"ag", required_argument, 0, 'G'},       {"replay", required_argument, 0, 'Y'},
      {"plan-ar", required_argument, 0, 'L'},  {"coding-rate", required_argument, 0, 'r'},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->coding_ns = -1;
  o->policy = "all";
  o->scale = 1.0;
  o->per_node = 1;
  o->seed = 1;
  optind = 1;
  opterr = 0;
  cli_seen seen = {{0}};
  int c;
  long v;
  while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
    if (c != '?' && c != ':' && cli_once(VERB, &seen, c, longs)) return 2;
    switch (c) {
      case 'p': o->profile = optarg; break;
      case 'w':
        if (cli_parse_int(optarg, 1, SIM_MAX_WORKERS, &o->workers) != 0) {
          cli_error(VERB, "--workers: expected an integer from 1 to %d, got '%s'",
                    SIM_MAX_WORKERS, optarg);
          return 2;
        }
        break;
      case 'k':
        if (cli_parse_int(optarg, 1, SIM_MAX_WORKERS, &o->per_node) != 0) {
          cli_error(VERB, "--per-node: expected an integer from 1 to %d, got '%s'",
                    SIM_MAX_WORKERS, optarg);
          return 2;
        }
        break;
      case 'n': o->net = optarg; break;
      case 'I':
        if (parse_pair("intra", optarg, &o->intra_a, &o->intra_b, &o->have_intra) != 0) return 2;
        break;
      case 'E':
        if (parse_pair("inter", optarg, &o->inter_a, &o->inter_b, &o->have_inter) != 0) return 2;
        break;
      case 'a':
        if (parse_pair("ar", optarg, &o->ar_a, &o->ar_b, &o->have_ar) != 0) return 2;
        break;
      case 'R':
        if (parse_pair("rs", optarg, &o->rs_a, &o->rs_b, &o->have_rs) != 0) return 2;
        break;
      case 'G':
        if (parse_pair("ag", optarg, &o->ag_a, &o->ag_b, &o->have_ag) != 0) return 2;
        break;
      case 'L':
        if (parse_pair("plan-ar", optarg, &o->plan_a, &o->plan_b, &o->have_plan_ar) != 0)
          return 2;
        break;
      case 'c': o->cost_file = optarg; break;
      case 'r':
        if (cli_coding_rate_arg(VERB, optarg, &o->coding_ns)) return 2;
        break;
      case 'Y': o->replay = optarg; break;
      case 'P': o->policy = optarg; break;
      case 'z':
        if (cli_compress_arg("simulate", optarg)) return 2;
        o->compress = optarg;
        break;
      case 'i':
        if (cli_parse_int(optarg, 1, SIM_MAX_ITERS, &o->iters) != 0) {
          cli_error(VERB, "--iters: expected an integer from 1 to %d, got '%s'",
                    SIM_MAX_ITERS, optarg);
          return 2;
        }
        break;
      case 'j':
        if (cli_parse_double(optarg, 0, 10, &o->jitter) != 0) {
          cli_error(VERB, "--jitter: expected a coefficient of variation from 0 to 10, "
                    "got '%s'", optarg);
          return 2;
        }
        break;
      case 'd':
        if (strcmp(optarg, "lognormal") == 0) {
          o->dist = GS_SIM_JITTER_LOGNORMAL;
        } else if (strcmp(optarg, "normal") == 0) {
          o->dist = GS_SIM_JITTER_NORMAL;
        } else {
          cli_error(VERB, "--jitter-dist: expected lognormal or normal, got '%s'", optarg);
          return 2;
        }
        break;
      case 'S':
        if (strcmp(optarg, "iteration") == 0) {
          o->scope = GS_SIM_SCOPE_ITERATION;
        } else if (strcmp(optarg, "op") == 0) {
          o->scope = GS_SIM_SCOPE_OPERATION;
        } else {
          cli_error(VERB, "--jitter-scope: expected iteration or op, got '%s'", optarg);
          return 2;
        }
        break;
      case 's':
        if (cli_parse_long(optarg, 0, 0x7fffffffffffffffL, &v) != 0) {
          cli_error(VERB, "--seed: expected a non-negative integer, got '%s'", optarg);
          return 2;
        }
        o->seed = (uint64_t)v;
        break;
      case 'A': o->algo = optarg; break;
      case 'x':
        if (cli_parse_double(optarg, 0, 1e6, &o->scale) != 0 || o->scale == 0) {
          cli_error(VERB, "--compute-scale: expected a number above 0 and up to 1e6, "
                    "got '%s'", optarg);
          return 2;
        }
        break;
      case 'J': o->json = 1; break;
      case 't':
        /* (an empty name passed the write check as "." and became
         * ".wfbp" and the like there, one policy's after the work) */
        if (!*optarg) {
          cli_error(VERB, "--trace needs a file name");
          return 2;
        }
        o->trace = optarg;
        break;
      case 'h': usage(stdout); return -1;
      default: return cli_getopt_error(VERB, c, argv, longs);
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (o->profile == NULL) {
    cli_error(VERB, "--profile FILE is required");
    return 2;
  }
  if (o->workers == 0) {
    cli_error(VERB, "--workers N is required");
    return 2;
  }
  if (o->workers % o->per_node != 0) {
    cli_error(VERB, "--per-node %d must divide --workers %d", o->per_node, o->workers);
    return 2;
  }
  int nets = (o->net != NULL) + (o->have_intra || o->have_inter) + (o->cost_file != NULL) +
             o->have_ar + (o->replay != NULL);
  if (nets != 1) {
    cli_error(VERB, nets == 0 ? "a network is required: --net NAME, --intra A,B "
                                "--inter A,B, --cost FILE, --ar A,B or --replay FILE"
                              : "give one of --net, --intra/--inter, --cost, --ar and "
                                "--replay");
    return 2;
  }
  if ((o->have_ar || o->replay) && (o->algo || o->compress)) {
    cli_error(VERB, "--%s gives the all-reduce's cost itself: --%s does not apply",
              o->have_ar ? "ar" : "replay", o->algo ? "algo" : "compress");
    return 2;
  }
  if (o->coding_ns >= 0 && !o->compress) {
    cli_error(VERB, "--coding-rate applies only with --compress");
    return 2;
  }
  if ((o->have_rs || o->have_ag) && !o->have_ar) {
    cli_error(VERB, "--%s refines the measured cost of --ar A,B: give --ar too",
              o->have_rs ? "rs" : "ag");
    return 2;
  }
  if (o->have_intra != o->have_inter) {
    cli_error(VERB, "--intra and --inter go together");
    return 2;
  }
  if (o->iters == 0) o->iters = o->jitter > 0 ? 20 : 1;
  return 0;
}

/* The cost parameters of the cluster described by the options. */
static int make_params(const sim_opts *o, gs_cost_topo topo, gs_cost_params *params) {
  if (o->net) {
    if (gs_cost_preset(o->net, params) != GS_OK) {
      cli_error(VERB, "--net: %s", gs_last_error());
      return 2;
    }
    return 0;
  }
  if (o->cost_file) {
    gs_status st = gs_cost_load(o->cost_file, topo, params);
    if (st != GS_OK) {
      if (st == GS_ERR_NOMEM) {
        cli_fail(VERB, "--cost: %s", gs_last_error());
        return 1;
      }
      cli_error(VERB, "--cost: %s", gs_last_error());
      return 2;
    }
    return 0;
  }
  memset(params, 0, sizeof *params);
  params->alpha = o->inter_a;
  params->beta = o->inter_b;
  params->alpha_local = o->intra_a;
  params->beta_local = o->intra_b;
  return 0;
}

/* ---- --replay: costs fitted to replayed iterations ---------------------- */

/* Observations of one kind (all-reduce plans, or dear's), grown as read. */
typedef struct obs {
  double *g, *bytes, *secs;
  size_t n, cap;
} obs;

static int obs_add(obs *b, double g, double bytes, double secs) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    double *ng = gs_realloc(b->g, cap * sizeof *ng);
    if (ng) b->g = ng;
    double *nb = gs_realloc(b->bytes, cap * sizeof *nb);
    if (nb) b->bytes = nb;
    double *ns = gs_realloc(b->secs, cap * sizeof *ns);
    if (ns) b->secs = ns;
    if (!ng || !nb || !ns) return -1;
    b->cap = cap;
  }
  b->g[b->n] = g;
  b->bytes[b->n] = bytes;
  b->secs[b->n++] = secs;
  return 0;
}

static void obs_free(obs *b) {
  gs_free(b->g);
  gs_free(b->bytes);
  gs_free(b->secs);
}

/* The last profile row_bytes looked up by name (a file's rows share one). */
typedef struct named_bytes {
  char name[256];
  double bytes;
} named_bytes;

/* A row's gradient bytes: its grad_bytes, or (rows of replays before that
 * field) the profile of its name beside --profile, loaded once for a run of
 * rows of that name (*last). 0 when neither. */
static double row_bytes(const cJSON *row, const char *profile_path, named_bytes *last) {
  const cJSON *gb = cJSON_GetObjectItem(row, "grad_bytes");
  if (cJSON_IsNumber(gb)) return gb->valuedouble;
  const cJSON *name = cJSON_GetObjectItem(row, "profile");
  if (!cJSON_IsString(name) || strchr(name->valuestring, '/') != NULL) return 0;
  if (strcmp(last->name, name->valuestring) == 0) return last->bytes;
  const char *slash = strrchr(profile_path, '/');
  int dir = slash ? (int)(slash - profile_path + 1) : 0;
  char path[4096];
  if (snprintf(path, sizeof path, "%.*s%s.json", dir, profile_path, name->valuestring) >=
      (int)sizeof path)
    return 0;
  gs_profile *p = NULL;
  if (gs_profile_load(path, &p) != GS_OK) return 0;
  double bytes = cli_profile_bytes(p);
  gs_profile_free(p);
  if (strlen(name->valuestring) < sizeof last->name) {
    strcpy(last->name, name->valuestring);
    last->bytes = bytes;
  }
  return bytes;
}

/* The bounds of a replay row's fields: counts are whole numbers from 1;
 * times finite seconds from 0 to a bound no iteration's communication
 * nears (past it the fit's weights 1/time^2 vanish); bytes above 0 and at
 * most 2^50 (a petabyte of gradients). */
#define REPLAY_MAX_COUNT 1e9
#define REPLAY_MAX_SECONDS 1e6
#define REPLAY_MAX_BYTES 1125899906842624.0

/* Checks a replay row's numeric field key (present and a number): whole
 * (a count from 1), a time, or bytes. 0, or 2 after naming the file, the
 * line, the field and what it accepts. */
static int replay_field(const char *path, size_t lineno, const cJSON *row, const char *key,
                        char kind) {
  const cJSON *x = cJSON_GetObjectItem(row, key);
  double v = x->valuedouble;
  int ok = kind == 'c'   ? v >= 1 && v <= REPLAY_MAX_COUNT && v == floor(v)
           : kind == 't' ? v >= 0 && v <= REPLAY_MAX_SECONDS
                         : v > 0 && v <= REPLAY_MAX_BYTES;
  if (ok) return 0;
  char *text = cJSON_PrintUnformatted(x);
  cli_error(VERB, "--replay: %s:%zu: field %s is %s: expected %s", path, lineno, key,
            text ? text : "?",
            kind == 'c'   ? "a whole number from 1 to 1e9"
            : kind == 't' ? "a time in seconds from 0 to 1e6"
                          : "bytes above 0 and at most 2^50");
  cJSON_free(text);
  return 2;
}

/* Rows read but not fitted: of another cluster shape, of a compressed plan
 * (replay --compress: its groups moved the compressor's payload and spent
 * its coding time, not grad_bytes through dense collectives), or of no
 * communication. */
typedef struct replay_left {
  size_t other, compressed, idle;
} replay_left;

/* A row of a plan that sent some group compressed: compressed_groups > 0,
 * or, in a row without that field, a compress spec other than "none". */
static int row_compressed(const cJSON *row) {
  const cJSON *cg = cJSON_GetObjectItem(row, "compressed_groups");
  if (cJSON_IsNumber(cg)) return cg->valuedouble > 0;
  const cJSON *z = cJSON_GetObjectItem(row, "compress");
  return cJSON_IsString(z) && strcmp(z->valuestring, "none") != 0;
}

/* Reads the rows of one replay file measured on `ranks` ranks and `nodes`
 * nodes into ar (plans other than dear) and rsag (dear's); *left counts the
 * rows not fitted. Returns 0, 1 (out of memory) or 2 (bad file). */
static int read_replay(const char *path, const char *profile_path, int ranks, int nodes,
                       obs *ar, obs *rsag, replay_left *left) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    cli_error(VERB, "--replay: cannot open '%s': %s", path, strerror(errno));
    return 2;
  }
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  int rc = 0;
  named_bytes last = {"", 0};
  while (rc == 0 && getline(&line, &cap, f) != -1) {
    lineno++;
    if (line[strspn(line, " \t\r\n")] == '\0') continue;
    cJSON *row = cJSON_Parse(line);
    if (row == NULL) {
      cli_error(VERB, "--replay: %s:%zu is not JSON", path, lineno);
      rc = 2;
      break;
    }
    if (cJSON_GetObjectItem(row, "stamp") == NULL) { /* the bench stamp */
      const cJSON *r = cJSON_GetObjectItem(row, "ranks"), *nd = cJSON_GetObjectItem(row, "nodes"),
                  *g = cJSON_GetObjectItem(row, "ngroups"), *c = cJSON_GetObjectItem(row, "comm_s"),
                  *ch = cJSON_GetObjectItem(row, "chosen");
      const cJSON *gb = cJSON_GetObjectItem(row, "grad_bytes");
      double bytes = 0;
      if (!cJSON_IsNumber(r) || !cJSON_IsNumber(nd) || !cJSON_IsNumber(g) ||
          !cJSON_IsNumber(c) || !cJSON_IsString(ch) || (gb && !cJSON_IsNumber(gb))) {
        cli_error(VERB, "--replay: %s:%zu is not a row of 'gradsync replay --json' "
                  "(ranks, nodes, ngroups, comm_s, chosen; grad_bytes a number)", path,
                  lineno);
        rc = 2;
      } else if (replay_field(path, lineno, row, "ranks", 'c') ||
                 replay_field(path, lineno, row, "nodes", 'c') ||
                 replay_field(path, lineno, row, "ngroups", 'c') ||
                 replay_field(path, lineno, row, "comm_s", 't') ||
                 (gb && replay_field(path, lineno, row, "grad_bytes", 'b'))) {
        rc = 2;
      } else if ((int)r->valuedouble != ranks || (int)nd->valuedouble != nodes) {
        left->other++;
      } else if (row_compressed(row)) {
        left->compressed++;
      } else if (c->valuedouble == 0) {
        left->idle++;
      } else if ((bytes = row_bytes(row, profile_path, &last)) <= 0) {
        cli_error(VERB, "--replay: %s:%zu has no grad_bytes, and no profile of its name "
                  "is beside --profile", path, lineno);
        rc = 2;
      } else if (obs_add(strcmp(ch->valuestring, "dear") == 0 ? rsag : ar,
                         g->valuedouble, bytes, c->valuedouble) != 0) {
        rc = 1;
      }
    }
    cJSON_Delete(row);
  }
  free(line);
  fclose(f);
  if (rc == 1) cli_fail(VERB, "--replay: out of memory reading %s", path);
  return rc;
}

/* The costs of --replay FILE[,FILE...]: *nar and *nrsag are the rows fitted,
 * *ncompressed the rows of compressed plans left out. */
static int replay_cost(const sim_opts *o, gs_plan_cost *cost, size_t *nar, size_t *nrsag,
                       size_t *ncompressed) {
  obs ar = {0}, rsag = {0};
  replay_left left = {0, 0, 0};
  int rc = 0, nodes = o->workers / o->per_node;
  char *list = strdup(o->replay), *save = NULL;
  if (list == NULL) rc = 1;
  for (char *p = list ? strtok_r(list, ",", &save) : NULL; p && rc == 0;
       p = strtok_r(NULL, ",", &save))
    rc = read_replay(p, o->profile, o->workers, nodes, &ar, &rsag, &left);
  free(list);
  double a = 0, b = 0, ra = 0, rb = 0;
  if (rc == 0 && ar.n == 0) {
    cli_error(VERB, "--replay %s: no row of a plan other than dear measured on %d ranks "
              "on %d nodes (%zu rows of other shapes, %zu of dear, %zu of a compressed "
              "plan, %zu without communication)", o->replay, o->workers, nodes, left.other,
              rsag.n, left.compressed, left.idle);
    rc = 2;
  }
  if (rc == 0 && (gs_cost_fit_totals(ar.g, ar.bytes, ar.secs, ar.n, &a, &b) != GS_OK ||
                  gs_plan_cost_from_ab(a, b, cost) != GS_OK)) {
    cli_error(VERB, "--replay %s: the fit of %zu rows: %s", o->replay, ar.n, gs_last_error());
    rc = 2;
  }
  if (rc == 0 && rsag.n > 0) {
    if (gs_cost_fit_totals(rsag.g, rsag.bytes, rsag.secs, rsag.n, &ra, &rb) != GS_OK) {
      cli_error(VERB, "--replay %s: the fit of dear's %zu rows: %s", o->replay, rsag.n,
                gs_last_error());
      rc = 2;
    } else {
      gs_cost_curve_affine(ra / 2, rb / 2, &cost->rs);
      gs_cost_curve_affine(ra / 2, rb / 2, &cost->ag);
    }
  }
  *nar = ar.n;
  *nrsag = rsag.n;
  *ncompressed = left.compressed;
  obs_free(&ar);
  obs_free(&rsag);
  return rc;
}

static void print_json(const gs_profile *prof, const sim_opts *o, const char *spec,
                       const gs_plan *pl, const gs_sim_result *r, double run_s,
                       const gs_plan_cost *cost, const gs_plan_cost *plan_cost) {
  cJSON *j = cJSON_CreateObject();
  if (j == NULL) return;
  cJSON_AddStringToObject(j, "profile", prof->name);
  cJSON_AddStringToObject(j, "policy", gs_plan_policy_name(pl->policy.kind));
  cJSON_AddStringToObject(j, "spec", spec);
  if (pl->policy.kind == GS_PLAN_AUTO)
    cJSON_AddStringToObject(j, "chosen", gs_plan_policy_name(pl->chosen));
  cJSON_AddNumberToObject(j, "workers", o->workers);
  cJSON_AddNumberToObject(j, "per_node", o->per_node);
  cJSON_AddStringToObject(j, "network", o->net         ? o->net
                                         : o->cost_file ? o->cost_file
                                         : o->have_ar   ? "ar"
                                         : o->replay    ? "replay"
                                                        : "intra/inter");
  char assumes[1024];
  if (o->net && gs_net_describe(o->net, assumes, sizeof assumes) == GS_OK)
    cJSON_AddStringToObject(j, "network_assumes", assumes);
  if (o->compress) {
    cJSON_AddStringToObject(j, "compress", o->compress);
    /* The rate at the largest size measured (the given one with
     * --coding-rate), and when measured each size's time. */
    cli_json_add(j, "coding_ns_per_elem", cli_coding_ns(&o->coding), "%.17g");
    cJSON_AddBoolToObject(j, "coding_rate_measured", o->coding_ns < 0);
    if (o->coding_ns < 0) {
      cJSON *pts = cJSON_AddArrayToObject(j, "coding_points");
      for (int i = 0; pts && i < o->coding.npoints; i++) {
        cJSON *pt = cJSON_CreateArray();
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(o->coding.elems[i]));
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(o->coding.secs[i]));
        cJSON_AddItemToArray(pts, pt);
      }
    }
  }
  cJSON_AddNumberToObject(j, "iters", r->iters);
  cli_json_add(j, "compute_scale", o->scale, "%.17g");
  cli_json_add(j, "jitter_cv", o->jitter, "%.17g");
  cJSON_AddStringToObject(j, "jitter_dist",
                          o->dist == GS_SIM_JITTER_NORMAL ? "normal" : "lognormal");
  cJSON_AddStringToObject(j, "jitter_scope",
                          o->scope == GS_SIM_SCOPE_OPERATION ? "op" : "iteration");
  cJSON_AddNumberToObject(j, "seed", (double)o->seed);
  cJSON_AddNumberToObject(j, "groups", (double)pl->ngroups);
  cJSON_AddNumberToObject(j, "messages", (double)r->messages);
  cJSON_AddNumberToObject(j, "bytes", r->bytes);
  cli_json_add(j, "iter_s", r->iter_s, "%.17g");
  cli_json_add(j, "iter_min_s", r->iter_min_s, "%.17g");
  cli_json_add(j, "iter_max_s", r->iter_max_s, "%.17g");
  cli_json_add(j, "compute_s", r->compute_s, "%.17g");
  cli_json_add(j, "straggler_s", r->straggler_s, "%.17g");
  cli_json_add(j, "exposed_comm_s", r->exposed_comm_s, "%.17g");
  cli_json_add(j, "comm_s", r->comm_s, "%.17g");
  cli_json_add(j, "efficiency", r->efficiency, "%.17g");
  cli_json_add(j, "predicted_iter_s", pl->predicted_iter_s, "%.17g");
  cJSON_AddNumberToObject(j, "events", (double)r->events);
  /* The affine costs, whatever gave them (--net, --replay, ...); the
   * measured points that price the messages; the costs planned with. */
  cJSON_AddNumberToObject(j, "price_points", cost->ar.npoints);
  cli_json_add(j, "plan_ar_a", plan_cost->ar.a, "%.17g");
  cli_json_add(j, "plan_ar_b", plan_cost->ar.b, "%.17g");
  cli_json_add(j, "ar_a", cost->ar.a, "%.17g");
  cli_json_add(j, "ar_b", cost->ar.b, "%.17g");
  cli_json_add(j, "rs_a", cost->rs.a, "%.17g");
  cli_json_add(j, "rs_b", cost->rs.b, "%.17g");
  cli_json_add(j, "ag_a", cost->ag.a, "%.17g");
  cli_json_add(j, "ag_b", cost->ag.b, "%.17g");
  cJSON_AddNumberToObject(j, "straggler", r->straggler);
  cli_json_add(j, "sim_wall_s", run_s, "%.6g");
  cli_print_json(stdout, j);
}

int cmd_simulate(int argc, char **argv) {
  sim_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc < 0) return 0; /* --help */
  if (rc != 0) return rc;

  static const char *all_specs[] = {"wfbp", "single", "bucket", "mgwfbp",
                                    "optimal", "dear", "auto"};
  /* --policy A,B,...: those in turn, as replay runs them. */
  char list[512];
  const char *listed[CLI_MAX_POLICIES];
  const char **specs = all_specs;
  size_t nspecs = sizeof all_specs / sizeof all_specs[0];
  if (strcmp(o.policy, "all") != 0) {
    if (cli_policy_list(VERB, o.policy, list, sizeof list, listed, CLI_MAX_POLICIES,
                        &nspecs) != 0)
      return 2;
    specs = listed;
  }
  if (o.trace) {
    for (size_t k = 0; k < nspecs; k++) {
      char path[4096];
      trace_path(path, sizeof path, o.trace, specs[k], nspecs > 1);
      if (cli_check_writable(path, "--trace") != GS_OK) {
        cli_error(VERB, "%s", gs_last_error());
        return 2;
      }
    }
  }

  gs_cost_topo topo = {o.workers, o.workers / o.per_node};
  gs_cost_params params;
  if ((rc = make_params(&o, topo, &params)) != 0) return rc;
  /* The communicator's choice (gs_cost_best_allreduce) unless --algo names
   * one. Until 2026-12-07 nodes of several workers always took the
   * hierarchical algorithm, where plan and the communicator take the
   * fastest: the two disagreed on one cluster (ResNet-50 on 64 workers, 8
   * a node, on 100GbIB: 27% apart at compute x 0.05). */
  gs_algo algo = GS_ALGO_AUTO;
  if (o.algo && strcmp(o.algo, "auto") != 0 && gs_algo_parse(o.algo, &algo) != GS_OK) {
    cli_error(VERB, "--algo: %s", gs_last_error());
    return 2;
  }
  gs_plan_cost cost;
  size_t replay_ar = 0, replay_rsag = 0, replay_compressed = 0;
  if (o.have_ar) {
    if (gs_plan_cost_from_ab(o.ar_a, o.ar_b, &cost) != GS_OK) {
      cli_error(VERB, "--ar: %s", gs_last_error());
      return 2;
    }
    /* parse_pair has checked both are finite and >= 0. */
    if (o.have_rs) gs_cost_curve_affine(o.rs_a, o.rs_b, &cost.rs);
    if (o.have_ag) gs_cost_curve_affine(o.ag_a, o.ag_b, &cost.ag);
  } else if (o.replay) {
    rc = replay_cost(&o, &cost, &replay_ar, &replay_rsag, &replay_compressed);
    if (rc != 0) return rc;
  } else if (gs_plan_cost_measured(&params, topo, algo, &cost) != GS_OK) {
    /* An algorithm without a cost, or a cost file's point the loader let by. */
    if (o.cost_file)
      cli_error(VERB, "--cost %s (--algo %s): %s", o.cost_file, gs_algo_name(algo),
                gs_last_error());
    else
      cli_error(VERB, "--algo %s: %s", gs_algo_name(algo), gs_last_error());
    return 2;
  }
  /* One worker has no all-reduce: whatever the measured cost, none is paid
   * (as the cost module prices one rank). */
  if (o.workers == 1) gs_plan_cost_from_ab(0, 0, &cost);
  /* Plans are made as the engine makes them: with a line a + b*M (its
   * default), or with the fit of --plan-ar. Messages cost `cost`. */
  gs_plan_cost plan_cost = cost;
  plan_cost.ar.npoints = plan_cost.rs.npoints = plan_cost.ag.npoints = 0;
  if (o.have_plan_ar) gs_plan_cost_from_ab(o.plan_a, o.plan_b, &plan_cost);

  /* The compression spec: "auto:SPEC" lets each group choose. */
  gs_compress_spec z;
  if (gs_compress_spec_parse(o.compress, &z) != GS_OK) {
    cli_error(VERB, "--compress: %s", gs_last_error());
    return 2;
  }
  if (o.compress) o.compress = z.normalised; /* reported as "topk:0.01", whatever the case */
  if (nspecs == 1) {
    gs_plan_policy pp;
    if (gs_plan_policy_parse(specs[0], &pp) == GS_OK &&
        gs_plan_policy_check_compress(&pp, &z) != GS_OK) {
      cli_error(VERB, "--compress: %s", gs_last_error());
      return 2;
    }
  }
  gs_compressor *zc = NULL;
  gs_plan_xchg xchg = {0};
  if (!z.off && gs_compressor_create(z.compressor, &zc) != GS_OK) {
    cli_fail(VERB, "--compress: %s", gs_last_error());
    return 1;
  }

  gs_profile *prof = NULL;
  gs_status st = gs_profile_load(o.profile, &prof);
  if (st == GS_OK) st = cli_clean_profile(prof);
  if (st != GS_OK) {
    gs_profile_free(prof);
    gs_compressor_destroy(zc);
    if (st == GS_ERR_NOMEM) {
      cli_fail(VERB, "%s", gs_last_error());
      return 1;
    }
    cli_error(VERB, "%s", gs_last_error());
    return 2;
  }
  /* The coding time given (--coding-rate, as plan's: one rate), or
   * measured here at the profile's sizes: a measurement differs from run
   * to run. */
  if (zc && (cli_coding(zc, o.coding_ns, prof, 1, &o.coding) != GS_OK ||
             gs_plan_xchg_from_compressor(zc, &o.coding, &params, topo, NULL, !z.automatic,
                                          &xchg) != GS_OK)) {
    cli_fail(VERB, "--compress %s: %s", o.compress, gs_last_error());
    gs_compressor_destroy(zc);
    gs_profile_free(prof);
    return 1;
  }

  /* The profile is ours to change: scale its compute times. */
  prof->forward_s *= o.scale;
  for (size_t i = 0; i < prof->ntensors; i++) prof->tensors[i].backward_s *= o.scale;
  gs_sim_config cfg = {.workers = o.workers, .iters = o.iters, .jitter_cv = o.jitter,
                       .jitter = o.dist, .scope = o.scope, .seed = o.seed, .trace = o.trace != NULL};
  if (!o.json) {
    double bytes = 0, bwd = 0;
    for (size_t i = 0; i < prof->ntensors; i++) {
      bytes += (double)gs_profile_tensor_bytes(prof, i);
      bwd += prof->tensors[i].backward_s;
    }
    printf("profile %s: %zu tensors, %.1f MB, forward %.1f ms, backward %.1f ms%s\n",
           prof->name, prof->ntensors, bytes / 1e6, prof->forward_s * 1e3, bwd * 1e3,
           o.scale != 1.0 ? " (times scaled)" : "");
    /* The algorithm: none where the costs were measured as they ran; auto's
     * choice for a message of all the gradients. */
    char algo_label[64];
    if (o.have_ar || o.replay)
      snprintf(algo_label, sizeof algo_label, "as measured");
    else if (algo == GS_ALGO_AUTO && o.workers > 1)
      snprintf(algo_label, sizeof algo_label, "auto: %s for all %.1f MB",
               gs_algo_name(gs_cost_best_allreduce(&params, topo, bytes, NULL)), bytes / 1e6);
    else
      snprintf(algo_label, sizeof algo_label, "%s", gs_algo_name(algo));
    printf("cluster: %d workers, %d per node, %s (%s); all-reduce %.3e s + %.3e s/B\n",
           o.workers, o.per_node,
           o.net ? o.net : o.cost_file ? o.cost_file : o.have_ar ? "--ar"
           : o.replay ? "--replay" : "--intra/--inter",
           algo_label, cost.ar.a, cost.ar.b);
    char assumes[1024];
    if (o.net && gs_net_describe(o.net, assumes, sizeof assumes) == GS_OK)
      printf("network %s\n", assumes);
    if (cost.ar.npoints > 0 && o.net)
      printf("messages priced at the fastest algorithm for their size, as the communicator "
             "chooses (%d sizes, %.0f B to %.0f B)\n", cost.ar.npoints, cost.ar.bytes[0],
             cost.ar.bytes[cost.ar.npoints - 1]);
    else if (cost.ar.npoints > 0)
      printf("messages priced at the all-reduce times measured at %d sizes, %.0f B to "
             "%.0f B\n", cost.ar.npoints, cost.ar.bytes[0], cost.ar.bytes[cost.ar.npoints - 1]);
    if (o.have_plan_ar)
      printf("planned with --plan-ar: all-reduce %.3e s + %.3e s/B\n", plan_cost.ar.a,
             plan_cost.ar.b);
    if (o.replay)
      printf("costs fitted to %zu replayed plans' communication (%s)%s\n", replay_ar + replay_rsag,
             o.replay, replay_rsag ? "" : "; no dear rows: reduce-scatter and all-gather are "
             "halves of the all-reduce");
    if (replay_compressed)
      printf("%zu row%s of a compressed plan left out (its groups moved the compressor's "
             "payload, not their bytes through all-reduces)\n", replay_compressed,
             replay_compressed == 1 ? "" : "s");
    if (o.have_rs || o.have_ag || replay_rsag)
      printf("reduce-scatter %.3e s + %.3e s/B, all-gather %.3e s + %.3e s/B\n",
             cost.rs.a, cost.rs.b, cost.ag.a, cost.ag.b);
    char coding[192] = "";
    if (o.compress && o.coding_ns >= 0)
      snprintf(coding, sizeof coding, ", compression %s (coding %.3g ns/element, "
               "--coding-rate)", o.compress, cli_coding_ns(&o.coding));
    else if (o.compress && o.coding.npoints > 0)
      snprintf(coding, sizeof coding, ", compression %s (coding %.3g ns/element at %.0f "
               "elements to %.3g at %.0f, measured on this machine)", o.compress,
               o.coding.secs[0] / o.coding.elems[0] * 1e9, o.coding.elems[0],
               cli_coding_ns(&o.coding), o.coding.elems[o.coding.npoints - 1]);
    printf("%d iteration%s, jitter CV %g (%s, per %s), seed %llu%s\n\n", o.iters,
           o.iters == 1 ? "" : "s", o.jitter,
           o.dist == GS_SIM_JITTER_NORMAL ? "normal" : "lognormal",
           o.scope == GS_SIM_SCOPE_OPERATION ? "operation" : "worker and iteration",
           (unsigned long long)o.seed, coding);
    printf("%-18s %6s %5s %10s %9s %9s %9s %7s %9s %10s\n", "policy", "groups", "msgs",
           "iter (ms)", "comp (ms)", "strag(ms)", "expo (ms)", "eff", "MB/iter",
           "model (ms)");
  }
  for (size_t k = 0; k < nspecs && rc == 0; k++) {
    gs_plan_policy pk;
    gs_plan *pl = NULL;
    st = gs_plan_policy_parse(specs[k], &pk);
    if (st == GS_OK && gs_plan_policy_check_compress(&pk, &z) != GS_OK) {
      /* With every group compressed, DeAR has no plan: among all the
       * policies it is left out (asked for alone, it was an error above). */
      if (!o.json)
        printf("%-18s (left out: its reduce-scatter and all-gather cannot be sent "
               "compressed)\n", specs[k]);
      continue;
    }
    if (st == GS_OK) st = gs_plan_make_xchg(prof, &plan_cost, &xchg, &pk, 1, &pl);
    if (st != GS_OK) {
      rc = st == GS_ERR_INVALID_ARG || st == GS_ERR_PARSE || st == GS_ERR_UNSUPPORTED ? 2 : 1;
      if (rc == 2)
        cli_error(VERB, "%s: %s", specs[k], gs_last_error());
      else
        cli_fail(VERB, "%s: %s", specs[k], gs_last_error());
      break;
    }
    gs_sim_result r;
    double t0 = gs_now();
    st = gs_sim_run(prof, &cost, &xchg, pl, &cfg, &r);
    double run_s = gs_now() - t0;
    if (st != GS_OK) {
      cli_fail(VERB, "%s: %s", specs[k], gs_last_error());
      gs_plan_free(pl);
      rc = 1;
      break;
    }
    if (o.json) {
      print_json(prof, &o, specs[k], pl, &r, run_s, &cost, &plan_cost);
    } else {
      char name[64];
      if (pl->policy.kind == GS_PLAN_AUTO)
        snprintf(name, sizeof name, "auto (%s)", gs_plan_policy_name(pl->chosen));
      else
        snprintf(name, sizeof name, "%s", specs[k]);
      printf("%-18s %6zu %5zu %10.3f %9.3f %9.3f %9.3f %6.1f%% %9.1f %10.3f\n", name,
             pl->ngroups, r.messages, r.iter_s * 1e3, r.compute_s * 1e3,
             r.straggler_s * 1e3, r.exposed_comm_s * 1e3, r.efficiency * 100,
             r.bytes / 1e6, pl->predicted_iter_s * 1e3);
    }
    if (o.trace) {
      char path[4096];
      trace_path(path, sizeof path, o.trace, specs[k], nspecs > 1);
      char label[128];
      snprintf(label, sizeof label, "%s, %d workers", specs[k], o.workers);
      if (gs_sim_write_trace(&r, prof, label, path) != GS_OK) {
        cli_fail(VERB, "--trace: %s", gs_last_error());
        rc = 1;
      }
    }
    gs_sim_result_free(&r);
    gs_plan_free(pl);
  }
  if (rc == 0 && !o.json)
    printf("\neff = T_compute / T_iter (T_compute: one worker's forward + backward, no "
           "communication);\nstrag: slowest worker's compute - T_compute; expo: "
           "communication not hidden;\nmodel: the planner's prediction (no jitter).\n");
  gs_profile_free(prof);
  gs_compressor_destroy(zc);
  return rc;
}
