/*
 * gradsync shard: a sharding plan for a recommendation model's embedding
 * tables (docs/DLRM.md): each table's sharding and why, the per-rank
 * estimated time, memory and bytes, the imbalance, and the contiguous
 * slicing of the DLRM reference priced by the same cost beside it.
 *
 * One process, no MPI: the planner is arithmetic on the tables, the network
 * preset and this machine's lookup cost (measured at start-up unless
 * --lookup gives it). Exit 2 on bad options or tables, a plan that cannot
 * fit the memory cap included; 1 on other failures.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"

#define VERB "shard"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync shard --tables PRESET|FILE --ranks N [options]\n"
          "\nPlans where each embedding table's rows and columns live, and prints\n"
          "why, the estimated time, memory and bytes of every rank, and the\n"
          "contiguous slicing of the DLRM reference and TorchRec's greedy planner\n"
          "rules priced the same way.\n\n"
          "  --tables T[:F]     kaggle, terabyte or mlperf (Criteo's 26 tables at\n"
          "                     dims 16, 64, 128), or a JSON file\n"
          "                     {\"tables\": [{\"name\", \"rows\", \"dim\", \"pooling\"}]};\n"
          "                     :F scales the rows as --scale (a path that exists\n"
          "                     is a file whole, ':' in it or not)\n"
          "  --scale F          rows of every table times F (rounded up, at least\n"
          "                     1), 0 < F <= 1 (default 1)\n"
          "  --pooling L        ids per sample of a preset's tables and of a file's\n"
          "                     tables that give no pooling (default 1)\n"
          "  --ranks N          ranks of the job (1 to 65536)\n"
          "  --per-node K       ranks per node (default 1; divides --ranks)\n"
          "  --batch B          global batch (default 8192); given, it must split\n"
          "                     evenly over --ranks, as train's --global-batch\n"
          "  --net NAME         the network, a name of `gradsync run --net`\n"
          "                     (default 1gbit; docs/NETWORK.md)\n"
          "  --mem-cap SIZE     bytes per rank for tables and row-wise Adagrad's\n"
          "                     state (K, M, G; default none)\n"
          "  --sharding S       auto (default), tw, rw, cw, twrw or dp for every table\n"
          "  --precision P      the all-to-all's elements: fp32 (default), fp16, bf16\n"
          "  --embed-sgd        the tables train with SGD (as train's --embed-sgd),\n"
          "                     not row-wise Adagrad, whose column blocks exchange\n"
          "                     their rows' sums of squares every step\n"
          "  --zipf S           the ids' Zipf exponent over each table's rows, for\n"
          "                     the cache model (default 1.05, as train's; 0: uniform)\n"
          "  --lookup A,B[,G[,AH,BH,C,GM[,AR,BR,GH]]]\n"
          "                     seconds per lookup, per byte of row and per bag a\n"
          "                     shard walks (default 0); a lookup's and a byte's in\n"
          "                     the cache, a rank's cache bytes (default 0: no\n"
          "                     cache) and a bag's when half hold none of the\n"
          "                     shard's ids; a distinct row's update and its\n"
          "                     bytes' (default 0: in the lookup's price) and a\n"
          "                     bag's with its line of the pooled matrix in the\n"
          "                     cache (default 0: G), instead of measuring this\n"
          "                     machine (about 0.3 s)\n"
          "  --out FILE         save the plan (JSON: the tables, each shard's rows,\n"
          "                     columns and rank; gs_shard_plan_load reads it)\n"
          "  --json             the plan as one JSON object instead of tables\n");
}

typedef struct shard_opts {
  const char *tables, *net, *out;
  double scale, pooling, batch, mem_cap, zipf;
  int ranks, per_node, force, json, have_lookup, embed_sgd, scale_given;
  int batch_given; /* --batch: it must split over --ranks */
  double elem_bytes;
  gs_cost_lookup lookup;
} shard_opts;

