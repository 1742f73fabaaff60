/*
 * Checkpoints of hybrid-parallel DLRM training (gs_dlrm_train_config's
 * checkpoint_dir, commit_every, stop_at_step and resume; docs/DLRM.md,
 * "Checkpoints").
 *
 * Each rank saves what it owns: its shards of the tables (rows, and with
 * row-wise Adagrad their accumulators), and rank 0 the replicated state as
 * well: the MLPs' weights (plain SGD: no optimizer state) and the dp tables
 * (rows and accumulators). The replicated state is the same on every rank
 * (the MLP gradients are one all-reduce's result, the dp updates run over
 * the same all-gathered batch in the same order): every commit checks it
 * with a CRC-32 of each rank's copy, and refuses to commit if a rank's
 * differs, rather than save rank 0's and resume something else. The
 * position is the global step alone, since the synthetic data is a pure
 * function of the sample index, and the unfinished epoch's loss sum (so
 * that its reported mean is the uninterrupted run's).
 *
 * Files in the directory, `ID` the run's 64-bit id in hex (fresh for every
 * launch, so no commit's file name is ever reused) and S the global step:
 *   dlrm-ID-stepS.rankR.gsck  rank R's state (binary, ends with its CRC-32)
 *   dlrm-ID-stepS.plan.json   the sharding plan (gs_shard_plan_save)
 *   dlrm.json                 the manifest: the commit point
 * A commit: every rank writes its file (a temporary name, fsync, rename,
 * fsync of the directory); the ranks agree that every rank's is on disk
 * (gs_agree, with each file's size and CRC-32 and the replicas' CRC); rank
 * 0 writes the plan and then the manifest, which names the step, the run,
 * the plan and every rank's file with its size and CRC, by the same
 * rename; the ranks agree that it is in place; then each rank removes its
 * files of older commits (and rank 0 older plans). A crash before the
 * manifest's rename leaves the previous manifest, whose files are still
 * there; a crash after it, stale files that the next commit removes.
 * In the background (the default for a commit the run goes on after:
 * "A commit: written, made durable ..., published" below), the rank's file
 * is written at the commit and a thread checksums, fsyncs and renames it
 * (and removes the older commits' files) while training goes on; the
 * agreement and the manifest come at a later step every rank knows.
 *
 * Resuming: every rank reads the manifest and checks it against its run
 * (the world size, tables, MLPs, seed, optimizer, batch, steps per epoch,
 * the data's parameters and the sharding), and the ranks agree that they
 * read the same one; the plan is the checkpoint's. Another global batch
 * resumes at the same sample when an epoch is the same samples and the
 * commit sits at one of this run's steps (read_checkpoint). Each rank then reads its
 * own file straight into its shards (checking its size, header, every
 * shard's block and both CRCs); rank 0's MLPs and dp replicas are
 * broadcast. Every check's failure is agreed on, so one rank failing alone
 * (a missing or corrupted file) fails every rank with its message.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlrm_internal.h"
#include "gradsync/comm.h"
#include "gs_internal.h"

#define MANIFEST "dlrm.json"
#define FORMAT "gradsync DLRM checkpoint"
static const char MAGIC[8] = {'G', 'S', 'D', 'L', 'R', 'M', 'K', '1'};
enum { MANIFEST_MAX = 1 << 22, PLAN_MAX = 1 << 26 };

/* The head of a rank's file; then each shard's header and rows (and
 * accumulators), then rank 0's MLP weights, then the CRC-32. Native byte
 * order (a checkpoint resumes on machines like the one that wrote it). */
typedef struct file_header {
  char magic[8];
  uint32_t rank, ranks;
  uint64_t step;
  uint32_t nshards;   /* in this file: this rank's, and on rank 0 the dp replicas */
  uint32_t has_state; /* row-wise Adagrad: each shard's accumulators follow its rows */
  uint64_t mlp_floats; /* rank 0: the MLPs' weights; others 0 */
} file_header;

typedef struct shard_header {
  uint32_t table, kind;
  uint64_t row_lo, row_hi, col_lo, col_hi;
} shard_header;

struct dlrm_ckpt {
  const gs_dlrm_train_config *cfg;
  gs_comm *comm;
  int rank, ranks;
  const gs_embed_spec *specs;
  int T;
  uint64_t run_id;      /* this launch's, in the names of its commits' files */
  uint64_t ckpt_id;     /* the resumed commit's */
  int resumed;
  size_t step;          /* the resumed position: the global step in this run's steps */
  size_t file_step;     /* the resumed commit's own step (in its files' names) */
  size_t old_global_batch; /* the resumed commit's global batch */
  double loss_sum;      /* the unfinished epoch's loss sum, in this run's steps */
  int old_ranks;        /* the resumed commit's world size */
  uint32_t *file_crc;   /* the resumed commit's, per rank of it */
  uint64_t *file_bytes;
  gs_shard_plan *old_plan; /* its plan, when its world size is not this run's */
  int background;        /* commits may go to the background (agreed at open) */
  gs__timeline *tl;      /* borrowed (dlrm_ckpt_set_timeline), or NULL */
  struct pending *pend;  /* a commit being written in the background, or NULL */
  char *kept, *kept_plan; /* the last commit put in place in the background, whose
                          * predecessors' files its successor's writer removes */
  size_t lag;            /* steps from a background commit to its publication (0:
                          * not measured: the next commit point) */
};

/* ---- Helpers ----------------------------------------------------------------- */

static char *path_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *path_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *p = gs_malloc((size_t)n + 1);
  if (p == NULL) return NULL;
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

/* A rank's file of a commit, by name alone. */
static char *rank_file_name(uint64_t id, size_t step, int rank) {
  return path_printf("dlrm-%016" PRIx64 "-step%zu.rank%d.gsck", id, step, rank);
}

static char *rank_file(const dlrm_ckpt *c, uint64_t id, size_t step, int rank) {
  char *n = rank_file_name(id, step, rank);
  char *p = n ? path_printf("%s/%s", c->cfg->checkpoint_dir, n) : NULL;
  gs_free(n);
  return p;
}

static char *plan_file(const dlrm_ckpt *c, uint64_t id, size_t step) {
  return path_printf("%s/dlrm-%016" PRIx64 "-step%zu.plan.json", c->cfg->checkpoint_dir, id,
                     step);
}

static const char *basename_of(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* gs_agree on this rank's status and payload. A failure anywhere is
 * returned on every rank: this rank's own message if it failed, else one
 * naming the first rank that did. On GS_OK *a holds the votes (release
 * with gs_agreement_free); otherwise it is released. */
static gs_status agree(dlrm_ckpt *c, const char *what, gs_status st, const void *payload,
                       size_t bytes, gs_agreement *a) {
  char full[1024] = "", msg[GS_VOTE_MESSAGE] = "";
  if (st != GS_OK) {
    gs__error_copy(full, sizeof full);
    gs__error_copy(msg, sizeof msg);
  }
  GS_CHECK(gs_agree(c->comm, gs_comm_mpi(c->comm), what, st, msg, payload, bytes, a));
  if (a->failed == 0) return GS_OK;
  gs_status r;
  if (st != GS_OK) {
    gs__error_set_message(full);
    /* Every rank refused alike (the checkpoint's shared files): said once. */
    if (gs_agreement_unanimous(a)) gs__error_mark_shared();
    r = st;
  } else {
    r = gs_error((gs_status)a->votes[a->first].status, "%s: rank %d failed: %s", what, a->first,
                 a->votes[a->first].message);
  }
  gs_agreement_free(a);
  return r;
}

/* fsync a file written by someone else's stdio (the plan). */
static gs_status sync_file(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    gs_status st = gs_error(GS_ERR_IO, "DLRM checkpoint: cannot sync %s: %s", path,
                            strerror(errno));
    if (fd >= 0) close(fd);
    return st;
  }
  close(fd);
  return GS_OK;
}

/* An MLP spec as its widths joined by '-', so that "13-064-16" and
 * "13-64-16" compare equal; the spec itself if it does not parse. */
static void mlp_text(const char *spec, char *out, size_t n) {
  int w[GS_DLRM_MAX_LAYERS + 1], k = 0;
  if (spec == NULL || gs_dlrm_mlp_parse(spec, w, GS_DLRM_MAX_LAYERS + 1, &k) != GS_OK) {
    snprintf(out, n, "%s", spec ? spec : "");
    return;
  }
  size_t at = 0;
  out[0] = '\0';
  for (int i = 0; i < k && at < n; i++) {
    int m = snprintf(out + at, n - at, i ? "-%d" : "%d", w[i]);
    if (m < 0) break;
    at += (size_t)m;
  }
}

