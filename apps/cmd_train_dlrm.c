/*
 * gradsync train --model dlrm: hybrid-parallel DLRM training (docs/DLRM.md)
 * on planted synthetic data. The loop is the library's (gs_dlrm_train_run,
 * gradsync/dlrm_dist.h); this file parses the options and prints its
 * events on rank 0: the plan, progress, and per epoch the held-out AUC and
 * log loss against the teacher's, the step's breakdown and bytes.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gradsync.h"

#define VERB "train"

static void usage(FILE *f) {
  fprintf(f,
    "usage: gradsync run -np N -- gradsync train --model dlrm [options]\n\n"
    "Trains a DLRM hybrid-parallel: the embedding tables sharded over the\n"
    "ranks, the MLPs replicated, on synthetic data with a planted signal.\n\n"
    "  --tables T[:SCALE]  kaggle, terabyte or mlperf (Criteo's 26 tables),\n"
    "                      rows times SCALE (1 when not given; without --tables\n"
    "                      kaggle:0.001), or a JSON\n"
    "                      file {\"tables\": [{\"name\", \"rows\", \"dim\",\n"
    "                      \"pooling\"}]} (rows times SCALE if given; a path\n"
    "                      that exists is a file whole, ':' in it or not)\n"
    "  --sharding S        auto (the planner, default), tw, rw, cw, twrw or dp\n"
    "  --plan FILE         a plan saved by gradsync shard --out instead\n"
    "  --lookup A,B[,G[,AH,BH,C,GM[,AR,BR,GH]]]\n"
    "                      this machine's lookup cost, as gradsync shard's\n"
    "                      --lookup (a previous run's or shard's figures): not\n"
    "                      measured at start (seconds on every rank); it prices\n"
    "                      the auto plan and the predicted lookup times\n"
    "  --a2a-precision P   fp32 (default), fp16 (fp16 forward, bf16 backward)\n"
    "                      or bf16: the pooled vectors' all-to-alls\n"
    "  --no-prefetch       send each step's ids at its start, not under the\n"
    "                      step before's embedding updates\n"
    "  --policy P          the MLP gradients' sum: fused (default: one\n"
    "                      all-reduce after the backward), an engine policy\n"
    "                      (wfbp, single, bucket[:MB], mgwfbp, optimal, dear):\n"
    "                      each layer's as the backward makes it, or auto:\n"
    "                      the faster of fused and the engine's plan, timed\n"
    "                      in turn over steps 7-22\n"
    "  --batch B           samples per rank and step (default 256)\n"
    "  --global-batch G    G samples a step over all ranks instead (G / ranks\n"
    "                      each): a run resumed on another world size keeps it\n"
    "  --epochs E          epochs (default 2)\n"
    "  --steps N           steps per epoch (default 100)\n"
    "  --eval N            held-out samples for AUC and log loss after each\n"
    "                      epoch, exactly N (default 16384; 0: no evaluation)\n"
    "  --bottom-mlp SPEC   default 13-128-64-D (D: the tables' dim, 16 for kaggle)\n"
    "  --top-mlp SPEC      default 128-64-1\n"
    "  --interaction I     dot (default), cat, or dcn: DCN-v2's low-rank cross\n"
    "                      layers over [x, e_1 .. e_T] (MLPerf's DLRM-DCNv2)\n"
    "  --dcn-layers L      dcn's cross layers (default 3)\n"
    "  --dcn-rank R        their rank (default 512, at most (T + 1) D)\n"
    "  --lr LR             the MLPs' SGD rate (default 0.1)\n"
    "  --embed-lr LR       the tables' row-wise Adagrad rate (default 0.05)\n"
    "  --embed-sgd         plain SGD on the tables instead\n"
    "  --pooling L         ids per sample and table (default 1) of a preset's\n"
    "                      tables and a file's that give none; a file's own\n"
    "                      pooling is rounded to whole ids (1 to 1000)\n"
    "  --zipf S            the ids' Zipf exponent (default 1.05)\n"
    "  --data FILE         a Criteo TSV day file (plain or .gz) instead of the\n"
    "                      synthetic data: its first steps x global batch lines\n"
    "                      train, the next --eval are held out (26 tables:\n"
    "                      --tables kaggle, terabyte or mlperf)\n"
    "  --frequency-threshold N  with --data: ids through a vocabulary of the\n"
    "                      training lines (TorchRec's and MLPerf's): a value seen\n"
    "                      N times or more there gets its own row, the rest one\n"
    "                      row, an empty field another; each table's rows the\n"
    "                      vocabulary's where --tables gives more (default: off,\n"
    "                      each value modulo the table's rows, as the reference)\n"
    "  --seed S            model and data seed (default 1)\n"
    "  --checkpoint DIR    commit to DIR at every epoch's end: each rank its\n"
    "                      shards and their Adagrad state, rank 0 the MLPs, the\n"
    "                      dp tables, the plan and the position (atomic on disk;\n"
    "                      DIR must be seen by every rank)\n"
    "  --commit-every N    also commit every N global steps\n"
    "  --stop-at-step N    commit after global step N and stop (exit 0); SIGUSR1\n"
    "                      asks for a stop at the next commit (exit 3: an elastic\n"
    "                      supervisor resizes)\n"
    "  --resume[=auto]     continue from DIR's last commit, bitwise as if never\n"
    "                      stopped (same ranks, tables, MLPs, seed, data, batch,\n"
    "                      steps and sharding); auto: if there is one\n"
    "  --json              one JSON line per epoch instead of text\n");
}

typedef struct dlrm_opts {
  const char *tables, *plan, *bottom, *top, *data;
  long min_count; /* --frequency-threshold (0: none) */
  double scale, lr, embed_lr, zipf;
  int sharding, epochs, pooling, json, embed_sgd;
  long batch, steps, eval;
  gs_dlrm_interaction interaction;
  int dcn_layers, dcn_rank; /* 0: the model's defaults */
  gs_dlrm_a2a_precision precision;
  int no_prefetch;
  const char *policy;
  unsigned long long seed;
  const char *checkpoint;
  long commit_every, stop_at_step, global_batch;
  int resume, batch_given;
  int have_lookup;        /* --lookup: the cost given, not measured */
  gs_cost_lookup lookup;
  int scale_given;  /* --tables T:SCALE */
  int zipf_given;   /* --zipf: the synthetic data's alone */
  int tables_given; /* --tables: a preset's rows as Criteo's unless scaled; without
                     * --tables, kaggle:0.001 */
} dlrm_opts;

