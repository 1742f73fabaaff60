/*
 * gradsync plan: the merge plan of a model profile under a communication
 * cost, and its predicted iteration time (docs/PLANNING.md).
 *
 * The cost comes either directly as T(M) = a + b*M (--a, --b) or from a
 * network preset through the cost module (--net, --workers, --algo).
 * Exit status: 0 on success, 2 on bad options, a bad profile or a profile
 * and cost the planner refuses (times that would overflow, tensors beyond
 * 2^53 bytes), 1 on any other failure (memory, a bug).
 */
#include <cjson/cJSON.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "accuracy_table.h"
#include "cli.h"
#include "gradsync.h"

#define VERB "plan"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync plan --profile FILE --policy P|all\n"
          "                     (--a SECONDS --b SECONDS_PER_BYTE |\n"
          "                      --net PRESET --workers N [--nodes N] [--algo A])\n"
          "                     [--compute-scale F] [--compress [auto:]SPEC]\n"
          "                     [--json] [--verbose]\n"
          "       gradsync plan --search --profile FILE --net NAME\n"
          "                     (--workers N | --max-workers N) [--per-node K]\n"
          "                     [--target throughput|efficiency:E]\n"
          "                     [--max-global-batch N [--max-batch B]]\n"
          "                     [--search-compress SPEC,SPEC...|none]\n"
          "                     [--accuracy-table FILE[,FILE...]]\n"
          "                     [--max-accuracy-loss POINTS] [--ps-sync MODE] [--json]\n"
          "\nGroups a model's gradient tensors into messages and predicts the\n"
          "iteration time: messages go one at a time in backward order, each\n"
          "starting when its last tensor is ready and the previous one is done.\n\n"
          "  --profile FILE     model profile (JSON, see profiles/)\n"
          "  --policy P|all     wfbp, single, bucket[:<MB>[,first=<MB>]], mgwfbp,\n"
          "                     optimal, dear, auto, or all of them (default all)\n"
          "  --a SECONDS        all-reduce start-up cost a of T(M) = a + b*M\n"
          "  --b SEC_PER_BYTE   all-reduce cost per byte b (with --a; reduce-\n"
          "                     scatter and all-gather are each taken as half)\n"
          "  --net NAME         derive costs from a named network, the names of\n"
          "                     `gradsync run --net`: 100mbit, 1gbit, 10gbit, 25gbit,\n"
          "                     100gbit or any rate; aliases 1GbE, 10GbE, 25GbE,\n"
          "                     100GbIB; shm (docs/NETWORK.md)\n"
          "  --cost FILE        derive costs from a file of `gradsync bench --cost-out`,\n"
          "                     measured on the same --workers and --nodes\n"
          "  --workers N        number of workers (ranks); required with --net\n"
          "  --nodes N          nodes the workers are on (default: one per node)\n"
          "  --algo A           all-reduce algorithm for --net: auto (default),\n"
          "                     ring, rd, rabenseifner, hier\n"
          "  --search           recommend workers and policy for --target: every\n"
          "                     policy planned at K, 2K, 4K, ... up to --max-workers\n"
          "  --target T         throughput (default) or efficiency:E, the most\n"
          "                     workers whose weak-scaling efficiency is >= E\n"
          "  --max-global-batch N  with --search: each count at the largest\n"
          "                     per-worker batch within N samples in all, compute\n"
          "                     scaled linearly from the profile's batch_size\n"
          "  --max-batch B      with --max-global-batch: at most B per worker\n"
          "  --search-compress L  with --search: the compressors weighed at the\n"
          "                     recommended count (specs as --compress takes them,\n"
          "                     auto:SPEC for a choice per group), or none; default\n"
          "                     every spec of bench/results/compress_table.md. One is\n"
          "                     recommended only when predicted 10%% faster than dense\n"
          "  --accuracy-table F with --search: measured accuracy of compression\n"
          "                     (JSON lines of bench/train/compress_sweep.sh), quoted\n"
          "                     beside each compressor; default the source tree's\n"
          "                     bench/results/compress_table{,_4epochs}.jsonl\n"
          "  --max-accuracy-loss P|any  with --search: weigh only compressors\n"
          "                     whose measured test accuracy is at most P points\n"
          "                     below dense's in every table read (unmeasured ones\n"
          "                     are left out); default 1; any: weigh speed only\n"
          "  --ps-sync MODE     with --search: the parameter servers' protocol\n"
          "                     priced against the all-reduce, as `gradsync train\n"
          "                     --sync` takes it: bsp (default), asp, ssp:S,\n"
          "                     switch:offline:F, switch:online[:F]; asynchronous\n"
          "                     steps overlap one worker's exchange with the\n"
          "                     others' compute (docs/PLANNING.md)\n"
          "  --compute-scale F  multiply forward_s and every backward_s by F > 0\n"
          "                     (project a profile onto a faster or slower device)\n"
          "  --compress SPEC    send every group compressed (a compressor spec:\n"
          "                     topk:0.01, gtopk:0.001, fp16, powersgd:4, ...)\n"
          "                     through its own exchange; auto:SPEC lets each\n"
          "                     group stay dense or go compressed through any\n"
          "                     exchange, whichever is predicted fastest.\n"
          "                     The coding time is measured here at the\n"
          "                     profile's sizes; with --a/--b\n"
          "                     it needs --workers\n"
          "  --coding-rate NS   the compressors' coding time in ns per element\n"
          "                     (encode and decode), the same at every size,\n"
          "                     instead of measuring it on this machine: the\n"
          "                     device the plan is for\n"
          "  --json             one JSON object per policy and line\n"
          "  --verbose          also print each plan's groups\n"
          "  --help             this text\n");
}

/* The accepted ranges of the cost options: a start-up cost up to an hour
 * and a cost per byte up to a second (1 B/s) are beyond any network; a
 * compute scale up to 1e6 projects a profile onto any device. Larger
 * values only make the predictions overflow. */
#define PLAN_MAX_A 3600.0
#define PLAN_MAX_B 1.0
#define PLAN_MAX_SCALE 1e6

/* The accuracy a recommended compressor may cost by default, in points of
 * test accuracy below dense's in the measured tables (the worst of them):
 * without it the search weighs speed alone and recommends the cheapest
 * exchange (randomk:0.01, 5.7 points below dense after 4 epochs). */
#define SEARCH_MAX_LOSS 1.0

typedef struct plan_row {
  const char *spec;
  gs_plan *plan;
} plan_row;

/* x / y, or NaN (null in JSON, "-" in text) where y is 0: a profile and
 * cost whose iteration takes no time has no speedup. */
static double ratio(double x, double y) { return y > 0 ? x / y : NAN; }

/* The exit status of a failed gs_plan_make: the profile and cost the user
 * gave are refused (2), or the planner itself failed (1); printed in the
 * matching voice. */
static int plan_failure(const char *spec, gs_status st) {
  if (st == GS_ERR_INVALID_ARG || st == GS_ERR_PARSE) {
    cli_error(VERB, "%s: %s", spec, gs_last_error());
    return 2;
  }
  cli_fail(VERB, "%s: %s", spec, gs_last_error());
  return 1;
}

static void print_groups(FILE *f, const gs_plan *pl) {
  fprintf(f, "  %s groups (launch order%s):", gs_plan_policy_name(pl->policy.kind),
          pl->group_xchg ? "; :exchange where compressed" : "");
  for (size_t g = 0; g < pl->ngroups; g++) {
    size_t lo = pl->tensors[pl->offsets[g]], hi = pl->tensors[pl->offsets[g + 1] - 1];
    const char *z = pl->group_xchg && pl->group_xchg[g] >= 0
                        ? gs_xchg_name((gs_xchg)pl->group_xchg[g]) : NULL;
    if (lo == hi)
      fprintf(f, " [%zu%s%s]", lo, z ? ":" : "", z ? z : "");
    else
      fprintf(f, " [%zu-%zu%s%s]", lo, hi, z ? ":" : "", z ? z : "");
  }
  fprintf(f, "\n");
}