/* What a checkpoint must share with the run that resumes it. */
static cJSON *describe_run(const dlrm_ckpt *c) {
  const gs_dlrm_train_config *cfg = c->cfg;
  char buf[512];
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "ranks", c->ranks);
  cJSON *ts = cJSON_AddArrayToObject(r, "tables");
  for (int t = 0; t < c->T; t++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", c->specs[t].name ? c->specs[t].name : "");
    cJSON_AddNumberToObject(o, "rows", (double)c->specs[t].rows);
    cJSON_AddItemToArray(ts, o);
  }
  cJSON_AddNumberToObject(r, "dim", c->T > 0 ? (double)c->specs[0].dim : 0);
  mlp_text(cfg->model.bottom_mlp, buf, sizeof buf);
  cJSON_AddStringToObject(r, "bottom_mlp", buf);
  mlp_text(cfg->model.top_mlp, buf, sizeof buf);
  cJSON_AddStringToObject(r, "top_mlp", buf);
  if (cfg->model.interaction == GS_DLRM_DCN) {
    int layers;
    size_t rank;
    dlrm_dcn_shape(&cfg->model, (size_t)(c->T + 1) * (c->T > 0 ? c->specs[0].dim : 0),
                   &layers, &rank);
    snprintf(buf, sizeof buf, "dcn, %d cross layers of rank %zu", layers, rank);
    cJSON_AddStringToObject(r, "interaction", buf);
  } else {
    cJSON_AddStringToObject(r, "interaction",
                            cfg->model.interaction == GS_DLRM_CAT ? "cat" : "dot");
  }
  snprintf(buf, sizeof buf, "%" PRIu64, cfg->model.seed);
  cJSON_AddStringToObject(r, "seed", buf);
  cJSON_AddStringToObject(r, "embed_optimizer", cfg->optim.embed.kind == GS_EMBED_ROWWISE_ADAGRAD
                                                    ? "rowwise_adagrad" : "sgd");
  cJSON_AddNumberToObject(r, "batch", (double)cfg->batch);
  cJSON_AddNumberToObject(r, "global_batch", (double)cfg->batch * c->ranks);
  cJSON_AddNumberToObject(r, "steps_per_epoch", (double)cfg->steps);
  cJSON *d = cJSON_AddObjectToObject(r, "data");
  if (cfg->criteo_file) {
    /* A Criteo file by its canonical path (its lines are the samples, by
     * position); the synthetic data's parameters do not apply. */
    char *real = realpath(cfg->criteo_file, NULL);
    cJSON_AddStringToObject(d, "criteo_file", real ? real : cfg->criteo_file);
    free(real);
    /* its vocabulary's threshold (none: the values modulo the rows, as
     * every checkpoint before 2026-12-05) */
    if (cfg->criteo_min_count > 0)
      cJSON_AddNumberToObject(d, "frequency_threshold", (double)cfg->criteo_min_count);
  } else {
    cJSON_AddNumberToObject(d, "zipf", cfg->data.zipf_s);
    cJSON_AddNumberToObject(d, "pooling", cfg->data.pooling);
    cJSON_AddNumberToObject(d, "pooling_random", cfg->data.pooling_random);
    /* Each table's own ids per sample, where one differs from `pooling`
     * (so that a checkpoint of one pooling for all reads as before). */
    int own = 0;
    for (int t = 0; cfg->data.table_pooling && t < c->T; t++)
      own |= round(c->specs[t].pooling) != cfg->data.pooling;
    if (own) {
      cJSON *tp = cJSON_AddArrayToObject(d, "table_pooling");
      for (int t = 0; t < c->T; t++)
        cJSON_AddItemToArray(tp, cJSON_CreateNumber(round(c->specs[t].pooling)));
    }
    cJSON_AddNumberToObject(d, "scramble", cfg->data.scramble);
    cJSON_AddNumberToObject(d, "teacher_bias", cfg->data.teacher_bias);
    cJSON_AddNumberToObject(d, "dense_std", cfg->data.dense_std);
    cJSON_AddNumberToObject(d, "sparse_std", cfg->data.sparse_std);
  }
  cJSON_AddStringToObject(r, "sharding", cfg->plan_file        ? "plan file"
                                         : cfg->sharding < 0 ? "auto"
                                                             : gs_shard_kind_name(
                                                                   (gs_shard_kind)cfg->sharding));
  return r;
}

/* The first difference between the checkpoint's run and this one, in
 * words, or 0. */
static int run_differs(const cJSON *saved, const cJSON *mine, char *why, size_t n) {
  static const struct {
    const char *key, *label;
  } fields[] = {{"ranks", NULL},
                /* the data before the tables: a Criteo file's vocabulary
                 * sets their rows, and its threshold is the cause to name */
                {"data", "the data (the synthetic data's parameters, or the Criteo file)"},
                {"tables", NULL},
                {"dim", "the embedding dimension"},
                {"bottom_mlp", "the bottom MLP"},
                {"top_mlp", "the top MLP"},
                {"interaction", "the interaction"},
                {"seed", "the seed"},
                {"embed_optimizer", "the tables' optimizer"},
                {"batch", "the batch per rank"},
                {"steps_per_epoch", "the steps per epoch (where every step's samples start)"},
                {"sharding", "the sharding"}};
  /* Another global batch (another world size with the same batch per
   * rank, or another batch) takes the epoch's samples in other steps: it
   * resumes when an epoch is the same samples (the steps per epoch times
   * the global batch), at the same sample (dlrm_ckpt_open checks that the
   * commit is at a step of this run's global batch). */
  double sg = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(saved, "global_batch"));
  double mg = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(mine, "global_batch"));
  double ss = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(saved, "steps_per_epoch"));
  double ms = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(mine, "steps_per_epoch"));
  int regroup = sg >= 1 && ss >= 1 && sg == floor(sg) && ss == floor(ss) && sg != mg;
  if (regroup && ss * sg != ms * mg) {
    char fit[160];
    double E = ss * sg;
    if (E == floor(E / mg) * mg)
      snprintf(fit, sizeof fit, "give --steps %.0f (%.0f samples an epoch in steps of %.0f)",
               E / mg, E, mg);
    else
      snprintf(fit, sizeof fit, "and %.0f samples do not split into steps of %.0f", E, mg);
    double sr = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(saved, "ranks"));
    double mr = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(mine, "ranks"));
    snprintf(why, n, "its global batch was %.0f (%.0f rank%s) and this run's is %.0f (%.0f "
             "rank%s): another global batch resumes on the same samples an epoch, and the "
             "checkpoint's epochs are %.0f steps of %.0f (%.0f samples), this run's %.0f "
             "steps of %.0f (%.0f); %s",
             sg, sr, sr == 1 ? "" : "s", mg, mr, mr == 1 ? "" : "s", ss, sg, E, ms, mg,
             ms * mg, fit);
    return 1;
  }
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(saved, fields[i].key);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(mine, fields[i].key);
    if (s == NULL) {
      snprintf(why, n, "it does not record %s", fields[i].label ? fields[i].label
                                                                : fields[i].key);
      return 1;
    }
    if (cJSON_Compare(s, m, 1)) continue;
    /* The batch per rank, the steps per epoch and the world size follow
     * the global batch (checked above). */
    if (regroup && (strcmp(fields[i].key, "ranks") == 0 || strcmp(fields[i].key, "batch") == 0 ||
                    strcmp(fields[i].key, "steps_per_epoch") == 0))
      continue;
    const char *mfile = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "criteo_file"));
    const char *sfile = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "criteo_file"));
    if (strcmp(fields[i].key, "data") == 0 && mfile && sfile) {
      /* The same file under another path is the same data (a checkpoint
       * before canonical paths recorded the path as given, and the
       * synthetic data's parameters, which a file does not use). */
      char *real = realpath(sfile, NULL);
      int same = strcmp(real ? real : sfile, mfile) == 0;
      free(real);
      /* the same ids: the same vocabulary threshold (0: none) */
      double sth = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(s, "frequency_threshold"));
      double mth = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "frequency_threshold"));
      sth = isnan(sth) ? 0 : sth;
      mth = isnan(mth) ? 0 : mth;
      if (same && sth != mth) {
        char a[48], b[48];
        snprintf(a, sizeof a, sth > 0 ? "a frequency threshold of %.0f" : "none", sth);
        snprintf(b, sizeof b, mth > 0 ? "%.0f" : "none (values modulo the rows)", mth);
        snprintf(why, n, "the Criteo file's vocabulary: the checkpoint's run had %s, this run "
                 "%s", a, b);
        return 1;
      }
      if (same) continue;
      snprintf(why, n, "%s: the checkpoint's run read %.300s, this run %.300s",
               fields[i].label, sfile, mfile);
      return 1;
    }
    if (strcmp(fields[i].key, "ranks") == 0) {
      /* Another world size takes the same samples in the same steps when
       * the global batch stays (the tables are re-sharded), and in other
       * steps with another (above). A manifest without its global batch
       * (none was written without it) resumes on its own world size. */
      if (sg == mg) continue;
      snprintf(why, n, "it was written by %.0f ranks and this run has %.0f, and it does not "
               "record its global batch", cJSON_GetNumberValue(s), cJSON_GetNumberValue(m));
      return 1;
    }
    /* The batch per rank changes with the world size. */
    if (strcmp(fields[i].key, "batch") == 0 &&
        !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(saved, "ranks"),
                       cJSON_GetObjectItemCaseSensitive(mine, "ranks"), 1))
      continue;
    if (strcmp(fields[i].key, "tables") == 0) {
      int ns = cJSON_GetArraySize(s), nm = cJSON_GetArraySize(m);
      if (ns != nm) {
        snprintf(why, n, "the tables: the checkpoint's run had %d, this run has %d", ns, nm);
        return 1;
      }
      for (int t = 0; t < ns; t++) {
        const cJSON *a = cJSON_GetArrayItem(s, t), *b = cJSON_GetArrayItem(m, t);
        if (cJSON_Compare(a, b, 1)) continue;
        snprintf(why, n, "table %d: the checkpoint's run had '%s' of %.0f rows, this run has "
                 "'%s' of %.0f rows", t,
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "name")),
                 cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(a, "rows")),
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "name")),
                 cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(b, "rows")));
        return 1;
      }
    }
    char *ts = cJSON_PrintUnformatted(s), *tm = cJSON_PrintUnformatted(m);
    snprintf(why, n, "%s: the checkpoint's run had %.200s, this run has %.200s",
             fields[i].label, ts ? ts : "?", tm ? tm : "?");
    cJSON_free(ts);
    cJSON_free(tm);
    return 1;
  }
  return 0;
}