/* The most samples a rank takes a step (--batch, and --global-batch's
 * share), and the most --steps and --eval. */
enum { MAX_PER_RANK = 1 << 24 };

static int parse_opts(int argc, char **argv, dlrm_opts *o) {
  const struct option *longs = cli_train_dlrm_longs; /* cli_util.c: train's and run's one list */
  *o = (dlrm_opts){.tables = "kaggle", .scale = 0.001, .lr = 0.1, .embed_lr = 0.05,
                   .zipf = 1.05, .sharding = -1, .epochs = 2, .pooling = 1, .batch = 256,
                   .steps = 100, .eval = 16384, .top = "128-64-1", .seed = 1,
                   .policy = "fused"};
  optind = 1;
  opterr = 0; /* unknown options get one line in the verbs' format */
  int c;
  double x;
  cli_seen seen = {{0}};
  while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
    /* An option given twice is refused, as the vision trainer does. */
    if (c != '?' && c != ':' && c != 'h' && cli_once(VERB, &seen, c, longs)) return 2;
    switch (c) {
      case 'm':
        if (strcmp(optarg, "dlrm") != 0) {
          cli_error(VERB, "--model %s: this is the DLRM trainer (--model dlrm)", optarg);
          return 2;
        }
        break;
      case 't': {
        static char buf[4096];
        if (cli_tables_arg(VERB, optarg, buf, sizeof buf, &o->scale, &o->scale_given))
          return 2;
        o->tables = buf;
        o->tables_given = 1;
        break;
      }
      case 's':
        if (gs_shard_kind_parse(optarg, &o->sharding) != GS_OK) {
          cli_error(VERB, "--sharding %s: expected auto, tw, rw, cw, twrw or dp", optarg);
          return 2;
        }
        break;
      case 'p': o->plan = optarg; break;
      case 'K':
        if (cli_lookup_arg(VERB, optarg, &o->lookup)) return 2;
        o->have_lookup = 1;
        break;
      case 'P':
        if (gs_dlrm_a2a_precision_parse(optarg, &o->precision) != GS_OK) {
          cli_error(VERB, "--a2a-precision %s: expected fp32, fp16 or bf16", optarg);
          return 2;
        }
        break;
      case 'b':
      case 'n':
      case 'E': {
        int v;
        if (cli_parse_int(optarg, c == 'E' ? 0 : 1, MAX_PER_RANK, &v)) {
          cli_error(VERB, "--%s %s: expected a whole number from %d to %d", c == 'b' ? "batch"
                    : c == 'n' ? "steps" : "eval", optarg, c == 'E' ? 0 : 1, MAX_PER_RANK);
          return 2;
        }
        *(c == 'b' ? &o->batch : c == 'n' ? &o->steps : &o->eval) = v;
        if (c == 'b') o->batch_given = 1;
        break;
      }
      case 'e':
        if (cli_parse_int(optarg, 1, 100000, &o->epochs)) {
          cli_error(VERB, "--epochs %s: expected 1 to 100000", optarg);
          return 2;
        }
        break;
      case 'B': o->bottom = optarg; break;
      case 'T': o->top = optarg; break;
      case 'i':
        if (gs_dlrm_interaction_parse(optarg, &o->interaction) != GS_OK) {
          cli_error(VERB, "--interaction %s: expected dot, cat or dcn", optarg);
          return 2;
        }
        break;
      case 'x':
        if (cli_parse_int(optarg, 1, GS_DLRM_MAX_CROSS, &o->dcn_layers)) {
          cli_error(VERB, "--dcn-layers %s: expected 1 to %d", optarg, GS_DLRM_MAX_CROSS);
          return 2;
        }
        break;
      case 'R':
        if (cli_parse_int(optarg, 1, 1000000, &o->dcn_rank)) {
          cli_error(VERB, "--dcn-rank %s: expected 1 to 1000000", optarg);
          return 2;
        }
        break;
      case 'l':
      case 'L':
        if (cli_parse_double(optarg, 0, 1000, &x)) {
          cli_error(VERB, "--%s %s: expected a rate in [0, 1000]", c == 'l' ? "lr" : "embed-lr",
                    optarg);
          return 2;
        }
        *(c == 'l' ? &o->lr : &o->embed_lr) = x;
        break;
      case 'g': o->embed_sgd = 1; break;
      case 'F': o->no_prefetch = 1; break;
      case 'y':
        if (strcmp(optarg, "fused") != 0) {
          gs_plan_policy pol;
          if (gs_plan_policy_parse(optarg, &pol) != GS_OK) {
            cli_error(VERB, "--policy: %s (or fused)", gs_last_error());
            return 2;
          }
        }
        o->policy = optarg;
        break;
      case 'o':
        if (cli_parse_int(optarg, 1, 1000, &o->pooling)) {
          cli_error(VERB, "--pooling %s: expected 1 to 1000", optarg);
          return 2;
        }
        break;
      case 'D': o->data = optarg; break;
      case 'Q':
        if (cli_parse_long(optarg, 1, 4294967295L, &o->min_count)) {
          cli_error(VERB, "--frequency-threshold %s: expected a whole number from 1 to "
                    "4294967295", optarg);
          return 2;
        }
        break;
      case 'z':
        if (cli_parse_double(optarg, 0, 10, &o->zipf)) {
          cli_error(VERB, "--zipf %s: expected 0 to 10", optarg);
          return 2;
        }
        o->zipf_given = 1;
        break;
      case 'S':
        if (cli_parse_double(optarg, 0, 9007199254740992.0, &x) || x != floor(x)) {
          cli_error(VERB, "--seed %s: expected a whole number", optarg);
          return 2;
        }
        o->seed = (unsigned long long)x;
        break;
      case 'j': o->json = 1; break;
      case 'c': o->checkpoint = optarg; break;
      case 'G':
        if (cli_parse_long(optarg, 1, 1L << 30, &o->global_batch)) {
          cli_error(VERB, "--global-batch %s: expected a whole number of at least 1", optarg);
          return 2;
        }
        break;
      case 'C':
      case 'X': {
        long v;
        if (cli_parse_long(optarg, 1, 1000000000, &v)) {
          cli_error(VERB, "--%s %s: expected a whole number from 1 to 1000000000",
                    c == 'C' ? "commit-every" : "stop-at-step", optarg);
          return 2;
        }
        *(c == 'C' ? &o->commit_every : &o->stop_at_step) = v;
        break;
      }
      case 'r':
        if (optarg && strcmp(optarg, "auto") != 0) {
          cli_error(VERB, "--resume=%s: the only value is auto (resume if there is a "
                    "checkpoint)", optarg);
          return 2;
        }
        o->resume = optarg ? GS_DLRM_RESUME_IF_ANY : GS_DLRM_RESUME;
        break;
      case 'h': usage(stdout); return 1;
      default: return cli_getopt_error(VERB, c, argv, longs);
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (!o->checkpoint && (o->resume || o->commit_every || o->stop_at_step)) {
    cli_error(VERB, "--%s needs --checkpoint DIR", o->resume ? "resume"
              : o->commit_every ? "commit-every" : "stop-at-step");
    return 2;
  }
  if (o->stop_at_step && o->stop_at_step > (long)o->epochs * o->steps) {
    cli_error(VERB, "--stop-at-step %ld: the run has %ld step%s (%d epoch%s of %ld)",
              o->stop_at_step, (long)o->epochs * o->steps,
              (long)o->epochs * o->steps == 1 ? "" : "s", o->epochs, o->epochs == 1 ? "" : "s",
              o->steps);
    return 2;
  }
  if ((o->dcn_layers || o->dcn_rank) && o->interaction != GS_DLRM_DCN) {
    cli_error(VERB, "--%s needs --interaction dcn", o->dcn_layers ? "dcn-layers" : "dcn-rank");
    return 2;
  }
  if (o->global_batch && o->batch_given) {
    cli_error(VERB, "--batch and --global-batch cannot be used together");
    return 2;
  }
  if (o->zipf_given && o->data) {
    cli_error(VERB, "--zipf and --data cannot be used together: a Criteo file's ids are its "
              "own (--zipf skews the synthetic data's)");
    return 2;
  }
  if (o->min_count && !o->data) {
    cli_error(VERB, "--frequency-threshold needs --data FILE (a vocabulary of a Criteo "
              "file's values; the synthetic data's ids are drawn in range)");
    return 2;
  }
  if (o->plan && o->sharding >= 0) {
    cli_error(VERB, "--plan and --sharding cannot be used together (the plan decides)");
    return 2;
  }
  return 0;
}

/* The tables of --tables: a preset or a file, rows times the scale, each
 * table's pooling the file's or --pooling, rounded to the whole ids a
 * sample's bag draws (so that the planner prices what the data holds). 0,
 * or the exit status after printing why. */
static int load_tables(const dlrm_opts *o, gs_embed_spec **t, int *n) {
  int preset = strcmp(o->tables, "kaggle") == 0 || strcmp(o->tables, "terabyte") == 0 ||
               strcmp(o->tables, "mlperf") == 0;
  /* No --tables: Kaggle's at 1/1000 (a demonstration that fits anywhere);
   * a preset named is Criteo's own rows, as gradsync shard reads it. */
  double scale = o->scale_given ? o->scale : preset && !o->tables_given ? 0.001 : 1.0;
  int rc = cli_tables_load(VERB, o->tables, scale, o->pooling, t, n);
  for (int i = 0; rc == 0 && i < *n; i++) {
    /* Below 1 refused before rounding (0.5 rounded up to 1 id while the
     * planner priced 0.5). */
    double p = round((*t)[i].pooling);
    if (!((*t)[i].pooling >= 1 && p <= 1000)) {
      cli_error(VERB, "--tables: table '%s' has pooling %g; the synthetic data draws 1 to "
                "1000 ids per sample", (*t)[i].name, (*t)[i].pooling);
      rc = 2;
    }
    (*t)[i].pooling = p;
  }
  return rc;
}

typedef struct view {
  int rank, size, json, tty, epochs;
  int line_open; /* a progress line rewritten in place waits for its end */
  int asked;     /* stopped at a commit as SIGUSR1 asked */
  int lookup_given; /* --lookup: the lookup cost given, not measured */
  double lr;        /* --lr, named in a diverged epoch's warning */
  const char *checkpoint, *policy;
  double bytes_ids, bytes_pooled, bytes_grad, bytes_dp, bytes_ar;
  const gs_embed_spec *tables; /* the model's, for the shards' names */
  const gs_shard_plan *plan;   /* the plan's shards (valid from its event to the run's end) */
} view;

/* Rank r's training memory over what it holds: (peak - base) / by[r],
 * by the bytes the library allocated or its shards'; -1 when a figure is
 * unknown (no arrays, a zero). */
static double mem_over(const gs_dlrm_train_event *ev, const double *by, int r) {
  const double *peak = ev->rank_peak_rss, *base = ev->rank_base_rss;
  if (!peak || !base || !by || peak[r] <= 0 || base[r] <= 0 || by[r] <= 0) return -1;
  return (peak[r] - base[r]) / by[r];
}

/* The largest mem_over of the ranks (-1: none), its rank in *at. */
static double mem_worst(const gs_dlrm_train_event *ev, const double *by, int *at) {
  double w = -1;
  for (int r = 0; r < ev->ranks; r++) {
    double x = mem_over(ev, by, r);
    if (x > w) w = x, *at = r;
  }
  return w;
}

static const char *human(double b, char *buf, size_t n) {
  if (b >= 1e6) snprintf(buf, n, "%.2f MB", b / 1e6);
  else if (b >= 1e3) snprintf(buf, n, "%.1f KB", b / 1e3);
  else snprintf(buf, n, "%.0f B", b);
  return buf;
}

/* --policy auto's choice, or how far its measuring has come. */
static void print_mlp_choice(const gs_dlrm_mlp_choice *c) {
  if (!c->active) return;
  if (!c->decided) {
    printf("  MLP gradients (--policy auto): still measuring fused against the engine "
           "(%llu steps so far)\n", (unsigned long long)c->step);
    return;
  }
  char plan[48], under[64];
  snprintf(plan, sizeof plan, "the engine's %s plan", c->plan);
  snprintf(under, sizeof under, "under %s", plan);
  printf("  MLP gradients (--policy auto): %s kept: %.2f ms a step, %.2f ms %s (the slowest "
         "rank's median of 8 steps each, in turn; chosen after step %llu)\n",
         c->engine ? plan : "fused", c->engine ? c->engine_ms : c->fused_ms,
         c->engine ? c->fused_ms : c->engine_ms, c->engine ? "fused" : under,
         (unsigned long long)c->step);
}

/* The busiest rank's lookup time against the cost model's for it, and
 * every rank's when there are few. */
static void print_lookup_ranks(const gs_dlrm_train_event *ev) {
  if (ev->ranks < 1 || !ev->rank_lookup_ms || !ev->rank_lookup_pred_ms) return;
  int hi = 0;
  for (int r = 1; r < ev->ranks; r++)
    if (ev->rank_lookup_ms[r] > ev->rank_lookup_ms[hi]) hi = r;
  double m = ev->rank_lookup_ms[hi], p = ev->rank_lookup_pred_ms[hi];
  printf("  lookups a step (median), measured against the cost model's: busiest rank %d "
         "%.2f ms against %.2f (%+.0f%%)", hi, m, p, m > 0 ? 100.0 * (p - m) / m : 0.0);
  if (ev->ranks <= 8) {
    printf("; by rank");
    for (int r = 0; r < ev->ranks; r++)
      printf(" %.2f/%.2f", ev->rank_lookup_ms[r], ev->rank_lookup_pred_ms[r]);
  }
  printf("\n");
}

/* Each shard's lookup time against the cost model's: the mean error over
 * the shards that took any, and the shards the model prices most above
 * (the largest positive error) and most below (the most negative) what they
 * took, a side left out when no shard is on it. */
static void print_lookup_shards(const view *v, const gs_dlrm_train_event *ev) {
  if (!ev->shard_lookup_ms || !ev->shard_lookup_pred_ms || !v->plan ||
      v->plan->nshards != ev->nshards)
    return;
  double sum = 0;
  size_t n = 0, hi = 0, lo = 0;
  double ehi = 0, elo = 0; /* only a positive error is above, a negative one below */
  for (size_t i = 0; i < ev->nshards; i++) {
    double m = ev->shard_lookup_ms[i], p = ev->shard_lookup_pred_ms[i];
    if (!(m > 0)) continue;
    double e = (p - m) / m;
    sum += fabs(e);
    n++;
    if (e > ehi) ehi = e, hi = i;
    if (e < elo) elo = e, lo = i;
  }
  if (n == 0) return;
  printf("  by shard: mean |error| %.0f%% over %zu shards", 100.0 * sum / (double)n, n);
  for (int k = 0; k < 2; k++) {
    if (k ? !(elo < 0) : !(ehi > 0)) continue; /* no shard on that side */
    size_t i = k ? lo : hi;
    const gs_shard *s = &v->plan->shards[i];
    printf("; %s: %s (%s) on rank %d %.3f ms against %.3f (%+.0f%%)",
           k ? "most below" : "most above", v->tables[s->table].name,
           gs_shard_kind_name(s->kind), s->rank, ev->shard_lookup_ms[i],
           ev->shard_lookup_pred_ms[i], 100.0 * (k ? elo : ehi));
  }
  printf("\n");
}

/* A JSON number, or null for a NaN or an infinity (JSON has neither). */
static const char *json_num(double x, int digits, char *buf, size_t n) {
  if (isfinite(x)) snprintf(buf, n, "%.*f", digits, x);
  else snprintf(buf, n, "null");
  return buf;
}

/* The bound above which an epoch's mean training loss says the run has
 * diverged: ten times the log loss of predicting 1/2 for every sample,
 * ln 2, which is the most any labels' base-rate log loss (their entropy,
 * -p ln p - (1 - p) ln(1 - p)) can be. A model that learnt nothing
 * scores about that entropy; ten times the largest it can be is a model
 * confidently wrong on most samples: its rate too large. A non-finite
 * loss fails the run (the library's). */
#define DIVERGED_LOSS (10 * 0.6931471805599453)

/* Warns on stderr (rank 0, once an epoch) when the epoch's mean training
 * loss is finite but above DIVERGED_LOSS: the run exits 0 all the same. */
static void warn_diverged(const view *v, const gs_dlrm_train_event *ev) {
  if (!isfinite(ev->loss) || ev->loss <= DIVERGED_LOSS) return;
  fflush(stdout); /* after the progress lines before it */
  fprintf(stderr, "gradsync %s: warning: epoch %d's mean training loss is %.4g, over %.2f "
          "(10 ln 2: ten times the log loss of predicting 1/2, which no labels' base rate "
          "exceeds): the training has likely diverged; try a lower --lr (this run's %g)\n",
          VERB, ev->epoch, ev->loss, DIVERGED_LOSS, v->lr);
}

/* A JSON string of s (a table's name, from a file: any bytes but NUL). */
static void json_string(const char *s) {
  putchar('"');
  for (const unsigned char *q = (const unsigned char *)(s ? s : ""); *q; q++) {
    if (*q == '"' || *q == '\\') printf("\\%c", *q);
    else if (*q < 0x20) printf("\\u%04x", *q);
    else putchar(*q);
  }
  putchar('"');
}

/* Where the lookup cost the run prices with came from, in words. */
static const char *lookup_from(const view *v) {
  return v->lookup_given ? "--lookup"
         : v->size > 1   ? "measured at start on every rank, their mean"
                         : "measured at start";
}

/* The vocabulary of --frequency-threshold: its lines, and per table the
 * distinct values, those kept and the rows trained. */
static void vocab_print(const gs_dlrm_train_event *ev, int json) {
  size_t lines, distinct, kept, all_d = 0, all_k = 0, rows = 0;
  int capped = 0;
  gs_criteo_vocab_stats(ev->vocab, 0, NULL, NULL, &lines);
  if (json)
    printf("{\"vocabulary\": {\"lines\": %zu, \"seconds\": %.3f, \"tables\": [", lines,
           ev->vocab_s);
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) {
    gs_criteo_vocab_stats(ev->vocab, t, &distinct, &kept, NULL);
    all_d += distinct;
    all_k += kept;
    rows += ev->tables[t].rows;
    capped += ev->tables[t].rows < gs_criteo_vocab_rows(ev->vocab, t);
    if (json)
      printf("%s{\"distinct\": %zu, \"kept\": %zu, \"rows\": %zu}", t ? ", " : "", distinct,
             kept, ev->tables[t].rows);
  }
  if (json)
    printf("]}}\n");
  else
    printf("vocabulary of the first %zu lines (%.2f s): %zu distinct values, %zu kept; %zu "
           "rows in all%s\n", lines, ev->vocab_s, all_d, all_k, rows,
           capped ? " (some tables at --tables' rows, ids modulo them)" : "");
}