static char *row_json(const plan_row *r, const gs_profile *prof,
                      const gs_plan_cost *cost, int workers, double scale, double wfbp_s,
                      double single_s) {
  const gs_plan *pl = r->plan;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "profile", prof->name);
  cJSON_AddStringToObject(o, "policy", gs_plan_policy_name(pl->policy.kind));
  cJSON_AddStringToObject(o, "spec", r->spec);
  if (pl->policy.kind == GS_PLAN_AUTO)
    cJSON_AddStringToObject(o, "chosen", gs_plan_policy_name(pl->chosen));
  if (workers > 0) cJSON_AddNumberToObject(o, "workers", workers);
  cJSON_AddNumberToObject(o, "compute_scale", scale);
  cJSON_AddNumberToObject(o, "a", cost->ar.a);
  cJSON_AddNumberToObject(o, "b", cost->ar.b);
  /* With points, each message is priced on the curve through them, not on
   * a + b M: a and b then describe its ends only. */
  cJSON_AddNumberToObject(o, "price_points", cost->ar.npoints);
  cJSON_AddNumberToObject(o, "ngroups", (double)pl->ngroups);
  cJSON *groups = cJSON_AddArrayToObject(o, "groups");
  for (size_t g = 0; g < pl->ngroups; g++) {
    cJSON *grp = cJSON_CreateArray();
    for (size_t k = pl->offsets[g]; k < pl->offsets[g + 1]; k++)
      cJSON_AddItemToArray(grp, cJSON_CreateNumber((double)pl->tensors[k]));
    cJSON_AddItemToArray(groups, grp);
  }
  if (pl->group_xchg) {
    /* Per group, in launch order: "dense" or the compressed exchange. */
    cJSON *gx = cJSON_AddArrayToObject(o, "group_exchange");
    for (size_t g = 0; g < pl->ngroups; g++)
      cJSON_AddItemToArray(gx, cJSON_CreateString(
          pl->group_xchg[g] >= 0 ? gs_xchg_name((gs_xchg)pl->group_xchg[g]) : "dense"));
  }
  cJSON_AddNumberToObject(o, "predicted_iter_s", pl->predicted_iter_s);
  cli_json_add(o, "speedup_vs_wfbp", ratio(wfbp_s, pl->predicted_iter_s), "%.17g");
  cli_json_add(o, "speedup_vs_single", ratio(single_s, pl->predicted_iter_s), "%.17g");
  if (pl->chosen == GS_PLAN_DEAR) {
    cJSON_AddNumberToObject(o, "rs_a", cost->rs.a);
    cJSON_AddNumberToObject(o, "rs_b", cost->rs.b);
    cJSON_AddNumberToObject(o, "ag_a", cost->ag.a);
    cJSON_AddNumberToObject(o, "ag_b", cost->ag.b);
    cJSON_AddNumberToObject(o, "dear_forward_end_s", pl->dear_forward_end_s);
    cJSON_AddNumberToObject(o, "dear_ag_wait_s", pl->dear_ag_wait_s);
  }
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

/* ---- plan --search ------------------------------------------------------------ */

/* The compressors weighed by default: every spec of the measured table
 * (bench/results/compress_table.md, error feedback on as the engine's
 * default), so that each recommendation can quote its measured accuracy. */
static const char *const search_default_compress[] = {
    "topk:0.01", "mstopk:0.01", "gtopk:0.01", "dgc:0.01", "sidco:0.01", "randomk:0.01",
    "qsgd:16",   "terngrad",    "efsignsgd",  "powersgd:4", "fp16",     "bf16"};
#define SEARCH_MAX_COMPRESS 32
#define SEARCH_MAX_TABLES 4
#define SEARCH_RATE_TRIES 5

typedef struct search_opts {
  const char *profile_path, *net, *algo_name;
  int workers, max_workers, per_node, max_global_batch, max_batch, json;
  double target_eff, scale; /* scale: --compute-scale */
  const char *compress_list; /* --search-compress; NULL: the defaults */
  const char *tables;        /* --accuracy-table; NULL: the defaults */
  double max_loss;           /* --max-accuracy-loss in points; < 0: none */
  double coding_s;           /* --coding-rate in s per element; < 0: measured */
  const char *ps_sync;       /* --ps-sync, canonical ("bsp" by default) */
  double ps_async;           /* its asynchronous share (gs_ps_sync_async_share) */
} search_opts;

/* The default accuracy tables: the source tree's (a compile-time path),
 * else beside the executable or in ../bench/results from it (a build
 * directory inside the tree). Writes up to max paths; returns how many. */
static int search_default_tables(char paths[][1024], int max) {
  static const char *const names[] = {"compress_table.jsonl", "compress_table_4epochs.jsonl"};
  char dirs[3][1024] = {{0}};
  int nd = 0;
#ifdef GS_BENCH_RESULTS_DIR
  snprintf(dirs[nd++], sizeof dirs[0], "%s", GS_BENCH_RESULTS_DIR);
#endif
  char self[900];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(dirs[nd++], sizeof dirs[0], "%s", self);
    snprintf(dirs[nd++], sizeof dirs[0], "%s/../bench/results", self);
  }
  for (int d = 0; d < nd; d++) {
    int n = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0] && n < max; k++) {
      snprintf(paths[n], 1024, "%.900s/%.80s", dirs[d], names[k]); /* (cut, then not found) */
      if (access(paths[n], R_OK) == 0) n++;
    }
    if (n > 0) return n;
  }
  return 0;
}

/* "after 1 epoch of at most 120 steps, cnn, 4 ranks, 100mbit" */
static void acc_describe(const acc_table *t, char *buf, size_t n) {
  char steps[48] = "";
  if (t->max_steps > 0) snprintf(steps, sizeof steps, " of at most %d steps", t->max_steps);
  snprintf(buf, n, "after %d epoch%s%s, %s, %d ranks, %s", t->epochs,
           t->epochs == 1 ? "" : "s", steps, t->model[0] ? t->model : "?", t->ranks,
           strcmp(t->net, "none") == 0 ? "unshaped links" : t->net);
}

/* The base name of a path, for short citations. */
static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* The one-line accuracy warning of a compressor spec: every table's
 * measured test accuracy against dense's, or that none is measured. */
static void acc_warning(const acc_table *tabs, int ntabs, const char *spec, char *buf,
                        size_t n) {
  const char *plain = strncmp(spec, "auto:", 5) == 0 ? spec + 5 : spec;
  size_t used = 0;
  buf[0] = '\0';
  for (int k = 0; k < ntabs; k++) {
    const acc_entry *e = acc_table_find(&tabs[k], plain);
    if (e == NULL || tabs[k].dense < 0) continue;
    char how[160];
    acc_describe(&tabs[k], how, sizeof how);
    int w = snprintf(buf + used, n - used, "%s%.2f%% against dense %.2f%% (%+.2f points) %s "
                     "(%s)", used ? "; " : "", e->accuracy * 100, tabs[k].dense * 100,
                     (e->accuracy - tabs[k].dense) * 100, how, base_name(tabs[k].path));
    if (w < 0 || (size_t)w >= n - used) break;
    used += (size_t)w;
  }
  if (used == 0)
    snprintf(buf, n, "%s", ntabs == 0 ? "no accuracy table was found: its accuracy cost is "
                                        "not measured"
                                      : "not in the accuracy tables read: its accuracy cost "
                                        "is not measured");
}

/* gradsync plan --search: the search is the library's (gs_search_run,
 * gradsync/search.h); this reads the network, the profile and the
 * compressors (whose coding rate it measures here), and prints the points,
 * the recommendation and why, as a table or as JSON. */