/* The first difference between two plans of the same tables, or 0. */
static int plan_differs(const gs_shard_plan *a, const gs_shard_plan *b, char *why, size_t n) {
  if (a->ntables != b->ntables || a->ranks != b->ranks) {
    snprintf(why, n, "it is for %d tables on %d ranks, the checkpoint's for %d on %d",
             b->ntables, b->ranks, a->ntables, a->ranks);
    return 1;
  }
  for (int t = 0; t < a->ntables; t++)
    if (a->kind[t] != b->kind[t]) {
      snprintf(why, n, "table %d is %s in it and %s in the checkpoint's", t,
               gs_shard_kind_name(b->kind[t]), gs_shard_kind_name(a->kind[t]));
      return 1;
    }
  if (a->nshards != b->nshards) {
    snprintf(why, n, "it has %zu shards, the checkpoint's %zu", b->nshards, a->nshards);
    return 1;
  }
  for (size_t j = 0; j < a->nshards; j++) {
    const gs_shard *x = &a->shards[j], *y = &b->shards[j];
    if (x->table != y->table || x->rank != y->rank || x->row_lo != y->row_lo ||
        x->row_hi != y->row_hi || x->col_lo != y->col_lo || x->col_hi != y->col_hi) {
      snprintf(why, n, "its shard %zu (table %d, rank %d, rows [%zu, %zu), columns [%zu, %zu)) "
               "is not the checkpoint's (table %d, rank %d, rows [%zu, %zu), columns [%zu, "
               "%zu))", j, y->table, y->rank, y->row_lo, y->row_hi, y->col_lo, y->col_hi,
               x->table, x->rank, x->row_lo, x->row_hi, x->col_lo, x->col_hi);
      return 1;
    }
  }
  return 0;
}

/* ---- Opening and checking a checkpoint --------------------------------------- */

static const cJSON *item(const cJSON *o, const char *k) {
  return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* A manifest's field: a whole number from 0 to max. */
static int json_whole(const cJSON *x, double max) {
  return cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= max &&
         x->valuedouble == floor(x->valuedouble);
}

/* A string that is one finite number and nothing else (write_manifest's "%a"). */
static int json_decimal(const cJSON *x) {
  if (!cJSON_IsString(x) || !x->valuestring[0]) return 0;
  char *end;
  double v = strtod(x->valuestring, &end);
  return *end == '\0' && isfinite(v);
}

/* A string of 1 to 16 hexadecimal digits. */
static int json_hex(const cJSON *x) {
  if (!cJSON_IsString(x)) return 0;
  size_t n = strlen(x->valuestring);
  return n >= 1 && n <= 16 && strspn(x->valuestring, "0123456789abcdefABCDEF") == n;
}

/* Reads dir/dlrm.json and checks it against this run; loads its plan.
 * *found: 0 when there is no manifest. *text_crc: the manifest's CRC-32. */
static gs_status read_checkpoint(dlrm_ckpt *c, int *found, uint32_t *text_crc,
                                 gs_shard_plan **plan) {
  const char *dir = c->cfg->checkpoint_dir;
  *found = 0;
  *text_crc = 0;
  char *path = path_printf("%s/" MANIFEST, dir);
  if (path == NULL) return gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  struct stat sb;
  if (stat(path, &sb) != 0 && errno == ENOENT) {
    gs_free(path);
    if (c->cfg->resume == GS_DLRM_RESUME_IF_ANY) return GS_OK;
    return gs_error(GS_ERR_IO, "resuming: there is no checkpoint in %s (no %s/" MANIFEST ")",
                    dir, dir);
  }
  *found = 1;
  char *text = NULL, why[1024] = "";
  size_t len = 0;
  cJSON *m = NULL, *mine = NULL;
  gs_shard_plan *theirs = NULL;
  char *ppath = NULL;
  gs_status st = gs__read_text(path, "DLRM checkpoint manifest", MANIFEST_MAX, &text, &len);
  if (st != GS_OK) goto out;
  *text_crc = gs__crc32(0, text, len);
  m = cJSON_Parse(text);
  const cJSON *fmt = item(m, "format"), *run = item(m, "run"), *step = item(m, "step");
  const cJSON *ls = item(m, "epoch_loss_sum"), *id = item(m, "run_id"), *files = item(m, "files");
  const cJSON *pl = item(m, "plan"), *pcrc = item(m, "plan_crc32"), *ver = item(m, "version");
  /* The position as the supervisor reads it (epoch, step_in_epoch: derived
   * from step) and the run's length: older manifests lack epochs, so these
   * three are checked where present. */
  const cJSON *ep = item(m, "epoch"), *sie = item(m, "step_in_epoch"), *eps = item(m, "epochs");
  if (m == NULL || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT) != 0) {
    st = gs_error(GS_ERR_PARSE, "resuming from %s: %s is not a DLRM checkpoint manifest "
                  "(\"format\": \"" FORMAT "\")", dir, path);
    goto out;
  }
  /* Every field of the right type and range, named when not: a value
   * that parsed loosely would resume a run that is not the one saved. */
  const char *bad = !cJSON_IsNumber(ver) || ver->valuedouble != 1 ? "version (1)"
                    : !cJSON_IsObject(run)                        ? "run (an object)"
                    : !json_whole(step, 9.0e15)                   ? "step (a whole number)"
                    : !json_decimal(ls)           ? "epoch_loss_sum (a number in a string)"
                    : !json_hex(id)               ? "run_id (a hexadecimal string)"
                    : !cJSON_IsArray(files)       ? "files (an array)"
                    : !cJSON_IsString(pl) || !pl->valuestring[0] || strchr(pl->valuestring, '/')
                        ? "plan (a file name in the directory)"
                    : !json_whole(pcrc, 4294967295.0) ? "plan_crc32 (a CRC-32)"
                    : eps && (!json_whole(eps, INT_MAX) || eps->valuedouble < 1)
                        ? "epochs (a whole number of at least 1)"
                    : ep && !json_whole(ep, 9.0e15)  ? "epoch (a whole number)"
                    : sie && !json_whole(sie, 9.0e15) ? "step_in_epoch (a whole number)"
                                                      : NULL;
  if (bad) {
    char key[32];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(bad, " "), bad);
    char *v = item(m, key) ? cJSON_PrintUnformatted(item(m, key)) : NULL;
    st = gs_error(GS_ERR_PARSE, "resuming from %s: %s: field %s is %.100s: not a DLRM "
                  "checkpoint manifest of this version", dir, path, bad, v ? v : "missing");
    cJSON_free(v);
    goto out;
  }
  c->step = (size_t)step->valuedouble;
  c->loss_sum = strtod(ls->valuestring, NULL);
  c->ckpt_id = strtoull(id->valuestring, NULL, 16);
  mine = describe_run(c);
  if (mine == NULL) {
    st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
    goto out;
  }
  if (run_differs(run, mine, why, sizeof why)) {
    st = gs_error(GS_ERR_INVALID_ARG, "resuming: the checkpoint in %s (step %zu) does not fit "
                  "this run: %s", dir, c->step, why);
    goto out;
  }
  /* epoch and step_in_epoch are step's, in the checkpoint's steps per
   * epoch (run_differs checked it: this run's, or as many samples in
   * whole steps of its recorded global batch). */
  c->file_step = c->step;
  double sgb = cJSON_GetNumberValue(item(run, "global_batch"));
  size_t G = c->cfg->batch * (size_t)c->ranks;
  c->old_global_batch = sgb >= 1 && sgb == floor(sgb) ? (size_t)sgb : G; /* as run_differs */
  size_t spe = (size_t)cJSON_GetNumberValue(item(run, "steps_per_epoch"));
  const char *derived = ep && (size_t)ep->valuedouble != c->step / spe ? "epoch"
                        : sie && (size_t)sie->valuedouble != c->step % spe ? "step_in_epoch"
                                                                           : NULL;
  if (derived) {
    st = gs_error(GS_ERR_PARSE, "resuming from %s: %s: field %s is %.0f, but step %zu of %zu "
                  "steps an epoch makes it %zu: not a DLRM checkpoint manifest of this "
                  "version", dir, path, derived, item(m, derived)->valuedouble, c->step, spe,
                  derived[0] == 'e' ? c->step / spe : c->step % spe);
    goto out;
  }
  if (c->old_global_batch != G) {
    /* The same sample in this run's steps: the commit must sit at one of
     * them. The epoch's loss sum so far, a sum of per-step means, counts
     * an old step as old/new steps of this run. */
    size_t e = c->step / spe, done = (c->step % spe) * c->old_global_batch;
    if (done % G != 0) {
      /* What would do on this world size: a batch per rank whose global
       * batch divides both the samples done and the epoch's (largest
       * first, at most three). */
      size_t E = spe * c->old_global_batch, P = (size_t)c->ranks;
      size_t g = (size_t)dlrm_gcd(done, E);
      char opts[200] = "";
      int k = 0;
      for (size_t b = g / P; b >= 1 && k < 3; b--) {
        if (g % (P * b) != 0) continue;
        size_t at = strlen(opts);
        snprintf(opts + at, sizeof opts - at, "%s--batch %zu --steps %zu", k ? ", " : "", b,
                 E / (P * b));
        k++;
      }
      st = gs_error(GS_ERR_INVALID_ARG, "resuming: the checkpoint in %s is at step %zu, %zu "
                    "samples into epoch %zu (steps of %zu), which is not at a step of this "
                    "run's global batch %zu (%zu ranks x %zu): resume with a global batch "
                    "that divides %zu and the epoch's %zu samples (on %zu rank%s: %s), or from "
                    "a commit at an epoch's end", dir, c->step, done, e + 1,
                    c->old_global_batch, G, P, c->cfg->batch, done, E, P, P == 1 ? "" : "s",
                    k ? opts : "no batch per rank does");
      goto out;
    }
    c->step = e * c->cfg->steps + done / G;
    c->loss_sum *= (double)c->old_global_batch / (double)G;
  }
  size_t total = (size_t)c->cfg->epochs * c->cfg->steps;
  if (c->step > total) {
    st = gs_error(GS_ERR_INVALID_ARG, "resuming: the checkpoint in %s is at step %zu, past "
                  "this run's end (%d epochs of %zu steps: %zu)", dir, c->step,
                  c->cfg->epochs, c->cfg->steps, total);
    goto out;
  }
  c->old_ranks = (int)cJSON_GetNumberValue(item(run, "ranks"));
  if (c->old_ranks < 1 || cJSON_GetArraySize(files) != c->old_ranks) {
    st = gs_error(GS_ERR_PARSE, "resuming from %s: %s lists %d rank files for %d ranks", dir,
                  path, cJSON_GetArraySize(files), c->old_ranks);
    goto out;
  }
  c->file_crc = gs_calloc((size_t)c->old_ranks, sizeof *c->file_crc);
  c->file_bytes = gs_calloc((size_t)c->old_ranks, sizeof *c->file_bytes);
  if (c->file_crc == NULL || c->file_bytes == NULL) {
    st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
    goto out;
  }
  for (int r = 0; r < c->old_ranks; r++) {
    const cJSON *f = cJSON_GetArrayItem(files, r);
    const cJSON *fb = item(f, "bytes"), *fc = item(f, "crc32");
    if (!json_whole(fb, 9.0e15) || !json_whole(fc, 4294967295.0)) {
      char *v = cJSON_PrintUnformatted(json_whole(fb, 9.0e15) ? fc : fb);
      st = gs_error(GS_ERR_PARSE, "resuming from %s: %s: field files[%d].%s is %.100s, not "
                    "%s: not a DLRM checkpoint manifest of this version", dir, path, r,
                    json_whole(fb, 9.0e15) ? "crc32" : "bytes", v ? v : "missing",
                    json_whole(fb, 9.0e15) ? "a CRC-32" : "a file size in bytes");
      cJSON_free(v);
      goto out;
    }
    const cJSON *fr = item(f, "rank");
    if (fr && (!json_whole(fr, INT_MAX) || fr->valuedouble != r)) {
      char *v = cJSON_PrintUnformatted(fr);
      st = gs_error(GS_ERR_PARSE, "resuming from %s: %s: field files[%d].rank is %.100s, not "
                    "%d: not a DLRM checkpoint manifest of this version", dir, path, r,
                    v ? v : "?", r);
      cJSON_free(v);
      goto out;
    }
    c->file_bytes[r] = (uint64_t)fb->valuedouble;
    c->file_crc[r] = (uint32_t)fc->valuedouble;
  }
  /* The checkpoint's plan, checked against its record and the tables. */
  ppath = path_printf("%s/%s", dir, pl->valuestring);
  char *ptext = NULL;
  size_t plen = 0;
  if (ppath == NULL) {
    st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
    goto out;
  }
  st = gs__read_text(ppath, "sharding plan", PLAN_MAX, &ptext, &plen);
  if (st != GS_OK) {
    /* gs__read_text's message names the path */
    st = gs_error(st, "resuming from %s: the checkpoint's plan %s", dir, gs_last_error());
    goto out;
  }
  uint32_t pc = gs__crc32(0, ptext, plen);
  gs_free(ptext);
  if (pc != (uint32_t)pcrc->valuedouble) {
    st = gs_error(GS_ERR_PARSE, "resuming from %s: the plan %s is not the one the checkpoint "
                  "recorded (CRC-32 %08" PRIx32 ", recorded %08" PRIx32 "): corrupted or "
                  "replaced", dir, ppath, pc, (uint32_t)pcrc->valuedouble);
    goto out;
  }
  /* Another world size: the checkpoint's plan says where its rows are,
   * and this run makes its own. */
  int same = c->old_ranks == c->ranks;
  st = gs_shard_plan_load(ppath, c->specs, c->T, c->old_ranks, same ? plan : &c->old_plan);
  if (st != GS_OK) {
    st = gs_error(st, "resuming from %s: the checkpoint's plan: %s", dir, gs_last_error());
    goto out;
  }
  if (same && c->cfg->plan_file) {
    st = gs_shard_plan_load(c->cfg->plan_file, c->specs, c->T, c->ranks, &theirs);
    if (st == GS_OK && plan_differs(*plan, theirs, why, sizeof why))
      st = gs_error(GS_ERR_INVALID_ARG, "resuming: the plan in %s is not the checkpoint's "
                    "(%s): %s", c->cfg->plan_file, ppath, why);
  }
  /* The commit in place until this launch puts one of its own there: a
   * background writer removes the rest (a crash's unpublished files), not
   * it (remove_stale). */
  if (st == GS_OK) {
    c->kept = rank_file_name(c->ckpt_id, c->file_step, c->rank);
    c->kept_plan = path_printf("%s", pl->valuestring);
    if (c->kept == NULL || c->kept_plan == NULL)
      st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  }