static int parse_opts(int argc, char **argv, shard_opts *o) {
  static const struct option longs[] = {
      {"tables", required_argument, 0, 't'},   {"scale", required_argument, 0, 's'},
      {"pooling", required_argument, 0, 'L'},  {"ranks", required_argument, 0, 'r'},
      {"per-node", required_argument, 0, 'k'}, {"batch", required_argument, 0, 'b'},
      {"net", required_argument, 0, 'n'},      {"mem-cap", required_argument, 0, 'm'},
      {"sharding", required_argument, 0, 'S'}, {"precision", required_argument, 0, 'p'},
      {"lookup", required_argument, 0, 'l'},   {"out", required_argument, 0, 'o'},
      {"json", no_argument, 0, 'j'},           {"help", no_argument, 0, 'h'},
      {"embed-sgd", no_argument, 0, 'E'},     {"zipf", required_argument, 0, 'z'},
      {0, 0, 0, 0}};
  *o = (shard_opts){.net = "1gbit", .scale = 1, .pooling = 1, .batch = 8192, .per_node = 1,
                    .force = -1, .elem_bytes = 4, .zipf = 1.05};
  int c;
  cli_seen seen = {{0}};
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
    if (c != '?' && c != ':' && cli_once(VERB, &seen, c, longs)) return 2;
    switch (c) {
      case 't': {
        static char buf[4096];
        double v = 0;
        int given;
        if (cli_tables_arg(VERB, optarg, buf, sizeof buf, &v, &given)) return 2;
        if (given) {
          if (o->scale_given) {
            cli_error(VERB, "--tables %s and --scale: give the scale once", optarg);
            return 2;
          }
          o->scale = v;
          o->scale_given = 1;
        }
        o->tables = buf;
        break;
      }
      case 's':
        if (cli_parse_double(optarg, 0, 1, &o->scale) || o->scale == 0) {
          cli_error(VERB, "--scale '%s' must be a number above 0 and at most 1", optarg);
          return 2;
        }
        if (o->scale_given) {
          cli_error(VERB, "--scale %s and --tables T:SCALE: give the scale once", optarg);
          return 2;
        }
        o->scale_given = 1;
        break;
      case 'L':
        if (cli_parse_double(optarg, 0, 1e6, &o->pooling) || o->pooling == 0) {
          cli_error(VERB, "--pooling '%s' must be a number of ids above 0, at most 1e6",
                    optarg);
          return 2;
        }
        break;
      case 'r':
      case 'k':
        if (cli_parse_int(optarg, 1, 65536, c == 'r' ? &o->ranks : &o->per_node)) {
          cli_error(VERB, "--%s '%s' must be an integer from 1 to 65536",
                    c == 'r' ? "ranks" : "per-node", optarg);
          return 2;
        }
        break;
      case 'b':
        if (cli_parse_double(optarg, 1, 1e9, &o->batch) || o->batch != floor(o->batch)) {
          cli_error(VERB, "--batch '%s' must be an integer from 1 to 1e9", optarg);
          return 2;
        }
        o->batch_given = 1;
        break;
      case 'n': o->net = optarg; break;
      case 'm': {
        size_t v;
        int bad = cli_parse_bytes(optarg, &v);
        if (bad == -2) {
          cli_error(VERB, "--mem-cap '%s' is too large (at most %zu bytes)", optarg,
                    (size_t)SIZE_MAX);
          return 2;
        }
        if (bad || v == 0) {
          cli_error(VERB, "--mem-cap '%s' must be a size above 0 (K, M, G)", optarg);
          return 2;
        }
        o->mem_cap = (double)v;
        break;
      }
      case 'S':
        if (gs_shard_kind_parse(optarg, &o->force) != GS_OK) {
          cli_error(VERB, "--sharding: %s", gs_last_error());
          return 2;
        }
        break;
      case 'p':
        if (strcmp(optarg, "fp32") == 0) o->elem_bytes = 4;
        else if (strcmp(optarg, "fp16") == 0 || strcmp(optarg, "bf16") == 0) o->elem_bytes = 2;
        else {
          cli_error(VERB, "--precision '%s': expected fp32, fp16 or bf16", optarg);
          return 2;
        }
        break;
      case 'l':
        if (cli_lookup_arg(VERB, optarg, &o->lookup)) return 2;
        o->have_lookup = 1;
        break;
      case 'z':
        if (cli_parse_double(optarg, 0, 10, &o->zipf)) {
          cli_error(VERB, "--zipf '%s' must be a number from 0 to 10", optarg);
          return 2;
        }
        break;
      case 'o': o->out = optarg; break;
      case 'j': o->json = 1; break;
      case 'E': o->embed_sgd = 1; break;
      case 'h': usage(stdout); return 1;
      default: return cli_getopt_error(VERB, c, argv, longs);
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (o->tables == NULL || o->ranks == 0) {
    cli_error(VERB, "--tables and --ranks are required");
    return 2;
  }
  /* A global batch given is split over the ranks, as train's
   * --global-batch (which refuses one that does not split); the default
   * is a figure to price with, not a job's. */
  if (o->batch_given && (long)o->batch % o->ranks != 0) {
    cli_error(VERB, "--batch %.0f (the global batch) does not split evenly over --ranks %d",
              o->batch, o->ranks);
    return 2;
  }
  if (o->ranks % o->per_node != 0) {
    cli_error(VERB, "--per-node %d does not divide --ranks %d", o->per_node, o->ranks);
    return 2;
  }
  return 0;
}

int cmd_shard(int argc, char **argv) {
  shard_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc == 1) return 0;
  if (rc) return rc;
  gs_embed_spec *t = NULL;
  int n = 0;
  rc = cli_tables_load(VERB, o.tables, o.scale, o.pooling, &t, &n);
  if (rc) return rc;
  gs_shard_config cfg = {.ranks = o.ranks, .ranks_per_node = o.per_node, .batch = o.batch,
                         .mem_cap = o.mem_cap, .wire_elem_bytes = o.elem_bytes,
                         .row_sums = !o.embed_sgd, .zipf = o.zipf,
                         .force = o.force};
  if (gs_cost_preset(o.net, &cfg.net) != GS_OK) {
    cli_error(VERB, "--net: %s", gs_last_error());
    rc = 2;
    goto out;
  }
  if (o.out && cli_check_writable(o.out, "--out") != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    rc = 2;
    goto out;
  }
  if (o.have_lookup) cfg.lookup = o.lookup;
  else if (gs_embed_calibrate_job(t, n, (size_t)o.batch, o.ranks, &cfg.lookup) != GS_OK) {
    cli_fail(VERB, "measuring the lookup cost: %s", gs_last_error());
    rc = 1;
    goto out;
  }
  gs_shard_plan *p = NULL;
  double t0 = gs_now();
  gs_status st = gs_shard_plan_make(t, n, &cfg, &p);
  double plan_s = gs_now() - t0;
  if (st == GS_OK) st = gs_shard_plan_check(p, t, n, cfg.mem_cap);
  if (st != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    rc = st == GS_ERR_INVALID_ARG ? 2 : 1;
    gs_shard_plan_free(p);
    goto out;
  }
  double mx, mean, cont = gs_shard_contiguous_max(t, n, &cfg);
  double torchrec = gs_shard_torchrec_max(t, n, &cfg);
  gs_shard_plan_balance(p, &mx, &mean);
  if (o.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "tables", o.tables);
    cJSON_AddNumberToObject(j, "scale", o.scale);
    cJSON_AddNumberToObject(j, "ranks", o.ranks);
    cJSON_AddNumberToObject(j, "per_node", o.per_node);
    cJSON_AddNumberToObject(j, "batch", o.batch);
    cJSON_AddStringToObject(j, "net", o.net);
    for (int k = 0; k < CLI_LOOKUP_NKEYS; k++)
      cli_json_add(j, cli_lookup_keys[k].key,
                   *(const double *)((const char *)&cfg.lookup + cli_lookup_keys[k].offset),
                   cli_lookup_keys[k].fmt);
    cli_json_add(j, "zipf", o.zipf, "%.4g");
    cli_json_add(j, "max_rank_s", mx, "%.6g");
    cli_json_add(j, "mean_rank_s", mean, "%.6g");
    cli_json_add(j, "imbalance", mean > 0 ? mx / mean : 1, "%.4f");
    if (isfinite(cont)) cli_json_add(j, "contiguous_max_rank_s", cont, "%.6g");
    else cJSON_AddNullToObject(j, "contiguous_max_rank_s");
    if (isfinite(torchrec)) cli_json_add(j, "torchrec_greedy_max_rank_s", torchrec, "%.6g");
    else cJSON_AddNullToObject(j, "torchrec_greedy_max_rank_s");
    cJSON_AddBoolToObject(j, "torchrec_plan_taken", p->torchrec);
    cli_json_add(j, "plan_s", plan_s, "%.4g");
    cJSON *ta = cJSON_AddArrayToObject(j, "sharding");
    for (int i = 0; i < n; i++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "name", t[i].name);
      cJSON_AddStringToObject(e, "sharding", gs_shard_kind_name(p->kind[i]));
      cJSON_AddStringToObject(e, "why", p->why[i]);
      cJSON_AddItemToArray(ta, e);
    }
    cJSON *ra = cJSON_AddArrayToObject(j, "per_rank");
    for (int r = 0; r < o.ranks; r++) {
      cJSON *e = cJSON_CreateObject();
      cli_json_add(e, "est_s", p->rank_s[r], "%.6g");
      cli_json_add(e, "mem_bytes", p->rank_mem[r], "%.0f");
      cli_json_add(e, "wire_bytes", p->rank_wire[r], "%.0f");
      cJSON_AddItemToArray(ra, e);
    }
    /* The plan itself, as --out saves it (until 2026-12-06 the summary
     * alone: no shard's place). */
    char *text = gs_shard_plan_text(p, t);
    cJSON *pj = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (pj) cJSON_AddItemToObject(j, "plan", pj);
    else cJSON_AddNullToObject(j, "plan");
    cli_print_json(stdout, j);
  } else {
    char scale[48] = "";
    if (o.scale != 1) snprintf(scale, sizeof scale, ", rows x %g", o.scale);
    printf("# gradsync shard: %d tables (%s%s) on %d ranks (%d per node), batch %.0f, --net %s, "
           "%s all-to-all\n", n, o.tables, scale, o.ranks, o.per_node, o.batch, o.net,
           o.elem_bytes == 2 ? "16-bit" : "fp32");
    cli_lookup_print("# ", &cfg.lookup, o.have_lookup ? "--lookup" : "measured on this machine");
    if (cfg.lookup.cache_bytes > 0)
      printf("# in the cache: %.3g ns + %.3g ns per byte; %.1f MB of cache a rank, ids Zipf "
             "%.3g (Che's LRU approximation); %.3g ns a bag when half hold none of a "
             "shard's ids\n", cfg.lookup.alpha_hit * 1e9, cfg.lookup.beta_hit * 1e9,
             cfg.lookup.cache_bytes / 1e6, o.zipf, cfg.lookup.gamma_mixed * 1e9);
    else
      printf("# no cache model: every lookup at the first price\n");
    if (cfg.lookup.alpha_row > 0 || cfg.lookup.beta_row > 0)
      printf("# a distinct row's update a step: %.3g ns + %.3g ns per byte\n",
             cfg.lookup.alpha_row * 1e9, cfg.lookup.beta_row * 1e9);
    if (cfg.lookup.gamma_hit > 0 && cfg.lookup.cache_bytes > 0)
      printf("# a bag whose line of the pooled matrix is in the cache: %.3g ns\n",
             cfg.lookup.gamma_hit * 1e9);
    printf("\n%-16s %12s %6s  %-5s %s\n", "table", "rows", "dim", "shard", "why");
    for (int i = 0; i < n; i++) {
      char cell[4 * 16 + 1];
      printf("%s %12zu %6zu  %-5s %s\n", cli_cell(cell, sizeof cell, t[i].name, 16), t[i].rows,
             t[i].dim, gs_shard_kind_name(p->kind[i]), p->why[i]);
    }
    printf("\n%6s %10s %8s %12s %10s\n", "rank", "est ms", "shards", "memory MiB", "sent MB");
    for (int r = 0; r < o.ranks && r < 256; r++) {
      int k = 0;
      for (size_t j = 0; j < p->nshards; j++) k += p->shards[j].rank == r;
      printf("%6d %10.3f %8d %12.1f %10.2f\n", r, p->rank_s[r] * 1e3, k,
             p->rank_mem[r] / 1048576.0, p->rank_wire[r] / 1e6);
    }
    if (o.ranks > 256) printf("   ... (%d ranks; --json lists all)\n", o.ranks);
    char ctext[96];
    if (isfinite(cont))
      snprintf(ctext, sizeof ctext, "worst %.3f ms (%.2fx this plan's)", cont * 1e3,
               mx > 0 ? cont / mx : 1.0);
    else /* (it was priced all the same, a table above the cap on a rank) */
      snprintf(ctext, sizeof ctext, "a rank's tables miss --mem-cap");
    printf("\nworst rank %.3f ms, mean %.3f ms: imbalance %.3f; the reference's contiguous "
           "slicing: %s; planned in %.1f ms\n", mx * 1e3, mean * 1e3,
           mean > 0 ? mx / mean : 1.0, ctext, plan_s * 1e3);
    if (isfinite(torchrec))
      printf("TorchRec's greedy rules (proposer and partitioner) on the same cost: worst %.3f ms "
             "(%.2fx this plan's)%s\n", torchrec * 1e3, mx > 0 ? torchrec / mx : 1.0,
             p->torchrec ? "; better than this planner's own, so it is this plan" : "");
    else
      printf("TorchRec's greedy rules (proposer and partitioner): no plan of theirs fits "
             "--mem-cap\n");
  }
  if (o.out && gs_shard_plan_save(p, t, o.out) != GS_OK) {
    cli_fail(VERB, "--out: %s", gs_last_error());
    rc = 1;
  }
  gs_shard_plan_free(p);
out:
  gs_embed_specs_free(t);
  return rc;
}