static int plan_search(const search_opts *so) {
  gs_cost_params params;
  gs_search_config cfg = {.net = &params, .workers = so->workers,
                          .max_workers = so->max_workers, .per_node = so->per_node,
                          .target_efficiency = so->target_eff,
                          .max_global_batch = so->max_global_batch,
                          .max_worker_batch = so->max_batch,
                          .ps_async = so->ps_async,
                          .compress_min_gain = GS_SEARCH_COMPRESS_MIN_GAIN};
  const char *net = so->net;
  int per_node = so->per_node, max_global_batch = so->max_global_batch;
  int max_batch = so->max_batch, json = so->json;
  double target_eff = so->target_eff;
  if (gs_cost_preset(net, &params) != GS_OK) {
    cli_error(VERB, "--net: %s", gs_last_error());
    return 2;
  }
  if (gs_algo_parse(so->algo_name, &cfg.algo) != GS_OK) {
    cli_error(VERB, "--algo: %s", gs_last_error());
    return 2;
  }

  /* The candidates: each spec checked here, so that a bad one is refused
   * before any work. */
  char list[1024];
  const char *specs[SEARCH_MAX_COMPRESS];
  int nspecs = 0;
  if (so->compress_list == NULL) {
    for (size_t k = 0; k < sizeof search_default_compress / sizeof *search_default_compress;
         k++)
      specs[nspecs++] = search_default_compress[k];
  } else if (strcmp(so->compress_list, "none") != 0) {
    if (snprintf(list, sizeof list, "%s", so->compress_list) >= (int)sizeof list) {
      cli_error(VERB, "--search-compress: the list is longer than %zu characters",
                sizeof list - 1);
      return 2;
    }
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      if (nspecs == SEARCH_MAX_COMPRESS) {
        cli_error(VERB, "--search-compress: more than %d specs", SEARCH_MAX_COMPRESS);
        return 2;
      }
      specs[nspecs++] = tok;
    }
    if (nspecs == 0 || so->compress_list[0] == ',' ||
        so->compress_list[strlen(so->compress_list) - 1] == ',' ||
        strstr(so->compress_list, ",,")) {
      cli_error(VERB, "--search-compress: expected SPEC[,SPEC...] or none, got '%s'",
                so->compress_list);
      return 2;
    }
  }
  gs_search_compressor cands[SEARCH_MAX_COMPRESS];
  for (int k = 0; k < nspecs; k++) {
    gs_compress_spec z;
    if (gs_compress_spec_parse(specs[k], &z) != GS_OK) {
      cli_error(VERB, "--search-compress: %s", gs_last_error());
      return 2;
    }
    if (z.off) {
      cli_error(VERB, "--search-compress: '%s' is dense, which the search always weighs; "
                "give 'none' alone for no compression", specs[k]);
      return 2;
    }
    cands[k] = (gs_search_compressor){.spec = specs[k]};
  }

  /* The accuracy tables: those named (each must load), else the defaults
   * found (none found is said, never made up). */
  acc_table tabs[SEARCH_MAX_TABLES];
  int ntabs = 0, rc = 0;
  char err[1200];
  if (so->tables) {
    char tl[4096];
    if (snprintf(tl, sizeof tl, "%s", so->tables) >= (int)sizeof tl) {
      cli_error(VERB, "--accuracy-table: the list is too long");
      return 2;
    }
    char *save = NULL;
    for (char *tok = strtok_r(tl, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      if (ntabs == SEARCH_MAX_TABLES) {
        cli_error(VERB, "--accuracy-table: more than %d files", SEARCH_MAX_TABLES);
        rc = 2;
        break;
      }
      if (acc_table_load(tok, &tabs[ntabs], err, sizeof err) != 0) {
        cli_error(VERB, "--accuracy-table: %s", err);
        rc = 2;
        break;
      }
      ntabs++;
    }
  } else {
    char paths[SEARCH_MAX_TABLES][1024];
    int np = search_default_tables(paths, SEARCH_MAX_TABLES);
    for (int k = 0; k < np; k++)
      if (acc_table_load(paths[k], &tabs[ntabs], err, sizeof err) == 0) ntabs++;
  }

  gs_profile *prof = NULL;
  gs_status st = rc ? GS_OK : gs_profile_load(so->profile_path, &prof);
  if (st == GS_OK && prof) st = cli_clean_profile(prof);
  if (st != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    rc = st == GS_ERR_NOMEM ? 1 : 2;
  }
  if (rc == 0) {
    /* --compute-scale projects the profile as in plan mode. */
    prof->forward_s *= so->scale;
    for (size_t i = 0; i < prof->ntensors; i++) prof->tensors[i].backward_s *= so->scale;
  }
  /* --max-accuracy-loss: only the candidates whose measured loss against
   * dense (the worst over the tables read) is within the limit; one that
   * no table measures is left out too, its loss being unknown. */
  char dropped[512] = "";
  if (rc == 0 && so->max_loss >= 0) {
    int kept = 0;
    size_t used = 0;
    for (int k = 0; k < nspecs; k++) {
      gs_compress_spec z;
      gs_compress_spec_parse(specs[k], &z); /* checked above */
      const char *plain = z.automatic ? z.normalised + 5 : z.normalised;
      double worst = -1;
      for (int t = 0; t < ntabs; t++) {
        const acc_entry *a = acc_table_find(&tabs[t], plain);
        if (a && tabs[t].dense >= 0) worst = fmax(worst, (tabs[t].dense - a->accuracy) * 100);
      }
      if (worst >= 0 ? worst <= so->max_loss : 0) {
        cands[kept] = cands[k];
        specs[kept++] = specs[k];
      } else if (used < sizeof dropped) {
        int w = snprintf(dropped + used, sizeof dropped - used, "%s%s (%s)", used ? ", " : "",
                         specs[k], worst >= 0 ? "measured loss above the limit" : "unmeasured");
        if (w > 0) used += (size_t)w;
      }
    }
    nspecs = kept;
  }
  /* The coding times, measured on this machine at the profile's sizes (as
   * `plan --compress`), each size the fastest of SEARCH_RATE_TRIES: on a
   * shared host a measurement is only ever slowed (preempted), and one
   * measurement moved by 10-20x between runs of the grid under load,
   * enough to change the compressor recommended
   * (bench/results/search_grid.md). */
  for (int k = 0; k < nspecs && rc == 0; k++) {
    gs_compress_spec z;
    gs_compressor *c = NULL;
    gs_compress_spec_parse(specs[k], &z); /* checked above */
    if (gs_compressor_create(z.compressor, &c) != GS_OK ||
        cli_coding(c, so->coding_s >= 0 ? so->coding_s * 1e9 : -1, prof, SEARCH_RATE_TRIES,
                   &cands[k].coding) != GS_OK) {
      cli_fail(VERB, "--search-compress %s: %s", specs[k], gs_last_error());
      rc = 1;
    } else {
      cands[k].secs_per_elem = cli_coding_ns(&cands[k].coding) * 1e-9;
    }
    gs_compressor_destroy(c);
  }
  cfg.compress = cands;
  cfg.ncompress = (size_t)nspecs;
  gs_search_result res;
  memset(&res, 0, sizeof res);
  if (rc == 0) {
    st = gs_search_run(prof, &cfg, &res);
    if (st != GS_OK) {
      if (st == GS_ERR_NOMEM) cli_fail(VERB, "%s", gs_last_error());
      else cli_error(VERB, "%s", gs_last_error());
      rc = st == GS_ERR_NOMEM ? 1 : 2;
    }
  }
  if (rc != 0) {
    for (int k = 0; k < ntabs; k++) acc_table_free(&tabs[k]);
    gs_profile_free(prof);
    return rc;
  }
  const gs_search_point *pts = res.points, *r = &res.points[res.pick];
  int n = (int)res.npoints, pick = (int)res.pick, met = res.target_met;
  const gs_search_compressed *zc = res.compress_pick >= 0
                                       ? &res.compressed[res.compress_pick] : NULL;
  /* The recommended configuration's figures. */
  double rec_iter = zc ? zc->iter_s
                    : res.sync == GS_SEARCH_PS ? r->ps_iter_s : r->iter_s[r->best];
  double rec_eff = rec_iter > 0 ? r->one_worker_s / rec_iter : 1.0;
  const char *rec_policy = gs_plan_policy_name(zc ? zc->policy : r->best);
  double rec_bytes = zc ? zc->bytes_per_step : res.dense_bytes_per_step;
  char warning[1024] = "";
  if (zc) acc_warning(tabs, ntabs, zc->spec, warning, sizeof warning);
  if (json) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "points");
    cJSON_AddStringToObject(o, "profile", prof->name);
    cJSON_AddStringToObject(o, "net", net);
    cJSON_AddNumberToObject(o, "per_node", per_node);
    if (target_eff > 0) cJSON_AddNumberToObject(o, "target_efficiency", target_eff);
    else cJSON_AddStringToObject(o, "target", "throughput");
    cJSON_AddNumberToObject(o, "compute_scale", so->scale);
    cJSON_AddNumberToObject(o, "one_worker_iter_s", res.one_worker_s);
    cJSON_AddNumberToObject(o, "gradient_bytes", res.gradient_bytes);
    for (int i = 0; i < n; i++) {
      cJSON *p = cJSON_CreateObject(), *it = cJSON_AddObjectToObject(p, "iter_s");
      cJSON_AddNumberToObject(p, "workers", pts[i].workers);
      cJSON_AddNumberToObject(p, "nodes", pts[i].nodes);
      for (int k = 0; k < GS_SEARCH_POLICIES; k++)
        cJSON_AddNumberToObject(it, gs_plan_policy_name((gs_plan_policy_kind)k),
                                pts[i].iter_s[k]);
      cJSON_AddStringToObject(p, "best", gs_plan_policy_name(pts[i].best));
      cJSON_AddNumberToObject(p, "efficiency", pts[i].efficiency);
      if (max_global_batch) {
        cJSON_AddNumberToObject(p, "batch", pts[i].batch);
        cJSON_AddNumberToObject(p, "samples_s", pts[i].samples_s);
      }
      cJSON_AddStringToObject(p, "compress", pts[i].compress_pick >= 0
                                                 ? cands[pts[i].compress_pick].spec : "none");
      if (pts[i].compress_pick >= 0)
        cJSON_AddNumberToObject(p, "compress_iter_s", pts[i].compress_iter_s);
      cJSON_AddNumberToObject(p, "pick_iter_s", pts[i].pick_iter_s);
      cJSON_AddNumberToObject(p, "pick_efficiency", pts[i].pick_efficiency);
      if (max_global_batch) cJSON_AddNumberToObject(p, "pick_samples_s", pts[i].pick_samples_s);
      cJSON *ps = cJSON_AddObjectToObject(p, "ps");
      cJSON_AddNumberToObject(ps, "servers", pts[i].ps_servers);
      cJSON_AddStringToObject(ps, "sync", so->ps_sync);
      cJSON_AddNumberToObject(ps, "round_s", pts[i].ps_round_s);
      cJSON_AddNumberToObject(ps, "iter_s", pts[i].ps_iter_s);
      cJSON_AddItemToArray(arr, p);
    }
    /* Compression at the pick's count: every candidate. */
    cJSON *co = cJSON_AddObjectToObject(o, "compression");
    cJSON_AddNumberToObject(co, "workers", r->workers);
    cJSON_AddNumberToObject(co, "min_gain", cfg.compress_min_gain);
    cJSON_AddNumberToObject(co, "dense_iter_s", res.dense_iter_s);
    cJSON_AddNumberToObject(co, "dense_bytes_per_step", res.dense_bytes_per_step);
    if (so->max_loss >= 0) {
      cJSON_AddNumberToObject(co, "max_accuracy_loss", so->max_loss);
      cJSON_AddStringToObject(co, "left_out", dropped);
    }
    cJSON *ta = cJSON_AddArrayToObject(co, "accuracy_tables");
    for (int k = 0; k < ntabs; k++) cJSON_AddItemToArray(ta, cJSON_CreateString(tabs[k].path));
    cJSON *ca = cJSON_AddArrayToObject(co, "candidates");
    for (size_t i = 0; i < res.ncompressed; i++) {
      const gs_search_compressed *e = &res.compressed[i];
      cJSON *c = cJSON_CreateObject();
      cJSON_AddStringToObject(c, "spec", e->spec);
      cJSON_AddStringToObject(c, "policy", gs_plan_policy_name(e->policy));
      cJSON_AddNumberToObject(c, "iter_s", e->iter_s);
      cJSON_AddNumberToObject(c, "efficiency", e->efficiency);
      cJSON_AddNumberToObject(c, "gain", e->gain);
      cJSON_AddNumberToObject(c, "bytes_per_step", e->bytes_per_step);
      cJSON_AddNumberToObject(c, "groups", (double)e->groups);
      cJSON_AddNumberToObject(c, "compressed_groups", (double)e->compressed_groups);
      cJSON_AddStringToObject(c, "exchange", e->exchange < GS_XCHG_COUNT
                                                 ? gs_xchg_name(e->exchange) : "none");
      cJSON_AddNumberToObject(c, "secs_per_elem", cands[i].secs_per_elem);
      /* The measured accuracy, per table that has the spec. */
      cJSON *acc = cJSON_AddArrayToObject(c, "accuracy");
      const char *plain = strncmp(e->spec, "auto:", 5) == 0 ? e->spec + 5 : e->spec;
      for (int k = 0; k < ntabs; k++) {
        const acc_entry *a = acc_table_find(&tabs[k], plain);
        if (a == NULL || tabs[k].dense < 0) continue;
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "table", tabs[k].path);
        cJSON_AddNumberToObject(m, "test_accuracy", a->accuracy);
        cJSON_AddNumberToObject(m, "dense_test_accuracy", tabs[k].dense);
        cJSON_AddNumberToObject(m, "points_vs_dense", (a->accuracy - tabs[k].dense) * 100);
        cJSON_AddBoolToObject(m, "error_feedback", a->error_feedback);
        cJSON_AddStringToObject(m, "model", tabs[k].model);
        cJSON_AddStringToObject(m, "net", tabs[k].net);
        cJSON_AddNumberToObject(m, "ranks", tabs[k].ranks);
        cJSON_AddNumberToObject(m, "epochs", tabs[k].epochs);
        if (tabs[k].max_steps > 0) cJSON_AddNumberToObject(m, "max_steps", tabs[k].max_steps);
        cJSON_AddItemToArray(acc, m);
      }
      cJSON_AddItemToArray(ca, c);
    }
    cJSON *rec = cJSON_AddObjectToObject(o, "recommendation");
    cJSON_AddNumberToObject(rec, "workers", r->workers);
    cJSON_AddNumberToObject(rec, "per_node", per_node);
    cJSON_AddNumberToObject(rec, "nodes", r->nodes);
    cJSON_AddStringToObject(rec, "policy", rec_policy);
    cJSON_AddNumberToObject(rec, "iter_s", rec_iter);
    cJSON_AddNumberToObject(rec, "efficiency", rec_eff);
    cJSON_AddNumberToObject(rec, "allreduce_iter_s", r->iter_s[r->best]);
    cJSON_AddBoolToObject(rec, "target_met", met);
    if (max_global_batch) cJSON_AddNumberToObject(rec, "batch", r->batch);
    cJSON_AddStringToObject(rec, "sync", res.sync == GS_SEARCH_PS ? "ps" : "allreduce");
    if (res.sync == GS_SEARCH_PS) {
      cJSON_AddNumberToObject(rec, "servers", r->ps_servers);
      cJSON_AddStringToObject(rec, "ps_sync", so->ps_sync);
      cJSON_AddNumberToObject(rec, "ps_iter_s", r->ps_iter_s);
    }
    cJSON_AddStringToObject(rec, "compress", zc ? zc->spec : "none");
    cJSON_AddNumberToObject(rec, "bytes_per_step", rec_bytes);
    if (zc) cJSON_AddStringToObject(rec, "accuracy_warning", warning);
    cJSON_AddBoolToObject(o, "predicted", 1);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL) {
      cli_fail(VERB, "out of memory for the JSON of the search");
      rc = 1;
    } else {
      printf("%s\n", text);
      cJSON_free(text);
    }
    goto out;
  }
  printf("search: profile %s (%.1f MB of gradients, forward %.1f ms, backward %.1f ms%s), "
         "--net %s, %d per node\n", prof->name, res.gradient_bytes / 1e6,
         prof->forward_s * 1e3, res.backward_s * 1e3,
         so->scale != 1.0 ? ", compute scaled" : "", net, per_node);
  printf("\npredicted (cost model and planner, not measured):\n");
  printf("%8s %-8s %12s %11s %8s %12s %-14s %10s %11s", "workers", "best", "iter (ms)",
         "efficiency", "servers", "ps iter (ms)", "compressed", "iter (ms)", "efficiency");
  if (max_global_batch) printf(" %6s %10s", "batch", "samples/s");
  printf("\n");
  for (int i = 0; i < n; i++) {
    const gs_search_point *p = &pts[i];
    printf("%8d %-8s %12.3f %11.3f %8d %12.3f", p->workers, gs_plan_policy_name(p->best),
           p->iter_s[p->best] * 1e3, p->efficiency, p->ps_servers, p->ps_iter_s * 1e3);
    if (p->compress_pick >= 0)
      printf(" %-14s %10.3f %11.3f", cands[p->compress_pick].spec, p->compress_iter_s * 1e3,
             p->pick_efficiency);
    else
      printf(" %-14s %10s %11s", "-", "-", "-");
    if (max_global_batch) printf(" %6d %10.1f", p->batch, p->pick_samples_s);
    printf("\n");
  }
  if (nspecs > 0)
    printf("(compressed: the fastest of %d candidates at that count when %.0f%% faster than "
           "dense; counts are chosen on it)\n", nspecs, cfg.compress_min_gain * 100);
  if (dropped[0])
    printf("(left out by --max-accuracy-loss %g: %s)\n", so->max_loss, dropped);
  if (res.ncompressed > 0) {
    printf("\ncompression at %d workers (predicted; coding rates measured on this machine; "
           "accuracy measured, from the tables):\n", r->workers);
    printf("  %-16s %-8s %10s %8s %10s %12s  %s\n", "spec", "policy", "iter (ms)",
           "vs dense", "efficiency", "MB/step", "accuracy vs dense");
    printf("  %-16s %-8s %10.3f %8.3f %10.3f %12.3f  -\n", "dense",
           res.sync == GS_SEARCH_PS ? "ps" : gs_plan_policy_name(r->best),
           res.dense_iter_s * 1e3, 1.0, res.dense_iter_s > 0 ? r->one_worker_s /
           res.dense_iter_s : 1.0, res.dense_bytes_per_step / 1e6);
    for (size_t i = 0; i < res.ncompressed; i++) {
      const gs_search_compressed *e = &res.compressed[i];
      const char *plain = strncmp(e->spec, "auto:", 5) == 0 ? e->spec + 5 : e->spec;
      char acc[160] = "not measured";
      size_t used = 0;
      for (int k = 0; k < ntabs; k++) {
        const acc_entry *a = acc_table_find(&tabs[k], plain);
        if (a == NULL || tabs[k].dense < 0) continue;
        int w = snprintf(acc + used, sizeof acc - used, "%s%+.2f pts (%d ep%s)",
                         used ? ", " : "", (a->accuracy - tabs[k].dense) * 100,
                         tabs[k].epochs, tabs[k].max_steps > 0 ? ", short" : "");
        if (w < 0 || (size_t)w >= sizeof acc - used) break;
        used += (size_t)w;
      }
      printf("  %-16s %-8s %10.3f %8.3f %10.3f %12.3f  %s\n", e->spec,
             gs_plan_policy_name(e->policy), e->iter_s * 1e3,
             e->iter_s > 0 ? res.dense_iter_s / e->iter_s : 1.0, e->efficiency,
             e->bytes_per_step / 1e6, acc);
    }
    if (ntabs == 0)
      printf("  (no accuracy table found: --accuracy-table FILE names one; the accuracy "
             "cost of every compressor above is not measured here)\n");
  }
  char sync[96];
  if (res.sync == GS_SEARCH_PS)
    snprintf(sync, sizeof sync, "parameter servers (%d, %s)", r->ps_servers, so->ps_sync);
  else
    snprintf(sync, sizeof sync, "all-reduce");
  printf("\nrecommendation: %d worker%s (%d per node, %d node%s), %s, policy %s, %s",
         r->workers, r->workers == 1 ? "" : "s", per_node, r->nodes, r->nodes == 1 ? "" : "s",
         sync, res.sync == GS_SEARCH_PS ? "-" : rec_policy,
         zc ? zc->spec : "dense");
  if (max_global_batch) printf(", batch %d per worker", r->batch);
  printf(": iteration %.3f ms, efficiency %.3f, %.2f MB per step\n", rec_iter * 1e3, rec_eff,
         rec_bytes / 1e6);
  printf("why:\n");
  /* workers */
  if (target_eff > 0 && !met)
    printf("  - workers %d: no count tried reaches efficiency %.2f (even %d workers reach "
           "only %.3f at %.3f ms); compute dominates too little for this network\n",
           r->workers, target_eff, pts[0].workers, pts[0].pick_efficiency,
           pts[0].pick_iter_s * 1e3);
  else if (target_eff > 0 && pick + 1 < n) {
    /* The fall below the target in as many digits as show it (3 to 6):
     * 0.9996 against a target of 1 read "falls to 1.000" until 2026-12-06. */
    const double next = pts[pick + 1].pick_efficiency;
    char fall[64] = "";
    for (int d = 3; d <= 6 && !fall[0]; d++) {
      char a[32], b[32];
      snprintf(a, sizeof a, "%.*f", d, next);
      snprintf(b, sizeof b, "%.*f", d, target_eff);
      if (strcmp(a, b) != 0) snprintf(fall, sizeof fall, "to %s", a);
    }
    if (!fall[0]) snprintf(fall, sizeof fall, "just below it");
    printf("  - workers %d: efficiency %.3f (%.3f ms) meets %.2f; at %d workers it falls %s "
           "(%.3f ms)\n", r->workers, r->pick_efficiency, r->pick_iter_s * 1e3,
           target_eff, pts[pick + 1].workers, fall, pts[pick + 1].pick_iter_s * 1e3);
  }
  else if (target_eff > 0)
    printf("  - workers %d: every count tried, up to %d, meets efficiency %.2f (%.3f at "
           "%.3f ms)\n", r->workers, r->workers, target_eff, r->pick_efficiency,
           r->pick_iter_s * 1e3);
  else
    printf("  - workers %d: the most %s of the counts tried (%.3f ms an iteration, "
           "efficiency %.3f%s)\n", r->workers,
           max_global_batch ? "samples per second" : "iterations x workers per second",
           r->pick_iter_s * 1e3, r->pick_efficiency,
           r->compress_pick >= 0 ? ", compressed" : "");
  printf("  - per node %d: as asked (--per-node); %d node%s\n", per_node, r->nodes,
         r->nodes == 1 ? "" : "s");
  /* batch */
  if (max_global_batch)
    printf("  - batch %d per worker: the most within %d in all%s; compute taken as linear "
           "in the batch (measured at %d: %.3f ms; here %.3f ms)\n", r->batch,
           max_global_batch, max_batch ? " and the cap per worker" : "", prof->batch_size,
           res.one_worker_s * 1e3, r->one_worker_s * 1e3);
  else
    printf("  - batch %d per worker: the profile's (--max-global-batch lets it grow)\n",
           prof->batch_size);
  /* sync */
  printf("  - sync %s: %d parameter servers (the fewest whose links are not the bottleneck "
         "against %d worker%s pushes) would take %.3f ms under %s (efficiency %.3f), "
         "all-reduce %.3f ms%s\n", res.sync == GS_SEARCH_PS ? "parameter servers" : "all-reduce",
         r->ps_servers, r->workers, r->workers == 1 ? "'s" : "s'", r->ps_iter_s * 1e3, so->ps_sync,
         r->ps_iter_s > 0 ? r->one_worker_s / r->ps_iter_s : 1.0, r->iter_s[r->best] * 1e3,
         res.sync == GS_SEARCH_PS ? " (on that many more machines)" : "");
  /* policy */
  if (res.sync == GS_SEARCH_PS)
    printf("  - policy: none under parameter servers (the workers push after the backward "
           "pass); the best all-reduce plan would be %s, %.3f ms\n", rec_policy,
           r->iter_s[r->best] * 1e3);
  else
    printf("  - policy %s: %.3f ms against %swfbp's %.3f ms (%.3fx); one dense all-reduce "
           "of all %.1f MB would take %.3f ms against %.3f ms of backward to hide it in\n",
           rec_policy, (zc ? zc->iter_s : r->iter_s[r->best]) * 1e3, zc ? "dense " : "",
           r->iter_s[GS_PLAN_WFBP] * 1e3,
           r->iter_s[GS_PLAN_WFBP] / (zc ? zc->iter_s : r->iter_s[r->best]),
           res.gradient_bytes / 1e6, res.allreduce_all_s * 1e3, r->backward_s * 1e3);
  /* compression */
  if (zc) {
    printf("  - compression %s: %.3f ms (efficiency %.3f) against dense's %.3f ms, %.0f%% "
           "shorter (the margin is %.0f%%); %.3f MB per step instead of %.1f MB "
           "(%d of %zu groups compressed, %s)\n", zc->spec, zc->iter_s * 1e3, zc->efficiency,
           res.dense_iter_s * 1e3, zc->gain * 100, cfg.compress_min_gain * 100,
           zc->bytes_per_step / 1e6, res.dense_bytes_per_step / 1e6,
           (int)zc->compressed_groups, zc->groups,
           zc->exchange < GS_XCHG_COUNT ? gs_xchg_name(zc->exchange) : "-");
    printf("  - accuracy warning, %s (measured): %s\n", zc->spec, warning);
  } else if (res.ncompressed > 0) {
    const gs_search_compressed *b = &res.compressed[0];
    for (size_t i = 1; i < res.ncompressed; i++)
      if (res.compressed[i].iter_s < b->iter_s) b = &res.compressed[i];
    char by[48];
    if (b->gain > 0) snprintf(by, sizeof by, "only %.1f%% shorter than", b->gain * 100);
    else snprintf(by, sizeof by, "no shorter than");
    printf("  - compression none: the fastest of %zu candidates, %s, is predicted at %.3f "
           "ms, %s dense's %.3f ms (the margin is %.0f%%); dense sends %.1f MB per step\n",
           res.ncompressed, b->spec, b->iter_s * 1e3, by, res.dense_iter_s * 1e3,
           cfg.compress_min_gain * 100, res.dense_bytes_per_step / 1e6);
  } else {
    printf("  - compression none: %s\n", dropped[0] ? "no candidate within "
           "--max-accuracy-loss" : "no candidate given (--search-compress none)");
  }