out:
  gs_shard_plan_free(theirs);
  if (st != GS_OK) {
    gs_shard_plan_free(*plan);
    *plan = NULL;
  }
  cJSON_Delete(m);
  cJSON_Delete(mine);
  gs_free(text);
  gs_free(ppath);
  gs_free(path);
  return st;
}

/* A fresh id for this launch's files: rank 0's, from the clock, its pid
 * and its address space. */
static uint64_t new_run_id(void) {
  uint64_t x = (uint64_t)(gs_now() * 1e9) ^ ((uint64_t)getpid() << 32) ^
               (uint64_t)(uintptr_t)&x;
  return dlrm_mix(x);
}

/* What each rank tells the others when it opens the directory. */
typedef struct open_vote {
  uint64_t run_id;     /* rank 0's is the launch's */
  uint32_t found, crc; /* a manifest, and its CRC-32 */
  uint32_t background; /* commits may go to the background (rank 0's word is the run's) */
} open_vote;

gs_status dlrm_ckpt_open(const gs_dlrm_train_config *cfg, gs_comm *comm,
                         const gs_embed_spec *specs, dlrm_ckpt **out, gs_shard_plan **plan) {
  *out = NULL;
  *plan = NULL;
  if (cfg->checkpoint_dir == NULL) {
    if (cfg->resume || cfg->commit_every || cfg->stop_at_step)
      return gs_error(GS_ERR_INVALID_ARG, "DLRM training: resuming, commits and a stop at a "
                      "step need a checkpoint directory");
    return GS_OK;
  }
  dlrm_ckpt *c = gs_calloc(1, sizeof *c);
  if (c == NULL) return gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  c->cfg = cfg;
  c->comm = comm;
  c->rank = gs_comm_rank(comm);
  c->ranks = gs_comm_size(comm);
  c->specs = specs;
  c->T = cfg->model.ntables;
  gs_status st = GS_OK;
  const char *dir = cfg->checkpoint_dir;
  if (st == GS_OK && mkdir(dir, 0777) != 0 && errno != EEXIST)
    st = gs_error(GS_ERR_IO, "checkpoint directory %s: cannot create it: %s", dir,
                  strerror(errno));
  struct stat sb;
  if (st == GS_OK && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
    st = gs_error(GS_ERR_IO, "checkpoint directory %s: not a directory", dir);
  if (st == GS_OK && access(dir, W_OK | X_OK) != 0)
    st = gs_error(GS_ERR_IO, "checkpoint directory %s: not writable: %s", dir, strerror(errno));
  int found = 0;
  uint32_t crc = 0;
  if (st == GS_OK && cfg->resume) st = read_checkpoint(c, &found, &crc, plan);
  /* Every rank must have read the same manifest: the directory is shared. */
  open_vote mine = {c->rank == 0 ? new_run_id() : 0, (uint32_t)found, crc,
                    !cfg->commit_foreground && getenv("GRADSYNC_COMMIT_SYNC") == NULL};
  gs_agreement a;
  st = agree(c, "DLRM checkpoint", st, &mine, sizeof mine, &a);
  if (st == GS_OK) {
    const open_vote *v = a.payloads;
    for (int r = 1; r < a.size && st == GS_OK; r++)
      if (v[r].found != v[0].found || v[r].crc != v[0].crc)
        st = gs_error(GS_ERR_MISMATCH, "resuming: rank %d %s in %s than rank 0 (every rank "
                      "must see the same checkpoint directory)", r,
                      v[r].found ? "sees another checkpoint" : "sees no checkpoint", dir);
    c->resumed = found;
    c->run_id = v[0].run_id; /* the new commits'; the checkpoint's is in its files' names */
    c->background = (int)v[0].background;
    gs_agreement_free(&a);
  }
  if (st != GS_OK) {
    gs_shard_plan_free(*plan);
    *plan = NULL;
    dlrm_ckpt_close(c);
    return st;
  }
  *out = c;
  return GS_OK;
}

int dlrm_ckpt_resumed(const dlrm_ckpt *c, size_t *step, double *epoch_loss_sum,
                      int *ranks, size_t *from_step, size_t *from_global_batch) {
  if (c == NULL || !c->resumed) return 0;
  *step = c->step;
  *from_step = c->file_step;
  *from_global_batch = c->old_global_batch;
  *epoch_loss_sum = c->loss_sum;
  *ranks = c->old_ranks;
  return 1;
}

static void pending_drop(dlrm_ckpt *c);

void dlrm_ckpt_close(dlrm_ckpt *c) {
  if (c == NULL) return;
  pending_drop(c);
  gs_free(c->kept);
  gs_free(c->kept_plan);
  gs_shard_plan_free(c->old_plan);
  gs_free(c->file_crc);
  gs_free(c->file_bytes);
  gs_free(c);
}

/* ---- A rank's file ------------------------------------------------------------ */

/* Whether this rank writes shard i (a dp replica: rank 0 alone). */
static int saves(const dlrm_ckpt *c, const gs_shard *where) {
  return where->kind != GS_SHARD_DP || c->rank == 0;
}

/* The CRC-32 of the state every rank holds alike: the MLPs' weights, then
 * each dp replica's rows and accumulators. */
static uint32_t replica_crc(gs_dlrm_dist *d) {
  size_t nw;
  const float *w = gs_dlrm_mlp_weights(gs_dlrm_dist_model(d), &nw);
  uint32_t crc = gs__crc32(0, w, nw * sizeof(float));
  for (size_t i = 0; i < gs_dlrm_dist_nshards(d); i++) {
    gs_shard where;
    const gs_embed_table *e = gs_dlrm_dist_shard(d, i, &where);
    if (where.kind != GS_SHARD_DP) continue;
    crc = gs__crc32(crc, e->weights, e->rows * e->dim * sizeof(float));
    crc = gs__crc32(crc, e->state, e->rows * sizeof(float));
  }
  return crc;
}

/* This rank's file written into *f, a temporary file left open for
 * pending_finish (closed and removed on a failure); defer_crc: its CRC-32
 * taken from the file later, by pending_finish's thread. */
static gs_status write_rank_file(dlrm_ckpt *c, gs_dlrm_dist *d, const char *path, size_t step,
                                 int defer_crc, gs__state_file *f) {
  GS_CHECK(gs__state_file_create(f, path, "DLRM checkpoint"));
  f->defer_crc = defer_crc;
  size_t n = gs_dlrm_dist_nshards(d), nsave = 0, nmlp;
  const float *mlp = gs_dlrm_mlp_weights(gs_dlrm_dist_model(d), &nmlp);
  int state = c->cfg->optim.embed.kind == GS_EMBED_ROWWISE_ADAGRAD;
  for (size_t i = 0; i < n; i++) {
    gs_shard where;
    gs_dlrm_dist_shard(d, i, &where);
    nsave += (size_t)saves(c, &where);
  }
  file_header h = {.rank = (uint32_t)c->rank, .ranks = (uint32_t)c->ranks, .step = step,
                   .nshards = (uint32_t)nsave, .has_state = (uint32_t)state,
                   .mlp_floats = c->rank == 0 ? nmlp : 0};
  memcpy(h.magic, MAGIC, sizeof MAGIC);
  gs_status st = gs__state_file_write(f, &h, sizeof h);
  for (size_t i = 0; i < n && st == GS_OK; i++) {
    gs_shard where;
    const gs_embed_table *e = gs_dlrm_dist_shard(d, i, &where);
    if (!saves(c, &where)) continue;
    shard_header sh = {(uint32_t)where.table, (uint32_t)where.kind, where.row_lo, where.row_hi,
                       where.col_lo, where.col_hi};
    st = gs__state_file_write(f, &sh, sizeof sh);
    if (st == GS_OK) st = gs__state_file_write(f, e->weights, e->rows * e->dim * sizeof(float));
    if (st == GS_OK && state) st = gs__state_file_write(f, e->state, e->rows * sizeof(float));
  }
  if (st == GS_OK && c->rank == 0) st = gs__state_file_write(f, mlp, nmlp * sizeof(float));
  if (st != GS_OK) gs__state_file_abort(f);
  return st;
}

/* Reads exactly n bytes of f into buf, adding them to *crc. */
static gs_status read_exact(FILE *f, void *buf, size_t n, uint32_t *crc, const char *path) {
  if (n > 0 && fread(buf, 1, n, f) != n)
    return gs_error(GS_ERR_IO, "DLRM checkpoint %s: read failed (cut short?)", path);
  *crc = gs__crc32(*crc, buf, n);
  return GS_OK;
}

/* Reads this rank's file straight into its shards (and on rank 0 the dp
 * replicas and the MLPs), checking everything against what this rank
 * holds and the manifest's record. */
static gs_status read_rank_file(dlrm_ckpt *c, gs_dlrm_dist *d, const char *path) {
  size_t n = gs_dlrm_dist_nshards(d), nsave = 0, nmlp;
  float *mlp = gs_dlrm_mlp_weights(gs_dlrm_dist_model(d), &nmlp);
  int state = c->cfg->optim.embed.kind == GS_EMBED_ROWWISE_ADAGRAD;
  uint64_t want = sizeof(file_header) + sizeof(uint32_t) + (c->rank == 0 ? nmlp * 4 : 0);
  for (size_t i = 0; i < n; i++) {
    gs_shard where;
    const gs_embed_table *e = gs_dlrm_dist_shard(d, i, &where);
    if (!saves(c, &where)) continue;
    nsave++;
    want += sizeof(shard_header) + (e->rows * e->dim + (state ? e->rows : 0)) * sizeof(float);
  }
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return gs_error(GS_ERR_IO, "DLRM checkpoint: rank %d's file %s: %s", c->rank, path,
                    strerror(errno));
  struct stat sb;
  gs_status st = GS_OK;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
    st = gs_error(GS_ERR_IO, "DLRM checkpoint %s: not a regular file", path);
  else if (want != c->file_bytes[c->rank])
    st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: the manifest records %" PRIu64 " bytes "
                  "for rank %d's file, its shards take %" PRIu64 ": the manifest is not this "
                  "run's, or corrupted", path, c->file_bytes[c->rank], c->rank, want);
  else if ((uint64_t)sb.st_size != want)
    st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: %lld bytes, %s than the %" PRIu64
                  " the manifest records for rank %d's shards: %s", path,
                  (long long)sb.st_size, (uint64_t)sb.st_size < want ? "fewer" : "more", want,
                  c->rank, (uint64_t)sb.st_size < want
                               ? "cut short, or not this rank's file of this commit"
                               : "longer than the manifest records (bytes appended?)");
  uint32_t crc = 0;
  file_header h;
  if (st == GS_OK) st = read_exact(f, &h, sizeof h, &crc, path);
  if (st == GS_OK && (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0 || h.rank != (uint32_t)c->rank ||
                      h.ranks != (uint32_t)c->ranks || h.step != c->file_step ||
                      h.nshards != nsave || h.has_state != (uint32_t)state ||
                      h.mlp_floats != (c->rank == 0 ? nmlp : 0)))
    st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: its header (rank %" PRIu32 " of %" PRIu32
                  ", step %" PRIu64 ", %" PRIu32 " shards) is not rank %d's of %d at step %zu "
                  "with %zu shards", path, h.rank, h.ranks, h.step, h.nshards, c->rank,
                  c->ranks, c->file_step, nsave);
  for (size_t i = 0; i < n && st == GS_OK; i++) {
    gs_shard where;
    gs_embed_table *e = gs_dlrm_dist_shard(d, i, &where);
    if (!saves(c, &where)) continue;
    shard_header sh;
    st = read_exact(f, &sh, sizeof sh, &crc, path);
    if (st == GS_OK &&
        (sh.table != (uint32_t)where.table || sh.kind != (uint32_t)where.kind ||
         sh.row_lo != where.row_lo || sh.row_hi != where.row_hi || sh.col_lo != where.col_lo ||
         sh.col_hi != where.col_hi))
      st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: shard %zu is table %" PRIu32 " rows "
                    "[%" PRIu64 ", %" PRIu64 "), columns [%" PRIu64 ", %" PRIu64 "); rank %d "
                    "holds table '%s' rows [%zu, %zu), columns [%zu, %zu) there", path, i,
                    sh.table, sh.row_lo, sh.row_hi, sh.col_lo, sh.col_hi, c->rank, e->name,
                    where.row_lo, where.row_hi, where.col_lo, where.col_hi);
    if (st == GS_OK) st = read_exact(f, e->weights, e->rows * e->dim * sizeof(float), &crc, path);
    if (st == GS_OK && state) st = read_exact(f, e->state, e->rows * sizeof(float), &crc, path);
  }
  if (st == GS_OK && c->rank == 0) st = read_exact(f, mlp, nmlp * sizeof(float), &crc, path);
  uint32_t stored = 0;
  if (st == GS_OK && fread(&stored, sizeof stored, 1, f) != 1)
    st = gs_error(GS_ERR_IO, "DLRM checkpoint %s: read failed (cut short?)", path);
  if (st == GS_OK && (stored != crc || crc != c->file_crc[c->rank]))
    st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: corrupted: its contents' CRC-32 is %08"
                  PRIx32 ", the file records %08" PRIx32 " and the manifest %08" PRIx32, path,
                  crc, stored, c->file_crc[c->rank]);
  fclose(f);
  return st;
}