static void on_event(const gs_dlrm_train_event *ev, void *user) {
  view *v = user;
  if (ev->kind == GS_DLRM_EV_COMMIT) v->asked = ev->stopped == 2; /* every rank's */
  if (v->rank != 0) return;
  if (ev->kind == GS_DLRM_EV_PLAN) {
    const gs_shard_plan *p = ev->plan;
    v->plan = p;
    if (ev->vocab) vocab_print(ev, v->json);
    int counts[GS_SHARD_KIND_COUNT] = {0};
    for (int t = 0; t < p->ntables; t++) counts[p->kind[t]]++;
    if (!v->json) {
      printf("plan: %d table%s on %d rank%s:", p->ntables, p->ntables == 1 ? "" : "s", p->ranks,
             p->ranks == 1 ? "" : "s");
      for (int k = 0; k < GS_SHARD_KIND_COUNT; k++)
        if (counts[k]) printf(" %d %s", counts[k], gs_shard_kind_name((gs_shard_kind)k));
      double mx, mean;
      gs_shard_plan_balance(p, &mx, &mean);
      printf("; estimated imbalance %.2fx\n", mean > 0 ? mx / mean : 1.0);
      if (strcmp(v->policy, "auto") == 0)
        printf("MLP gradients: fused or the engine, whichever steps faster (timed in turn "
               "over steps 7-22)\n");
      else if (strcmp(v->policy, "fused") != 0)
        printf("MLP gradients: the engine, policy %s, each layer's as the backward makes it\n",
               v->policy);
      else
        printf("MLP gradients: one fused all-reduce after the backward\n");
      if (ev->lookup) cli_lookup_print("", ev->lookup, lookup_from(v));
    }
    return;
  }
  if (ev->kind == GS_DLRM_EV_RESUME) {
    /* A commit at the run's last step: nothing is left to train. */
    if (v->json && ev->epoch > v->epochs)
      printf("{\"resumed_at_step\": %zu, \"complete\": true, \"epochs\": %d, "
             "\"steps_per_epoch\": %zu, \"from_ranks\": %d, \"load_ms\": %.3f}\n",
             ev->global_step, v->epochs, ev->steps, ev->from_ranks, 1e3 * ev->commit_s);
    else if (v->json)
      printf("{\"resumed_at_step\": %zu, \"complete\": false, \"epoch\": %d, "
             "\"step_in_epoch\": %zu, \"from_ranks\": %d, \"from_step\": %zu, "
             "\"from_global_batch\": %zu, \"load_ms\": %.3f}\n",
             ev->global_step, ev->epoch, ev->step, ev->from_ranks, ev->from_step,
             ev->from_global_batch, 1e3 * ev->commit_s);
    else if (ev->epoch > v->epochs)
      printf("resumed from %s at step %zu: the run is complete (%d epoch%s of %zu step%s)\n",
             v->checkpoint, ev->global_step, v->epochs, v->epochs == 1 ? "" : "s", ev->steps,
             ev->steps == 1 ? "" : "s");
    else {
      char regroup[160] = "";
      if (ev->from_step != ev->global_step)
        snprintf(regroup, sizeof regroup, "; the commit at step %zu in steps of %zu samples",
                 ev->from_step, ev->from_global_batch);
      printf("resumed from %s at step %zu (epoch %d, step %zu of %zu%s) in %.1f ms%s\n",
             v->checkpoint, ev->global_step, ev->epoch, ev->step, ev->steps, regroup,
             1e3 * ev->commit_s,
             ev->from_ranks != v->size ? ", its tables re-sharded from another world size" : "");
    }
    fflush(stdout);
    return;
  }
  if (ev->kind == GS_DLRM_EV_COMMIT) {
    char b1[32];
    if (v->line_open && !v->json) printf("\n");
    v->line_open = 0;
    if (v->json)
      printf("{\"commit_step\": %zu, \"commit_ms\": %.3f, \"commit_bytes_rank0\": %zu, "
             "\"published_step\": %zu, \"write_ms\": %.3f, \"background\": %s, "
             "\"stopped\": %s}\n", ev->global_step, 1e3 * ev->commit_s, ev->commit_bytes,
             ev->published_step, 1e3 * ev->write_s,
             ev->published_step != ev->global_step ? "true" : "false",
             ev->stopped ? "true" : "false");
    else if (ev->published_step != ev->global_step)
      printf("commit at step %zu to %s: %s on rank 0, in place after step %zu (written in the "
             "background in %.1f ms; training stalled %.1f ms)\n", ev->global_step,
             v->checkpoint, human((double)ev->commit_bytes, b1, sizeof b1), ev->published_step,
             1e3 * ev->write_s, 1e3 * ev->commit_s);
    else
      printf("commit at step %zu to %s: %s on rank 0 in %.1f ms%s\n", ev->global_step,
             v->checkpoint, human((double)ev->commit_bytes, b1, sizeof b1), 1e3 * ev->commit_s,
             ev->stopped == 2 ? "; stopped as asked (--resume continues from here)"
             : ev->stopped   ? "; stopped (--resume continues from here)"
                             : "");
    fflush(stdout);
    return;
  }
  if (ev->kind == GS_DLRM_EV_STEP) {
    /* A progress line rewritten in place on a terminal; four lines an
     * epoch into a file or a pipe. */
    size_t every = v->tty ? 10 : (ev->steps + 3) / 4;
    if (!v->json && (ev->step % every == 0 || ev->step == ev->steps)) {
      printf(v->tty ? "\repoch %d step %zu/%zu loss %.5f" : "epoch %d step %zu/%zu loss %.5f\n",
             ev->epoch, ev->step, ev->steps, ev->loss);
      if (v->tty && ev->step == ev->steps) printf("\n");
      v->line_open = v->tty && ev->step != ev->steps;
      fflush(stdout);
    }
    return;
  }
  const gs_dlrm_dist_stats *s = &ev->stats;
  double n = s->steps ? (double)s->steps : 1;
  warn_diverged(v, ev);
  if (v->json) {
    /* An undefined metric (no teacher with a Criteo file, an AUC of one
     * class, a diverged loss) is null, not the "nan" JSON lacks. */
    char loss[32], auc[32], ll[32], teacher[32], ne[32], cal[32];
    printf("{\"epoch\": %d, \"train_loss\": %s, \"auc\": %s, \"log_loss\": %s, "
           "\"teacher_auc\": %s, \"samples_per_s\": %.1f, \"step_ms\": %.3f, "
           "\"lookup_ms\": %.3f, \"mlp_ms\": %.3f, \"a2a_ms\": %.3f, \"allreduce_ms\": %.3f, "
           "\"id_bytes\": %.0f, \"pooled_bytes\": %.0f, \"grad_bytes\": %.0f, "
           "\"dp_bytes\": %.0f, \"allreduce_bytes\": %.0f, \"peak_rss_bytes\": %zu, "
           "\"eval_samples\": %zu, \"ne\": %s, \"calibration\": %s", ev->epoch,
           json_num(ev->loss, 6, loss, sizeof loss),
           json_num(ev->auc, 6, auc, sizeof auc), json_num(ev->log_loss, 6, ll, sizeof ll),
           json_num(ev->teacher_auc, 6, teacher, sizeof teacher), ev->samples_per_s,
           1e3 * s->total_s / n, 1e3 * s->lookup_s / n, 1e3 * s->mlp_s / n, 1e3 * s->a2a_s / n,
           1e3 * s->allreduce_s / n, s->id_bytes / n, s->pooled_bytes / n, s->grad_bytes / n,
           s->dp_bytes / n, s->allreduce_bytes / n, ev->peak_rss_bytes, ev->eval_samples,
           json_num(ev->ne, 6, ne, sizeof ne), json_num(ev->calibration, 6, cal, sizeof cal));
    /* the training's memory (peak - base) over what it allocated and over
     * its shards', rank 0's and the worst rank's, and every rank's figures */
    printf(", \"base_rss_bytes\": %zu, \"alloc_bytes\": %zu, \"shard_mem_bytes\": %.0f",
           ev->base_rss_bytes, ev->alloc_bytes, ev->shard_mem_bytes);
    static const char *const over[2] = {"mem_over_alloc", "mem_over_shards"};
    const double *by[2] = {ev->rank_alloc, ev->rank_shard_mem};
    for (int k = 0; k < 2; k++) {
      int worst = -1;
      double r0 = mem_over(ev, by[k], 0), rw = mem_worst(ev, by[k], &worst);
      if (r0 >= 0) printf(", \"%s\": %.4f", over[k], r0);
      if (rw >= 0) printf(", \"%s_max\": %.4f, \"%s_max_rank\": %d", over[k], rw, over[k], worst);
    }
    if (ev->rank_peak_rss) {
      static const char *const key[4] = {"rank_peak_rss_bytes", "rank_base_rss_bytes",
                                         "rank_alloc_bytes", "rank_shard_mem_bytes"};
      const double *arr[4] = {ev->rank_peak_rss, ev->rank_base_rss, ev->rank_alloc,
                              ev->rank_shard_mem};
      for (int k = 0; k < 4; k++) {
        printf(", \"%s\": [", key[k]);
        for (int r = 0; r < ev->ranks; r++) printf("%s%.0f", r ? ", " : "", arr[k][r]);
        printf("]");
      }
    }
    printf(", \"ids_ms\": %.3f, \"pooled_ms\": %.3f, \"grads_ms\": %.3f, \"mlp_policy\": \"%s\"",
           1e3 * s->ids_s / n, 1e3 * s->pooled_s / n, 1e3 * s->grads_s / n, v->policy);
    /* --policy auto's choice: "measuring" until made. */
    const gs_dlrm_mlp_choice *c = &ev->mlp_choice;
    if (c->active) {
      char step[32] = "null"; /* no step chosen at while measuring */
      if (c->decided) snprintf(step, sizeof step, "%llu", (unsigned long long)c->step);
      printf(", \"mlp_chosen\": \"%s\", \"mlp_fused_ms\": %.3f, \"mlp_engine_ms\": %.3f, "
             "\"mlp_engine_plan\": \"%s\", \"mlp_chosen_step\": %s",
             !c->decided ? "measuring" : c->engine ? "engine" : "fused", c->fused_ms,
             c->engine_ms, c->plan, step);
    }
    /* The lookup cost the predictions below are priced with (gradsync
     * shard's keys), and where it came from: "--lookup" or "measured".
     * Finite: a given one is checked (gs_cost_lookup_check), a measured
     * one is a fit of finite times. */
    if (ev->lookup) {
      printf(", \"lookup_from\": \"%s\"", v->lookup_given ? "--lookup" : "measured");
      for (int k = 0; k < CLI_LOOKUP_NKEYS; k++) {
        printf(", \"%s\": ", cli_lookup_keys[k].key);
        printf(cli_lookup_keys[k].fmt,
               *(const double *)((const char *)ev->lookup + cli_lookup_keys[k].offset));
      }
    }
    /* Every rank's lookup time, measured and as the cost model predicts. */
    for (int k = 0; k < 2; k++) {
      const double *x = k ? ev->rank_lookup_pred_ms : ev->rank_lookup_ms;
      printf(", \"%s\": [", k ? "rank_lookup_pred_ms" : "rank_lookup_ms");
      for (int r = 0; x && r < ev->ranks; r++) {
        char num[32];
        printf("%s%s", r ? ", " : "", json_num(x[r], 4, num, sizeof num));
      }
      printf("]");
    }
    /* And every shard's, in the plan's order (as its saved plan lists them). */
    for (int k = 0; k < 2; k++) {
      const double *x = k ? ev->shard_lookup_pred_ms : ev->shard_lookup_ms;
      printf(", \"%s\": [", k ? "shard_lookup_pred_ms" : "shard_lookup_ms");
      for (size_t i = 0; x && i < ev->nshards; i++) {
        char num[32];
        printf("%s%s", i ? ", " : "", json_num(x[i], 4, num, sizeof num));
      }
      printf("]");
    }
    /* which shard each is: its rank and rows */
    const gs_shard *sh = v->plan && v->plan->nshards == ev->nshards ? v->plan->shards : NULL;
    for (int k = 0; k < 2; k++) {
      printf(", \"%s\": [", k ? "shard_rows" : "shard_rank");
      for (size_t i = 0; sh && i < ev->nshards; i++)
        printf("%s%zu", i ? ", " : "",
               k ? sh[i].row_hi - sh[i].row_lo : (size_t)sh[i].rank);
      printf("]");
    }
    /* and its table's name and sharding */
    for (int k = 0; k < 2; k++) {
      printf(", \"%s\": [", k ? "shard_sharding" : "shard_table");
      for (size_t i = 0; sh && i < ev->nshards; i++) {
        printf("%s", i ? ", " : "");
        if (k) printf("\"%s\"", gs_shard_kind_name(sh[i].kind));
        else json_string(v->tables[sh[i].table].name);
      }
      printf("]");
    }
    printf("}\n");
    return;
  }
  char b1[32], b2[32], b3[32], b4[32], b5[32];
  char teacher[48] = "", auc[128], held[400];
  if (!isnan(ev->teacher_auc))
    snprintf(teacher, sizeof teacher, " (teacher %.4f)", ev->teacher_auc);
  if (isnan(ev->auc))
    snprintf(auc, sizeof auc, "undefined (%s)",
             ev->auc_undefined ? ev->auc_undefined : "no score to rank");
  else
    snprintf(auc, sizeof auc, "%.4f", ev->auc);
  if (ev->eval_samples == 0)
    snprintf(held, sizeof held, "held-out evaluation skipped (--eval 0)");
  else {
    /* NE and calibration, each "undefined" where its labels allow none. */
    char more[96] = "", ne[24] = "undefined", cal[24] = "undefined";
    if (!isnan(ev->ne)) snprintf(ne, sizeof ne, "%.4f", ev->ne);
    if (!isnan(ev->calibration)) snprintf(cal, sizeof cal, "%.3f", ev->calibration);
    if (!isnan(ev->ne) || !isnan(ev->calibration))
      snprintf(more, sizeof more, " (NE %s, calibration %s)", ne, cal);
    snprintf(held, sizeof held, "held-out AUC %s%s, log loss %.4f over %zu sample%s%s", auc,
             teacher, ev->log_loss, ev->eval_samples, ev->eval_samples == 1 ? "" : "s", more);
  }
  printf("epoch %d: %s; train loss %.4f; %.0f samples/s\n", ev->epoch, held, ev->loss,
         ev->samples_per_s);
  printf("  step %.2f ms on rank 0: lookup %.2f, MLPs %.2f, all-to-all %.2f (ids %.2f, pooled "
         "%.2f, gradients %.2f), all-reduce (exposed) %.2f\n", 1e3 * s->total_s / n,
         1e3 * s->lookup_s / n, 1e3 * s->mlp_s / n, 1e3 * s->a2a_s / n, 1e3 * s->ids_s / n,
         1e3 * s->pooled_s / n, 1e3 * s->grads_s / n, 1e3 * s->allreduce_s / n);
  print_mlp_choice(&ev->mlp_choice);
  printf("  sent per step: ids %s, pooled %s, gradients %s, dp %s, MLP all-reduce %s\n",
         human(s->id_bytes / n, b1, sizeof b1), human(s->pooled_bytes / n, b2, sizeof b2),
         human(s->grad_bytes / n, b3, sizeof b3), human(s->dp_bytes / n, b4, sizeof b4),
         human(s->allreduce_bytes / n, b5, sizeof b5));
  if (ev->peak_rss_bytes > 0 && ev->base_rss_bytes > 0) {
    /* What the training added to the process (its peak over the memory
     * before its shards and model existed) against what it allocated at
     * most (its shards and their state, the MLPs, every buffer: the rest
     * is MPI's buffers, the allocator's free pages, code) and against its
     * shards as the planner prices them. */
    double added = (double)ev->peak_rss_bytes - (double)ev->base_rss_bytes;
    printf("  memory on rank 0: peak %s, %s before its tables; the training's %s against "
           "%s allocated (%s of it shards and state)",
           human((double)ev->peak_rss_bytes, b1, sizeof b1),
           human((double)ev->base_rss_bytes, b2, sizeof b2), human(added, b3, sizeof b3),
           human((double)ev->alloc_bytes, b4, sizeof b4),
           human(ev->shard_mem_bytes, b5, sizeof b5));
    if (ev->alloc_bytes > 0) printf(": %.2fx", added / (double)ev->alloc_bytes);
    int worst = -1;
    double rw = mem_worst(ev, ev->rank_alloc, &worst);
    if (ev->ranks > 1 && rw >= 0) printf("; the most, rank %d: %.2fx", worst, rw);
    printf("\n");
  }
  print_lookup_ranks(ev);
  print_lookup_shards(v, ev);
  fflush(stdout);
}