out:
  gs_search_result_free(&res);
  for (int k = 0; k < ntabs; k++) acc_table_free(&tabs[k]);
  gs_profile_free(prof);
  return rc;
}

int cmd_plan(int argc, char **argv) {
  static const struct option longopts[] = {
      {"profile", required_argument, 0, 'p'}, {"policy", required_argument, 0, 'P'},
      {"a", required_argument, 0, 'a'},       {"b", required_argument, 0, 'b'},
      {"net", required_argument, 0, 'n'},     {"workers", required_argument, 0, 'w'},
      {"nodes", required_argument, 0, 'N'},   {"algo", required_argument, 0, 'A'},
      {"json", no_argument, 0, 'j'},          {"verbose", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},          {"compute-scale", required_argument, 0, 's'},
      {"compress", required_argument, 0, 'z'}, {"cost", required_argument, 0, 'c'},
      {"search", no_argument, 0, 'S'},        {"max-workers", required_argument, 0, 'M'},
      {"per-node", required_argument, 0, 'K'}, {"target", required_argument, 0, 'T'},
      {"max-global-batch", required_argument, 0, 'G'},
      {"max-batch", required_argument, 0, 'B'},
      {"search-compress", required_argument, 0, 'C'},
      {"accuracy-table", required_argument, 0, 'Y'},
      {"max-accuracy-loss", required_argument, 0, 'L'},
      {"coding-rate", required_argument, 0, 'R'},
      {"ps-sync", required_argument, 0, 'Q'},
      {0, 0, 0, 0}};
  const char *search_compress = NULL, *accuracy_table = NULL, *ps_sync = NULL;
  /* --max-accuracy-loss: SEARCH_MAX_LOSS points unless given; "any": no
   * limit (< 0). */
  double max_loss = -1;
  int loss_given = 0;
  const char *compress = NULL;
  const char *profile_path = NULL, *policy = "all", *net = NULL, *algo_name = "auto";
  const char *cost_file = NULL;
  int policy_given = 0, search = 0, max_workers = 0, per_node = 1, max_global_batch = 0;
  int per_node_given = 0, target_given = 0; /* search-only, whatever their value */
  int max_batch = 0;
  double target_eff = 0; /* 0: throughput */
  double a = -1, b = -1, scale = 1.0, coding_ns = -1;
  int have_a = 0, have_b = 0, have_algo = 0, workers = 0, nodes = 0, json = 0, verbose = 0;
  optind = 1;
  opterr = 0;
  int c;
  cli_seen seen = {{0}};
  while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
    if (c != '?' && c != ':' && cli_once(VERB, &seen, c, longopts)) return 2;
    switch (c) {
      case 'p': profile_path = optarg; break;
      case 'P': policy = optarg; policy_given = 1; break;
      case 'a':
        if (cli_parse_double(optarg, 0, PLAN_MAX_A, &a) != 0) {
          cli_error(VERB, "--a: expected seconds from 0 to %g, got '%s'", PLAN_MAX_A, optarg);
          return 2;
        }
        have_a = 1;
        break;
      case 'b':
        if (cli_parse_double(optarg, 0, PLAN_MAX_B, &b) != 0) {
          cli_error(VERB, "--b: expected seconds per byte from 0 to %g, got '%s'", PLAN_MAX_B,
                    optarg);
          return 2;
        }
        have_b = 1;
        break;
      case 'n': net = optarg; break;
      case 'c': cost_file = optarg; break;
      case 'S': search = 1; break;
      case 'M':
        if (cli_parse_int(optarg, 1, 1 << 24, &max_workers) != 0) {
          cli_error(VERB, "--max-workers: expected an integer from 1 to %d, got '%s'", 1 << 24,
                    optarg);
          return 2;
        }
        break;
      case 'K':
        per_node_given = 1;
        if (cli_parse_int(optarg, 1, 1 << 24, &per_node) != 0) {
          cli_error(VERB, "--per-node: expected an integer from 1 to %d, got '%s'", 1 << 24,
                    optarg);
          return 2;
        }
        break;
      case 'G':
      case 'B':
        if (cli_parse_int(optarg, 1, 1 << 30, c == 'G' ? &max_global_batch : &max_batch) != 0) {
          cli_error(VERB, "--%s: expected an integer from 1 to %d, got '%s'",
                    c == 'G' ? "max-global-batch" : "max-batch", 1 << 30, optarg);
          return 2;
        }
        break;
      case 'T':
        target_given = 1;
        if (strcmp(optarg, "throughput") == 0) {
          target_eff = 0;
        } else if (strncmp(optarg, "efficiency:", 11) != 0 ||
                   cli_parse_double(optarg + 11, 0, 1, &target_eff) != 0 || target_eff == 0) {
          cli_error(VERB, "--target: expected throughput or efficiency:E with 0 < E <= 1, "
                    "got '%s'", optarg);
          return 2;
        }
        break;
      case 's':
        if (cli_parse_double(optarg, 0, PLAN_MAX_SCALE, &scale) != 0 || scale == 0) {
          cli_error(VERB, "--compute-scale: expected a number above 0 and up to %g, got '%s'",
                    PLAN_MAX_SCALE, optarg);
          return 2;
        }
        break;
      case 'w':
        if (cli_parse_int(optarg, 1, 1 << 24, &workers) != 0) {
          cli_error(VERB, "--workers: expected an integer from 1 to %d, got '%s'", 1 << 24,
                    optarg);
          return 2;
        }
        break;
      case 'N':
        if (cli_parse_int(optarg, 1, 1 << 24, &nodes) != 0) {
          cli_error(VERB, "--nodes: expected an integer from 1 to %d, got '%s'", 1 << 24,
                    optarg);
          return 2;
        }
        break;
      case 'A': algo_name = optarg; have_algo = 1; break;
      case 'z':
        if (cli_compress_arg("plan", optarg)) return 2;
        compress = optarg;
        break;
      case 'R':
        if (cli_coding_rate_arg(VERB, optarg, &coding_ns)) return 2;
        break;
      case 'C': search_compress = optarg; break;
      case 'Y': accuracy_table = optarg; break;
      case 'Q': ps_sync = optarg; break;
      case 'L':
        loss_given = 1;
        if (strcmp(optarg, "any") == 0) {
          max_loss = -1;
        } else if (cli_parse_double(optarg, 0, 100, &max_loss) != 0) {
          cli_error(VERB, "--max-accuracy-loss: expected points from 0 to 100, or any, "
                    "got '%s'", optarg);
          return 2;
        }
        break;
      case 'j': json = 1; break;
      case 'v': verbose = 1; break;
      case 'h': usage(stdout); return 0;
      default: return cli_getopt_error(VERB, c, argv, longopts);
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (profile_path == NULL) {
    cli_error(VERB, "--profile FILE is required");
    return 2;
  }
  if (have_a != have_b) {
    cli_error(VERB, "--a and --b go together");
    return 2;
  }
  if (coding_ns >= 0 && !search && !compress) {
    cli_error(VERB, "--coding-rate applies only with --compress or --search");
    return 2;
  }
  /* (until 2026-12-06 --target, and --per-node 1, were taken without
   * --search and ignored) */
  if (search || max_workers || per_node_given || target_given || max_global_batch || max_batch ||
      search_compress || accuracy_table || loss_given || ps_sync) {
    const char *why = !search ? "--max-workers, --per-node, --target, --max-global-batch, "
                                "--search-compress, --accuracy-table, "
                                "--max-accuracy-loss and --ps-sync apply only with --search"
                      : max_batch && !max_global_batch
                          ? "--max-batch applies only with --max-global-batch"
                      : cost_file || have_a ? "--search needs --net NAME (a cost file or "
                                              "--a/--b describe one cluster size only)"
                      : !net ? "--search needs --net NAME"
                      : workers && max_workers
                          ? "--search takes --workers N (that count only) or --max-workers N, "
                            "not both"
                      : !workers && !max_workers
                          ? "--search needs one of --workers N or --max-workers N"
                      : (workers ? workers : max_workers) % per_node != 0
                          ? "--per-node must divide --workers / --max-workers"
                      : compress ? "--search takes its candidates as --search-compress "
                                   "SPEC,SPEC... (or none), not --compress"
                      : policy_given ? "--search weighs every policy; it takes no --policy"
                                     : NULL;
    if (why) {
      cli_error(VERB, "%s", why);
      return 2;
    }
    if (nodes > 0) {
      cli_error(VERB, "--search takes --per-node K, not --nodes");
      return 2;
    }
    gs_ps_sync sync;
    if (gs_ps_sync_parse(ps_sync ? ps_sync : "bsp", &sync) != GS_OK) {
      cli_error(VERB, "--ps-sync: %s", gs_last_error());
      return 2;
    }
    char sync_text[64];
    gs_ps_sync_format(&sync, sync_text, sizeof sync_text);
    search_opts so = {.profile_path = profile_path, .net = net, .algo_name = algo_name,
                      .workers = workers, .max_workers = max_workers, .per_node = per_node,
                      .max_global_batch = max_global_batch, .max_batch = max_batch,
                      .json = json, .target_eff = target_eff, .scale = scale,
                      .compress_list = search_compress, .tables = accuracy_table,
                      .max_loss = loss_given ? max_loss : SEARCH_MAX_LOSS,
                      .coding_s = coding_ns >= 0 ? coding_ns * 1e-9 : -1,
                      .ps_sync = sync_text, .ps_async = gs_ps_sync_async_share(&sync)};
    return plan_search(&so);
  }
  if (net && cost_file) {
    cli_error(VERB, "give either --net or --cost, not both");
    return 2;
  }
  if (cost_file) net = cost_file; /* the same path from here on, read below */
  if (have_a && net) {
    cli_error(VERB, "give either --a/--b or --net/--cost, not both");
    return 2;
  }
  if (have_a && (have_algo || nodes > 0)) {
    cli_error(VERB, "--%s applies only with --net (--a/--b give the cost directly)",
              have_algo ? "algo" : "nodes");
    return 2;
  }
  if (!have_a && !net) {
    cli_error(VERB, "a cost is required: --a SECONDS --b SECONDS_PER_BYTE, or "
              "--net PRESET --workers N");
    return 2;
  }
  if (net && workers == 0) {
    cli_error(VERB, "%s needs --workers N", cost_file ? "--cost" : "--net");
    return 2;
  }
  if (nodes > 0 && (workers == 0 || nodes > workers || workers % nodes != 0)) {
    cli_error(VERB, "--nodes %d must divide --workers %d", nodes, workers);
    return 2;
  }

  if (compress && workers == 0) {
    cli_error(VERB, "--compress needs --workers N (the exchanges' cost depends on it)");
    return 2;
  }
  gs_cost_params zparams = {0};
  gs_plan_cost cost;
  if (have_a) {
    if (gs_plan_cost_from_ab(a, b, &cost) != GS_OK) {
      cli_error(VERB, "%s", gs_last_error());
      return 2;
    }
    /* One worker has no all-reduce: the cost module prices one rank at 0. */
    if (workers == 1) gs_plan_cost_from_ab(0, 0, &cost);
  } else {
    gs_cost_params params;
    gs_algo algo;
    gs_cost_topo ftopo = {workers, nodes > 0 ? nodes : workers};
    if (cost_file ? gs_cost_load(cost_file, ftopo, &params) != GS_OK
                  : gs_cost_preset(net, &params) != GS_OK) {
      cli_error(VERB, "%s: %s", cost_file ? "--cost" : "--net", gs_last_error());
      return 2;
    }
    if (gs_algo_parse(algo_name, &algo) != GS_OK) {
      cli_error(VERB, "--algo: %s", gs_last_error());
      return 2;
    }
    gs_cost_topo topo = {workers, nodes > 0 ? nodes : workers};
    /* A cost file's measured points price the messages (the curve through
     * them), as simulate prices them; a preset's calibrated curve, or its
     * line, otherwise. */
    if (gs_plan_cost_measured(&params, topo, algo, &cost) != GS_OK) {
      if (cost_file)
        cli_error(VERB, "--cost %s (--algo %s): %s", cost_file, algo_name, gs_last_error());
      else
        cli_error(VERB, "--algo %s: %s", algo_name, gs_last_error());
      return 2;
    }
    zparams = params;
  }
  /* The compression spec: "auto:SPEC" lets each group choose. */
  gs_compress_spec z;
  if (gs_compress_spec_parse(compress, &z) != GS_OK) {
    cli_error(VERB, "--compress: %s", gs_last_error());
    return 2;
  }

  /* The policies to plan; wfbp and single are always planned, for the
   * speedup columns. */
  static const char *all_specs[] = {"wfbp", "single", "bucket", "mgwfbp",
                                    "optimal", "dear", "auto"};
  const char *one[1] = {policy};
  const char *kept[sizeof all_specs / sizeof all_specs[0]];
  const char *left_out = NULL; /* a policy the compression leaves out */
  const char **specs = kept;
  size_t nspecs = 0;
  if (strcmp(policy, "all") != 0) {
    gs_plan_policy pp;
    if (gs_plan_policy_parse(policy, &pp) != GS_OK) {
      cli_error(VERB, "--policy: %s", gs_last_error());
      return 2;
    }
    if (gs_plan_policy_check_compress(&pp, &z) != GS_OK) {
      cli_error(VERB, "--compress: %s", gs_last_error());
      return 2;
    }
    specs = one;
    nspecs = 1;
  } else {
    /* With every group compressed, DeAR has no plan: among all the
     * policies it is left out (asked for alone, it is an error). */
    for (size_t k = 0; k < sizeof all_specs / sizeof all_specs[0]; k++) {
      gs_plan_policy pk;
      if (gs_plan_policy_parse(all_specs[k], &pk) == GS_OK &&
          gs_plan_policy_check_compress(&pk, &z) != GS_OK)
        left_out = all_specs[k];
      else
        kept[nspecs++] = all_specs[k];
    }
  }

  gs_compressor *zc = NULL;
  if (!z.off && gs_compressor_create(z.compressor, &zc) != GS_OK) {
    cli_fail(VERB, "--compress: %s", gs_last_error());
    return 1;
  }
  gs_profile *prof = NULL;
  /* Names are printed (and appear in errors) as valid UTF-8 whatever the
   * file holds. */
  gs_status lst = gs_profile_load(profile_path, &prof);
  if (lst == GS_OK) lst = cli_clean_profile(prof);
  if (lst != GS_OK) {
    gs_profile_free(prof);
    gs_compressor_destroy(zc);
    if (lst == GS_ERR_NOMEM) {
      cli_fail(VERB, "%s", gs_last_error());
      return 1;
    }
    cli_error(VERB, "%s", gs_last_error());
    return 2;
  }
  /* The compressed alternatives, their coding time measured at this
   * profile's sizes (or --coding-rate's). */
  gs_plan_xchg xchg = {0};
  if (zc) {
    /* With --a/--b the network's alpha and beta are fitted to the line. */
    if (have_a) gs_cost_preset("1GbE", &zparams);
    gs_cost_topo topo = {workers, nodes > 0 ? nodes : workers};
    gs_cost_coding coding;
    if (cli_coding(zc, coding_ns, prof, 1, &coding) != GS_OK ||
        gs_plan_xchg_from_compressor(zc, &coding, &zparams, topo, have_a ? &cost.ar : NULL,
                                     !z.automatic, &xchg) != GS_OK) {
      cli_error(VERB, "--compress %s: %s", compress, gs_last_error());
      gs_compressor_destroy(zc);
      gs_profile_free(prof);
      return 1;
    }
  }
  /* The profile is ours to change: scale its compute times. */
  prof->forward_s *= scale;
  for (size_t i = 0; i < prof->ntensors; i++) prof->tensors[i].backward_s *= scale;
  int rc = 0;
  plan_row rows[8] = {{0}};
  gs_plan *wfbp = NULL, *single = NULL;
  gs_status st;
  if ((st = gs_plan_make(prof, &cost, "wfbp", &wfbp)) != GS_OK ||
      (st = gs_plan_make(prof, &cost, "single", &single)) != GS_OK) {
    rc = plan_failure(wfbp ? "single" : "wfbp", st);
    goto done;
  }
  for (size_t k = 0; k < nspecs; k++) {
    rows[k].spec = specs[k];
    gs_plan_policy pk;
    if ((st = gs_plan_policy_parse(specs[k], &pk)) != GS_OK ||
        (st = gs_plan_make_xchg(prof, &cost, &xchg, &pk, 1, &rows[k].plan)) != GS_OK) {
      rc = plan_failure(specs[k], st);
      goto done;
    }
  }
  double wfbp_s = wfbp->predicted_iter_s, single_s = single->predicted_iter_s;
  if (json) {
    for (size_t k = 0; k < nspecs; k++) {
      char *s = row_json(&rows[k], prof, &cost, workers, scale, wfbp_s, single_s);
      if (s == NULL) {
        cli_fail(VERB, "out of memory for the JSON of policy %s", rows[k].spec);
        rc = 1;
        goto done;
      }
      printf("%s\n", s);
      cJSON_free(s);
    }
    goto done;
  }
  double bwd = 0;
  for (size_t i = 0; i < prof->ntensors; i++) bwd += prof->tensors[i].backward_s;
  printf("profile %s: %zu tensors, %.1f MB, forward %.1f ms, backward %.1f ms",
         prof->name, prof->ntensors, cli_profile_bytes(prof) / 1e6, prof->forward_s * 1e3,
         bwd * 1e3);
  if (prof->batch_size > 0) printf(", batch %d", prof->batch_size);
  if (scale != 1.0) printf(" (times scaled by %g)", scale);
  printf("\ncost: all-reduce %.3e s + %.3e s/B", cost.ar.a, cost.ar.b);
  if (net) printf(" (%s, %d workers, %s)", net, workers, algo_name);
  char assumes[1024];
  if (net && !cost_file && !have_a && gs_net_describe(net, assumes, sizeof assumes) == GS_OK)
    printf("\nnetwork %s", assumes);
  if (cost.ar.npoints > 0)
    printf("\nmessages priced %s (%d sizes, %.0f B to %.0f B), not on the line above",
           net && !cost_file ? "at the fastest algorithm for their size, as the communicator "
                               "chooses"
                             : "at the all-reduce times measured",
           cost.ar.npoints, cost.ar.bytes[0], cost.ar.bytes[cost.ar.npoints - 1]);
  if (zc) printf("\ncompression: %s", compress);
  printf("\n\n%-18s %7s %12s %8s %9s%s\n", "policy", "groups", "iter (ms)", "vs wfbp",
         "vs single", zc ? " compressed" : "");
  for (size_t k = 0; k < nspecs; k++) {
    const gs_plan *pl = rows[k].plan;
    char name[64];
    if (pl->policy.kind == GS_PLAN_AUTO)
      snprintf(name, sizeof name, "auto (%s)", gs_plan_policy_name(pl->chosen));
    else
      snprintf(name, sizeof name, "%s", rows[k].spec);
    char vs_wfbp[32] = "-", vs_single[32] = "-";
    if (pl->predicted_iter_s > 0) {
      snprintf(vs_wfbp, sizeof vs_wfbp, "%.3f", wfbp_s / pl->predicted_iter_s);
      snprintf(vs_single, sizeof vs_single, "%.3f", single_s / pl->predicted_iter_s);
    }
    printf("%-18s %7zu %12.3f %8s %9s", name, pl->ngroups, pl->predicted_iter_s * 1e3,
           vs_wfbp, vs_single);
    if (zc) {
      size_t nz = 0;
      for (size_t g = 0; pl->group_xchg && g < pl->ngroups; g++) nz += pl->group_xchg[g] >= 0;
      printf(" %10zu", nz);
    }
    printf("\n");
  }
  if (left_out)
    printf("%-18s (left out: its reduce-scatter and all-gather cannot be sent "
           "compressed)\n", left_out);
  if (verbose) {
    printf("\n");
    for (size_t k = 0; k < nspecs; k++) print_groups(stdout, rows[k].plan);
  }
done:
  for (size_t k = 0; k < nspecs; k++) gs_plan_free(rows[k].plan);
  gs_plan_free(wfbp);
  gs_plan_free(single);
  gs_profile_free(prof);
  gs_compressor_destroy(zc);
  return rc;
}