/* ---- Re-sharding: a checkpoint of another world size ------------------------- */

/* A block this rank fills from the checkpoint's blocks: one of its shards,
 * or on rank 0 a dp replica (broadcast afterwards). */
typedef struct want_block {
  gs_embed_table *e;
  gs_shard where;
  double *acc;     /* per row: the row-wise accumulator being assembled */
  size_t covered;  /* weights filled, of rows x columns */
} want_block;

/* Whether rank k of the checkpoint's plan holds rows of table t that
 * overlap [lo, hi) (its file holds its shards; rank 0's the dp tables). */
static int old_rank_holds(const dlrm_ckpt *c, int k, int t, size_t lo, size_t hi) {
  const gs_shard_plan *p = c->old_plan;
  if (p->kind[t] == GS_SHARD_DP) return k == 0;
  for (size_t j = 0; j < p->nshards; j++) {
    const gs_shard *s = &p->shards[j];
    if (s->rank == k && s->table == t && s->row_lo < hi && lo < s->row_hi) return 1;
  }
  return 0;
}

/* Streams rank k's file of the checkpoint once, copying every row (and
 * accumulator) that overlaps a wanted block, checking its CRC. A row-wise
 * accumulator is the mean of g^2 over a block's columns: the whole row's is
 * the blocks' mean weighted by their widths, which a new block of any
 * columns takes (exact when the old blocks are whole rows, or are all read;
 * a new column block gets the whole row's, not its own columns'). */