/* --data, checked before the run so that a missing file (or a directory)
 * is a usage error (GS_ERR_INVALID_ARG, its message in gs_last_error());
 * the library reads it. Each rank looks on its own host: the ranks agree
 * on what they found (said once when alike). */
static gs_status check_data(const char *path) {
  struct stat sb;
  if (access(path, R_OK) != 0)
    return gs_error(GS_ERR_INVALID_ARG, "--data %s: cannot read it: %s", path, strerror(errno));
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return gs_error(GS_ERR_INVALID_ARG, "--data %s: a directory, not a Criteo TSV file", path);
  return GS_OK;
}

int cmd_train_dlrm(int argc, char **argv) {
  dlrm_opts o;
  /* The options are every rank's alike: rank 0 alone says what is wrong. */
  cli_argv_errors(1);
  int rc = parse_opts(argc, argv, &o);
  cli_argv_errors(0);
  if (rc == 1) return 0;
  gs_embed_spec *t = NULL;
  int nt = 0;
  if (rc == 0) rc = load_tables(&o, &t, &nt);
  size_t D = nt > 0 && t[0].dim ? t[0].dim : 16;
  for (int i = 0; rc == 0 && i < nt; i++)
    if (t[i].dim != D) {
      cli_error(VERB, "--tables: table '%s' is %zu wide and '%s' %zu (a DLRM's tables are all "
                "one width)", t[i].name, t[i].dim, t[0].name, D);
      rc = 2;
    }
  char bottom[64];
  snprintf(bottom, sizeof bottom, "13-128-64-%zu", D);
  /* `gradsync submit` checks a job's options before queueing it
   * (GRADSYNC_CHECK_ARGS=1): the options and the tables, and a --plan file
   * against the tables (the world size is the job's, not known here);
   * nothing is run and nothing written. */
  const char *check_only = getenv("GRADSYNC_CHECK_ARGS");
  if (check_only && strcmp(check_only, "1") == 0) {
    gs_shard_plan *p = NULL;
    if (rc == 0 && o.data && check_data(o.data) != GS_OK) {
      cli_error(VERB, "%s", gs_last_error());
      rc = 2;
    }
    if (rc == 0 && o.checkpoint) rc = cli_check_out_dir(VERB, "--checkpoint", o.checkpoint);
    if (rc == 0 && o.plan && gs_shard_plan_load(o.plan, t, nt, 0, &p) != GS_OK) {
      cli_error(VERB, "--plan: %s", gs_last_error());
      rc = 2;
    }
    if (rc == 0 && p && !p->row_state && !o.embed_sgd) { /* as the run refuses it */
      cli_error(VERB, "--plan: sharding plan %s: made for plain SGD on the tables "
                "(\"row_state\": false: no Adagrad state priced), and this run trains them "
                "with row-wise Adagrad: give --embed-sgd, or make the plan without "
                "--embed-sgd", o.plan);
      rc = 2;
    }
    gs_shard_plan_free(p);
    gs_embed_specs_free(t);
    return rc;
  }
  if (rc && !cli_under_launcher()) {
    gs_embed_specs_free(t);
    return rc;
  }
  /* SIGUSR1 (which mpirun forwards to the ranks): stop at the next commit,
   * routed to a thread of its own before any thread that computes starts
   * (gs_signal_route: a handler inside oneDNN's GEMM corrupts the heap). */
  if (o.checkpoint && gs_signal_route(SIGUSR1, gs_dlrm_train_request_stop) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    gs_embed_specs_free(t);
    return 1;
  }
  cli_rank r;
  if (cli_rank_init(&r, VERB, &argc, &argv)) return rc ? rc : 1;
  rc = cli_rank_connect(&r, CLI_RANK_BLAS, rc, "bad options");
  if (rc) {
    gs_embed_specs_free(t);
    return rc;
  }
  /* Set-up failures every rank may meet alike (a --data it cannot read)
   * are agreed: said once by rank 0 when alike, else by each rank. */
  if (o.data && cli_agree_outcome(&r, check_data(o.data))) rc = 2;
  /* The same decision on every rank: no agreement needed. */
  if (o.global_batch) {
    if (o.global_batch % r.size != 0) {
      if (r.rank == 0)
        cli_error(VERB, "--global-batch %ld does not split evenly over %d ranks",
                  o.global_batch, r.size);
      rc = 2;
    }
    o.batch = o.global_batch / r.size > 0 ? o.global_batch / r.size : 1;
    /* (the cap of --batch: until 2026-12-06 a larger share ran out of
     * memory in the MLPs instead) */
    if (rc == 0 && o.batch > MAX_PER_RANK) {
      if (r.rank == 0)
        cli_error(VERB, "--global-batch %ld over %d rank%s is %ld samples a rank, more than "
                  "the %d a rank takes (--batch's cap)", o.global_batch, r.size,
                  r.size == 1 ? "" : "s", o.batch, (int)MAX_PER_RANK);
      rc = 2;
    }
  }
  gs_dlrm_train_config cfg = {
      .model = {o.bottom ? o.bottom : bottom, o.top, t, nt, o.interaction, 0, o.seed,
                o.dcn_layers, (size_t)o.dcn_rank},
      .optim = {(float)o.lr, {o.embed_sgd ? GS_EMBED_SGD : GS_EMBED_ROWWISE_ADAGRAD,
                              (float)o.embed_lr, 1e-8f}},
      .data = gs_dlrm_synth_defaults(),
      .sharding = o.sharding,
      .plan_file = o.plan,
      .precision = o.precision,
      .no_prefetch = o.no_prefetch,
      .mlp_policy = o.policy,
      .batch = (size_t)o.batch,
      .epochs = o.epochs,
      .steps = (size_t)o.steps,
      .eval_samples = (size_t)o.eval,
      .checkpoint_dir = o.checkpoint,
      .commit_every = (size_t)o.commit_every,
      .stop_at_step = (size_t)o.stop_at_step,
      .resume = o.resume,
      .lookup = o.have_lookup ? &o.lookup : NULL};
  cfg.data.zipf_s = o.zipf;
  cfg.criteo_file = o.data;
  cfg.criteo_min_count = (uint64_t)o.min_count;
  cfg.data.pooling = o.pooling;
  cfg.data.table_pooling = 1; /* each table's, as the planner prices it */
  view v = {.rank = r.rank, .size = r.size, .epochs = o.epochs, .json = o.json,
            .tty = cli_on_terminal(), .checkpoint = o.checkpoint, .policy = o.policy,
            .tables = t, .lookup_given = o.have_lookup, .lr = o.lr};
  if (rc == 0 && r.rank == 0 && o.checkpoint && !o.resume)
    cli_warn_checkpoint_replaced(VERB, o.checkpoint, 1);
  gs_status st = rc ? GS_OK : gs_dlrm_train_run(&cfg, r.comm, on_event, &v);
  if (st != GS_OK) {
    /* Every rank returns the run's failure (gs_dlrm_train_run). One that
     * every rank met alike (a bad MLP spec, data that does not fit the
     * model) is said once, by rank 0; the ranks agree on it unless the
     * library has marked it every rank's already. */
    rc = st == GS_ERR_INVALID_ARG || st == GS_ERR_PARSE || st == GS_ERR_IO ? 2 : 1;
    if (gs_last_error_shared()) {
      if (r.rank == 0)
        (rc == 2 ? cli_error : cli_fail)(VERB, "%s%s", gs_last_error(),
                                         r.size > 1 ? " (on every rank)" : "");
    } else {
      cli_agree_outcome(&r, st);
    }
  }
  gs_embed_specs_free(t);
  rc = cli_rank_finish(&r, rc);
  /* Stopped at a commit as asked: the supervisor's cue to relaunch. */
  return rc == 0 && v.asked ? 3 : rc;
}