static gs_status reshard_file(dlrm_ckpt *c, int k, const char *path, want_block *w, size_t nw,
                              float *mlp, size_t nmlp, int state) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return gs_error(GS_ERR_IO, "DLRM checkpoint: rank %d's file %s: %s", k, path,
                    strerror(errno));
  size_t D = c->specs[0].dim;
  struct stat sb;
  gs_status st = GS_OK;
  if (fstat(fileno(f), &sb) != 0 || (uint64_t)sb.st_size != c->file_bytes[k])
    st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: %lld bytes, the manifest records %"
                  PRIu64 ": %s", path, (long long)sb.st_size, c->file_bytes[k],
                  (uint64_t)sb.st_size > c->file_bytes[k]
                      ? "longer than the manifest records (bytes appended?)"
                      : "cut short, or not this rank's file of this commit");
  uint32_t crc = 0;
  file_header h;
  if (st == GS_OK) st = read_exact(f, &h, sizeof h, &crc, path);
  if (st == GS_OK && (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0 || h.rank != (uint32_t)k ||
                      h.ranks != (uint32_t)c->old_ranks || h.step != c->file_step ||
                      h.has_state != (uint32_t)state ||
                      h.mlp_floats != (k == 0 ? nmlp : 0)))
    st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: its header (rank %" PRIu32 " of %" PRIu32
                  ", step %" PRIu64 ") is not rank %d's of %d at step %zu", path, h.rank,
                  h.ranks, h.step, k, c->old_ranks, c->file_step);
  float *row = NULL;
  size_t *hit = gs_malloc((nw + 1) * sizeof *hit);
  if (st == GS_OK && hit == NULL) st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  for (uint32_t j = 0; st == GS_OK && j < h.nshards; j++) {
    shard_header sh;
    st = read_exact(f, &sh, sizeof sh, &crc, path);
    if (st != GS_OK) break;
    if (sh.table >= (uint32_t)c->T || sh.row_lo > sh.row_hi ||
        sh.row_hi > c->specs[sh.table].rows || sh.col_lo >= sh.col_hi || sh.col_hi > D) {
      st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: shard %" PRIu32 " (table %" PRIu32
                    ", rows [%" PRIu64 ", %" PRIu64 "), columns [%" PRIu64 ", %" PRIu64 ")) is "
                    "not a block of this run's tables", path, j, sh.table, sh.row_lo,
                    sh.row_hi, sh.col_lo, sh.col_hi);
      break;
    }
    /* The wanted blocks this one overlaps (rows). */
    size_t nh = 0, width = sh.col_hi - sh.col_lo;
    for (size_t b = 0; b < nw; b++)
      if ((uint64_t)w[b].where.table == sh.table && w[b].where.row_lo < sh.row_hi &&
          sh.row_lo < w[b].where.row_hi)
        hit[nh++] = b;
    /* Rows in chunks of about 1 MiB: one read and one CRC update each. */
    size_t chunk = GS_MAX((size_t)1, ((size_t)1 << 18) / width);
    gs_free(row);
    row = gs_malloc(chunk * width * sizeof(float));
    if (row == NULL) {
      st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
      break;
    }
    for (uint64_t x0 = sh.row_lo; x0 < sh.row_hi && st == GS_OK; x0 += chunk) {
      size_t m = (size_t)GS_MIN((uint64_t)chunk, sh.row_hi - x0);
      st = read_exact(f, row, m * width * sizeof(float), &crc, path);
      for (size_t q = 0; q < nh && st == GS_OK; q++) {
        want_block *b = &w[hit[q]];
        size_t lo = GS_MAX(b->where.col_lo, sh.col_lo), hi = GS_MIN(b->where.col_hi, sh.col_hi);
        if (lo >= hi) continue;
        uint64_t r0 = GS_MAX(x0, b->where.row_lo), r1 = GS_MIN(x0 + m, b->where.row_hi);
        for (uint64_t x = r0; x < r1; x++)
          memcpy(b->e->weights + (x - b->where.row_lo) * b->e->dim + (lo - b->where.col_lo),
                 row + (x - x0) * width + (lo - sh.col_lo), (hi - lo) * sizeof(float));
        if (r1 > r0) b->covered += (size_t)(r1 - r0) * (hi - lo);
      }
    }
    for (uint64_t x0 = sh.row_lo; state && x0 < sh.row_hi && st == GS_OK; x0 += chunk * width) {
      size_t m = (size_t)GS_MIN((uint64_t)(chunk * width), sh.row_hi - x0);
      st = read_exact(f, row, m * sizeof(float), &crc, path);
      for (size_t q = 0; q < nh && st == GS_OK; q++) {
        want_block *b = &w[hit[q]];
        uint64_t r0 = GS_MAX(x0, b->where.row_lo), r1 = GS_MIN(x0 + m, b->where.row_hi);
        for (uint64_t x = r0; x < r1; x++)
          b->acc[x - b->where.row_lo] += (double)row[x - x0] * (double)width / (double)D;
      }
    }
  }
  gs_free(row);
  gs_free(hit);
  if (st == GS_OK && k == 0) st = read_exact(f, mlp, nmlp * sizeof(float), &crc, path);
  uint32_t stored = 0;
  if (st == GS_OK && fread(&stored, sizeof stored, 1, f) != 1)
    st = gs_error(GS_ERR_IO, "DLRM checkpoint %s: read failed (cut short?)", path);
  if (st == GS_OK && (stored != crc || crc != c->file_crc[k]))
    st = gs_error(GS_ERR_PARSE, "DLRM checkpoint %s: corrupted: its contents' CRC-32 is %08"
                  PRIx32 ", the file records %08" PRIx32 " and the manifest %08" PRIx32, path,
                  crc, stored, c->file_crc[k]);
  fclose(f);
  return st;
}

/* This rank's shards (rank 0: and the dp replicas) from the files of the
 * checkpoint's ranks that hold their rows, under this run's plan. */
static gs_status reshard_load(dlrm_ckpt *c, gs_dlrm_dist *d) {
  size_t n = gs_dlrm_dist_nshards(d), nw = 0, nmlp;
  float *mlp = gs_dlrm_mlp_weights(gs_dlrm_dist_model(d), &nmlp);
  int state = c->cfg->optim.embed.kind == GS_EMBED_ROWWISE_ADAGRAD;
  want_block *w = gs_calloc(n + 1, sizeof *w);
  if (w == NULL) return gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  gs_status st = GS_OK;
  for (size_t i = 0; i < n && st == GS_OK; i++) {
    want_block b = {0};
    b.e = gs_dlrm_dist_shard(d, i, &b.where);
    if (!saves(c, &b.where)) continue;
    b.acc = gs_calloc(b.e->rows + 1, sizeof *b.acc);
    if (b.acc == NULL) st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
    w[nw++] = b;
  }
  for (int k = 0; k < c->old_ranks && st == GS_OK; k++) {
    int need = c->rank == 0 && k == 0; /* the MLPs */
    for (size_t b = 0; b < nw && !need; b++)
      need = old_rank_holds(c, k, w[b].where.table, w[b].where.row_lo, w[b].where.row_hi);
    if (!need) continue;
    char *path = rank_file(c, c->ckpt_id, c->file_step, k);
    st = path ? reshard_file(c, k, path, w, nw, mlp, nmlp, state)
              : gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
    gs_free(path);
  }
  for (size_t b = 0; b < nw && st == GS_OK; b++) {
    gs_embed_table *e = w[b].e;
    if (w[b].covered != e->rows * e->dim)
      st = gs_error(GS_ERR_PARSE, "DLRM checkpoint in %s: its files fill %zu of the %zu "
                    "values of table '%s' rows [%zu, %zu), columns [%zu, %zu) (its plan does "
                    "not cover the table)", c->cfg->checkpoint_dir, w[b].covered,
                    e->rows * e->dim, e->name, w[b].where.row_lo, w[b].where.row_hi,
                    w[b].where.col_lo, w[b].where.col_hi);
    for (size_t x = 0; state && x < e->rows; x++) e->state[x] = (float)w[b].acc[x];
  }
  for (size_t b = 0; b < nw; b++) gs_free(w[b].acc);
  gs_free(w);
  return st;
}

gs_status dlrm_ckpt_load(dlrm_ckpt *c, gs_dlrm_dist *d) {
  GS_CHECK(dlrm_dist_settle(d));
  gs_status st;
  if (c->old_ranks != c->ranks) {
    st = reshard_load(c, d);
  } else {
    char *path = rank_file(c, c->ckpt_id, c->file_step, c->rank);
    st = path ? read_rank_file(c, d, path)
              : gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
    gs_free(path);
  }
  gs_agreement a;
  GS_CHECK(agree(c, "DLRM resume", st, NULL, 0, &a));
  gs_agreement_free(&a);
  /* The replicated state: rank 0's. */
  size_t nmlp;
  float *mlp = gs_dlrm_mlp_weights(gs_dlrm_dist_model(d), &nmlp);
  GS_CHECK(gs_bcast(c->comm, mlp, nmlp, GS_F32, 0, GS_ALGO_AUTO));
  for (size_t i = 0; i < gs_dlrm_dist_nshards(d); i++) {
    gs_shard where;
    gs_embed_table *e = gs_dlrm_dist_shard(d, i, &where);
    if (where.kind != GS_SHARD_DP) continue;
    GS_CHECK(gs_bcast(c->comm, e->weights, e->rows * e->dim, GS_F32, 0, GS_ALGO_AUTO));
    GS_CHECK(gs_bcast(c->comm, e->state, e->rows, GS_F32, 0, GS_ALGO_AUTO));
  }
  return GS_OK;
}

/* ---- Commits ------------------------------------------------------------------ */

/* Removes this rank's files of other commits and their temporary files
 * (rank 0: also other plans, the manifest's temporary files and the files
 * of ranks this world lacks); keep and keep_plan are the commit in place's
 * names (this rank's file: rank 0 keeps that commit's files of a larger
 * world, which a resumed commit not yet replaced has), pending and
 * pending_plan a commit's being written. Best effort: a file left behind
 * costs space, not correctness. */
static void remove_stale(const dlrm_ckpt *c, const char *keep, const char *keep_plan,
                         const char *pending, const char *pending_plan) {
  const char *kr = strstr(keep, ".rank"); /* keep's commit: the name up to ".rank" */
  DIR *dh = opendir(c->cfg->checkpoint_dir);
  if (dh == NULL) return;
  char mine[64], mine_tmp[80];
  snprintf(mine, sizeof mine, ".rank%d.gsck", c->rank);
  snprintf(mine_tmp, sizeof mine_tmp, ".rank%d.gsck.tmp.", c->rank);
  size_t ml = strlen(mine), removed = 0;
  struct dirent *de;
  while ((de = readdir(dh)) != NULL) {
    const char *n = de->d_name;
    size_t len = strlen(n);
    int stale = 0;
    const char *rk = strstr(n, ".rank");
    int r = -1;
    if (rk && sscanf(rk, ".rank%d.gsck", &r) != 1) r = -1;
    if (strncmp(n, "dlrm-", 5) == 0) {
      if ((len > ml && strcmp(n + len - ml, mine) == 0) || strstr(n, mine_tmp))
        stale = strcmp(n, keep) != 0;
      else if (c->rank == 0 && r >= c->ranks) /* of a larger world before a resize, */
        stale = !kr || strncmp(n, keep, (size_t)(kr - keep) + 5) != 0; /* not keep's commit */
      else if (c->rank == 0 &&
               ((len > 10 && strcmp(n + len - 10, ".plan.json") == 0) ||
                strstr(n, ".plan.json.tmp.")))
        stale = strcmp(n, keep_plan) != 0;
    } else if (c->rank == 0 && strncmp(n, MANIFEST ".tmp.", sizeof MANIFEST + 4) == 0) {
      stale = 1;
    }
    /* a commit being written (its temporary files too) */
    if (pending && strncmp(n, pending, strlen(pending)) == 0) stale = 0;
    if (pending_plan && strncmp(n, pending_plan, strlen(pending_plan)) == 0) stale = 0;
    if (!stale) continue;
    char *p = path_printf("%s/%s", c->cfg->checkpoint_dir, n);
    if (p && unlink(p) == 0) removed++;
    gs_free(p);
  }
  closedir(dh);
  if (removed) {
    char *p = path_printf("%s/" MANIFEST, c->cfg->checkpoint_dir);
    if (p) gs__sync_dir_of(p);
    gs_free(p);
  }
}

/* Rank 0: the manifest, naming the step, the run, the plan and every
 * rank's file; written by rename, the commit point. */
static gs_status write_manifest(dlrm_ckpt *c, size_t step, double loss_sum, const char *plan,
                                uint32_t plan_crc, const uint64_t *bytes, const uint32_t *crc,
                                size_t *written) {
  cJSON *m = cJSON_CreateObject();
  char buf[64];
  cJSON_AddStringToObject(m, "format", FORMAT);
  cJSON_AddNumberToObject(m, "version", 1);
  cJSON_AddNumberToObject(m, "step", (double)step);
  cJSON_AddNumberToObject(m, "epoch", (double)(step / c->cfg->steps));
  cJSON_AddNumberToObject(m, "step_in_epoch", (double)(step % c->cfg->steps));
  /* the run's length, for a supervisor or a cluster manager (not checked
   * on resume: a resumed run may train longer) */
  cJSON_AddNumberToObject(m, "epochs", (double)c->cfg->epochs);
  snprintf(buf, sizeof buf, "%a", loss_sum); /* exact */
  cJSON_AddStringToObject(m, "epoch_loss_sum", buf);
  snprintf(buf, sizeof buf, "%016" PRIx64, c->run_id);
  cJSON_AddStringToObject(m, "run_id", buf);
  cJSON_AddItemToObject(m, "run", describe_run(c));
  cJSON_AddStringToObject(m, "plan", basename_of(plan));
  cJSON_AddNumberToObject(m, "plan_crc32", plan_crc);
  cJSON *fs = cJSON_AddArrayToObject(m, "files");
  for (int r = 0; r < c->ranks; r++) {
    cJSON *f = cJSON_CreateObject();
    char *p = rank_file(c, c->run_id, step, r);
    cJSON_AddNumberToObject(f, "rank", r);
    cJSON_AddStringToObject(f, "file", p ? basename_of(p) : "");
    cJSON_AddNumberToObject(f, "bytes", (double)bytes[r]);
    cJSON_AddNumberToObject(f, "crc32", crc[r]);
    cJSON_AddItemToArray(fs, f);
    gs_free(p);
  }
  char *text = cJSON_Print(m);
  cJSON_Delete(m);
  char *path = path_printf("%s/" MANIFEST, c->cfg->checkpoint_dir);
  gs_status st = GS_OK;
  if (text == NULL || path == NULL) st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  gs__state_file f;
  if (st == GS_OK) st = gs__state_file_create(&f, path, "DLRM checkpoint manifest");
  if (st == GS_OK) {
    size_t len = strlen(text);
    st = gs__state_file_write(&f, text, len);
    if (st == GS_OK) st = gs__state_file_write(&f, "\n", 1);
    if (st == GS_OK) {
      *written = f.bytes;
      st = gs__state_file_sync(&f);
    } else {
      gs__state_file_abort(&f);
    }
  }
  cJSON_free(text);
  gs_free(path);
  return st;
}

/* ---- A commit: written, made durable (now or in the background), published --
 *
 * dlrm_ckpt_commit writes this rank's file into the page cache (the state's
 * bytes only: the part that must see the state as it is at the commit);
 * the rest needs only the written file: its CRC-32 (read back), the fsync
 * and the rename (and on rank 0 the plan). In the foreground that runs at
 * once; in the background a thread runs it while training goes on, and the
 * ranks publish the commit (agree that every file is on disk, rank 0's
 * manifest) at a step they all know: dlrm_ckpt_due's, from the previous
 * publication's measured times, or the next commit point. Until then the
 * manifest names the commit before: a crash loses at most what it would
 * have lost at that commit point. */
typedef struct pending {
  pthread_t thread;
  int threaded;            /* a thread runs finish (else it runs inline); set before the
                            * thread starts, cleared once it is joined */
  gs__state_file f;        /* this rank's file, written, not yet checksummed */
  int open;                /* f holds a temporary file */
  char *mine, *pfile;
  const gs_shard_plan *plan;
  size_t step;
  double loss_sum;
  uint32_t replicas;       /* replica_crc at the commit */
  double t0, stall_s;      /* when the commit began; the training it stalled */
  /* what finish leaves */
  gs_status st;
  char err[1024];
  uint32_t crc, plan_crc;
  uint64_t bytes;
  size_t plan_bytes;
  double write_s;
} pending;

/* The part of a commit that needs only the written file: its CRC-32, the
 * checksum appended, fsync, rename; rank 0's plan. */
static void *pending_finish(void *arg) {
  dlrm_ckpt *c = arg;
  pending *p = c->pend;
  double t0 = gs_now();
  /* in the background, the files older than the last commit in place */
  if (p->threaded && c->kept && c->kept_plan)
    remove_stale(c, c->kept, c->kept_plan, basename_of(p->mine), basename_of(p->pfile));
  gs_status st = p->f.defer_crc ? gs__state_file_crc_back(&p->f) : GS_OK;
  p->crc = (uint32_t)p->f.crc;
  if (st == GS_OK) st = gs__state_file_finish(&p->f);
  p->bytes = p->f.bytes;
  if (st == GS_OK) {
    st = gs__state_file_sync(&p->f);
  } else {
    gs__state_file_abort(&p->f);
  }
  p->open = 0;
  if (st == GS_OK && c->rank == 0) {
    st = gs_shard_plan_save(p->plan, c->specs, p->pfile);
    char *text = NULL;
    size_t len = 0;
    if (st == GS_OK) st = sync_file(p->pfile);
    if (st == GS_OK) st = gs__read_text(p->pfile, "sharding plan", PLAN_MAX, &text, &len);
    if (st == GS_OK) {
      p->plan_crc = gs__crc32(0, text, len);
      p->plan_bytes = len;
    }
    gs_free(text);
  }
  double t1 = gs_now();
  p->write_s = t1 - t0;
  if (c->tl && p->threaded) {
    char name[64];
    snprintf(name, sizeof name, "commit %zu written", p->step);
    gs__timeline_event(c->tl, gs__timeline_track(c->tl, "checkpoint writer"), name,
                       (uint64_t)(t0 * 1e9), (uint64_t)(t1 * 1e9), NULL);
  }
  p->st = st;
  if (st != GS_OK) snprintf(p->err, sizeof p->err, "%s", gs_last_error());
  return NULL;
}

static void pending_free(dlrm_ckpt *c) {
  pending *p = c->pend;
  if (p == NULL) return;
  if (p->open) gs__state_file_abort(&p->f);
  gs_free(p->mine);
  gs_free(p->pfile);
  gs_free(p);
  c->pend = NULL;
}

/* A commit that will not be published: its writer joined, its files gone. */
static void pending_drop(dlrm_ckpt *c) {
  pending *p = c->pend;
  if (p == NULL) return;
  if (p->threaded) pthread_join(p->thread, NULL);
  p->threaded = 0;
  if (p->mine) unlink(p->mine);
  if (c->rank == 0 && p->pfile) unlink(p->pfile);
  pending_free(c);
}

/* What each rank tells the others of its part of a commit. */
typedef struct commit_vote {
  uint64_t bytes;          /* its file's size */
  uint32_t crc, replicas;  /* its file's CRC-32; replica_crc */
  double write_s, step_s;  /* its writer's seconds; its seconds a step meanwhile (0: none) */
} commit_vote;

gs_status dlrm_ckpt_commit(dlrm_ckpt *c, gs_dlrm_dist *d, const gs_shard_plan *plan,
                           size_t step, double epoch_loss_sum, int background,
                           dlrm_ckpt_done *done) {
  memset(done, 0, sizeof *done);
  if (c->pend != NULL)
    return gs_error(GS_ERR_STATE, "DLRM commit at step %zu: the commit at step %zu is still "
                    "being written (dlrm_ckpt_publish first)", step, c->pend->step);
  GS_CHECK(dlrm_dist_settle(d));
  background = background && c->background;
  pending *p = gs_calloc(1, sizeof *p);
  if (p == NULL) return gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  c->pend = p;
  p->t0 = gs_now();
  p->plan = plan;
  p->step = step;
  p->loss_sum = epoch_loss_sum;
  p->replicas = replica_crc(d);
  p->mine = rank_file(c, c->run_id, step, c->rank);
  p->pfile = plan_file(c, c->run_id, step);
  gs_status st = GS_OK;
  if (p->mine == NULL || p->pfile == NULL)
    st = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
  if (st == GS_OK) st = write_rank_file(c, d, p->mine, step, background, &p->f);
  p->open = st == GS_OK;
  /* Started on every rank or on none. */
  if (st == GS_OK && background) {
    p->threaded = 1;
    if (pthread_create(&p->thread, NULL, pending_finish, c) != 0) {
      p->threaded = 0;
      st = gs_error(GS_ERR_INTERNAL, "DLRM commit at step %zu: cannot start the writer thread",
                    step);
    }
  }
  if (background) {
    gs_agreement a;
    st = agree(c, "DLRM commit", st, NULL, 0, &a);
    if (st == GS_OK) gs_agreement_free(&a);
    if (st != GS_OK) {
      pending_drop(c);
      return st;
    }
    p->stall_s = gs_now() - p->t0;
    return GS_OK;
  }
  if (st == GS_OK) {
    pending_finish(c);
  } else {
    p->st = st;
    snprintf(p->err, sizeof p->err, "%s", gs_last_error());
  }
  return dlrm_ckpt_publish(c, d, step, done);
}

void dlrm_ckpt_set_timeline(dlrm_ckpt *c, gs__timeline *tl) {
  if (c) c->tl = tl;
}

size_t dlrm_ckpt_due(const dlrm_ckpt *c) {
  if (c == NULL || c->pend == NULL || !c->pend->threaded || c->lag == 0) return 0;
  return c->pend->step + c->lag;
}

gs_status dlrm_ckpt_publish(dlrm_ckpt *c, gs_dlrm_dist *d, size_t now, dlrm_ckpt_done *done) {
  memset(done, 0, sizeof *done);
  pending *p = c->pend;
  if (p == NULL) return GS_OK;
  double w0 = gs_now();
  gs_status st = dlrm_dist_settle(d);
  int background = p->threaded;
  if (p->threaded) pthread_join(p->thread, NULL);
  p->threaded = 0;
  size_t step = p->step;
  if (st == GS_OK && p->st != GS_OK)
    st = gs_error(p->st, "DLRM commit at step %zu%s: %s", step,
                  background ? ", written in the background" : "", p->err);
  commit_vote v = {p->bytes, p->crc, p->replicas, p->write_s, 0};
  if (background && now > step) v.step_s = (w0 - p->t0) / (double)(now - step);
  /* Every rank's file is on disk, and the replicas are alike. */
  gs_agreement a;
  st = agree(c, "DLRM commit", st, &v, sizeof v, &a);
  uint64_t *fb = NULL;
  uint32_t *fc = NULL;
  gs_status pst = GS_OK;
  if (st == GS_OK) {
    const commit_vote *all = a.payloads;
    for (int r = 0; r < c->ranks && st == GS_OK; r++)
      if (all[r].replicas != all[0].replicas)
        st = gs_error(GS_ERR_STATE, "DLRM commit at step %zu: rank %d's replicated state (the "
                      "MLPs' weights or a dp table) differs from rank 0's (CRC-32 %08" PRIx32
                      " against %08" PRIx32 "): the replicas have diverged, so rank 0's alone "
                      "would not resume this run; not committed", step, r, all[r].replicas,
                      all[0].replicas);
    /* The next background commit's publication: after the slowest writer
     * (and a quarter more), in steps of the fastest rank (the same figures
     * on every rank). */
    if (st == GS_OK && background) {
      double wmax = 0, smin = 0;
      for (int r = 0; r < c->ranks; r++) {
        if (all[r].write_s > wmax) wmax = all[r].write_s;
        if (all[r].step_s > 0 && (smin == 0 || all[r].step_s < smin)) smin = all[r].step_s;
      }
      if (smin > 0 && isfinite(wmax / smin)) {
        double lag = ceil(1.25 * wmax / smin) + 1; /* a margin: the writer's time varies */
        size_t most = c->cfg->commit_every ? c->cfg->commit_every : c->cfg->steps;
        c->lag = lag >= (double)most ? most : (size_t)lag;
      }
    }
    if (st == GS_OK && c->rank == 0) {
      fb = gs_calloc((size_t)c->ranks, sizeof *fb);
      fc = gs_calloc((size_t)c->ranks, sizeof *fc);
      if (fb == NULL || fc == NULL) pst = gs_error(GS_ERR_NOMEM, "DLRM checkpoint: out of memory");
      for (int r = 0; r < c->ranks && pst == GS_OK; r++) {
        fb[r] = all[r].bytes;
        fc[r] = all[r].crc;
      }
    }
    gs_agreement_free(&a);
  }
  /* Rank 0 publishes; every rank learns whether it did. */
  size_t mbytes = 0;
  if (c->rank == 0 && st == GS_OK && pst == GS_OK)
    pst = write_manifest(c, step, p->loss_sum, p->pfile, p->plan_crc, fb, fc, &mbytes);
  if (st == GS_OK) {
    st = agree(c, "DLRM commit", pst, NULL, 0, &a);
    if (st == GS_OK) gs_agreement_free(&a);
  }
  gs_free(fb);
  gs_free(fc);
  if (st != GS_OK) {
    /* Not committed: the previous commit stays, and these are nobody's. */
    pending_drop(c);
    return st;
  }
  if (background) {
    /* The files it replaces go in the next writer's thread (unlinking a
     * large file takes tens of ms); a foreground commit removes them. */
    gs_free(c->kept);
    gs_free(c->kept_plan);
    c->kept = path_printf("%s", basename_of(p->mine));
    c->kept_plan = path_printf("%s", basename_of(p->pfile));
  } else {
    remove_stale(c, basename_of(p->mine), basename_of(p->pfile), NULL, NULL);
    gs_free(c->kept);
    gs_free(c->kept_plan);
    c->kept = c->kept_plan = NULL;
  }
  done->step = step;
  done->published_step = background ? now : step;
  done->bytes = (size_t)p->bytes + p->plan_bytes + mbytes;
  done->write_s = background ? p->write_s : 0;
  done->stall_s = p->stall_s + (gs_now() - (background ? w0 : p->t0));
  pending_free(c);
  return GS_OK;
}
