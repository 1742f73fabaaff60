/*
 * Workloads of the cluster simulator (gradsync/cluster_sim.h): a job trace
 * and the speed of each job on 1..N whole nodes, from measured step times.
 *
 * Pollux's traces (data/pollux-osdi21, the OSDI'21 artifact): a
 * job asks for num_replicas GPUs and a global batch_size that it keeps (no
 * batch-size adaptation here). On n nodes of G GPUs it runs n*G replicas of
 * local batch B/(n*G); its step time at that placement comes from
 * placements.csv (placement "GG..G", n digits: n = 1..4 on the artifact's
 * testbed) or scalability.csv (num_nodes = n, num_replicas = n*G: 6, 8,
 * 12, 16), interpolated linearly in the local batch between the measured
 * local batches, and linearly in n between measured node counts (held at
 * the largest count beyond it). A size is allowed when its local batch lies
 * within the measured ones (the smallest bounds max_nodes, the largest,
 * the GPU's memory, min_nodes). The job's work is the number of steps the
 * artifact measured at its batch size to reach its epoch budget (bert 2,
 * cifar10 100, deepspeech2 80, imagenet 90, ncf 10, yolov3 50): the
 * iteration column of the last row of validation-BATCH.csv (log-log
 * interpolation between batch sizes when the job's is not measured).
 * Speed = 1/step time in steps per second.
 *
 * gradsync's own table: the workload name,time,model,nodes,samples[,
 * min_nodes,max_nodes,weight] (nodes: the size asked for; samples: the
 * job's length) and a speed table model,nodes,step_time_s,samples_per_step
 * (samples/s interpolated linearly between measured node counts; outside
 * them a job may not run unless min_nodes/max_nodes say so, and then the
 * nearest measured throughput is held). An optional start_s column is a
 * start's cost on that many nodes (the launch over more hosts takes
 * longer), interpolated and held the same way; an optional end_s column
 * the time from a job's last step to its exit on that many nodes (its
 * final evaluation and save), paid once, at its end, and not by a resize.
 */
#include "gradsync/cluster_sim.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CSV_MAX_FIELDS 16
#define CSV_LINE_MAX 4096

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (err == NULL || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---- CSV ----------------------------------------------------------------- */

typedef struct csv {
  FILE *f;
  const char *path;
  int line;
  char buf[CSV_LINE_MAX];
  char *field[CSV_MAX_FIELDS];
  int nfields;
  char *head[CSV_MAX_FIELDS];
  char headbuf[CSV_LINE_MAX];
  int nhead;
} csv;

/* Splits buf at commas, trimming spaces and the line end. */
static int csv_split(char *buf, char **field) {
  int n = 0;
  char *p = buf;
  size_t len = strlen(p);
  while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r')) p[--len] = '\0';
  for (;;) {
    char *c = strchr(p, ',');
    if (c != NULL) *c = '\0';
    while (*p == ' ' || *p == '\t') p++;
    char *e = p + strlen(p);
    while (e > p && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
    if (n == CSV_MAX_FIELDS) return -1;
    field[n++] = p;
    if (c == NULL) break;
    p = c + 1;
  }
  return n;
}

/* Opens path and reads its header. */
static int csv_open(csv *c, const char *path, const char *what, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  c->path = path;
  c->f = fopen(path, "r");
  if (c->f == NULL) {
    set_err(err, errlen, "cannot read the %s '%s': %s", what, path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fileno(c->f), &st) == 0 && S_ISDIR(st.st_mode)) {
    set_err(err, errlen, "cannot read the %s '%s': a directory, not a CSV file", what, path);
    fclose(c->f);
    c->f = NULL;
    return -1;
  }
  if (fgets(c->headbuf, sizeof c->headbuf, c->f) == NULL) {
    set_err(err, errlen, "%s: empty file (expected a CSV header line)", path);
    fclose(c->f);
    c->f = NULL;
    return -1;
  }
  c->line = 1;
  /* A UTF-8 byte-order mark (a spreadsheet's export) is not the first
   * column's name. */
  if (memcmp(c->headbuf, "\xEF\xBB\xBF", 3) == 0)
    memmove(c->headbuf, c->headbuf + 3, strlen(c->headbuf + 3) + 1);
  c->nhead = csv_split(c->headbuf, c->head);
  if (c->nhead < 0) {
    set_err(err, errlen, "%s:1: more than %d columns", path, CSV_MAX_FIELDS);
    fclose(c->f);
    c->f = NULL;
    return -1;
  }
  /* A column named twice: which one is meant cannot be told. */
  for (int i = 0; i < c->nhead; i++)
    for (int k = 0; k < i; k++)
      if (strcmp(c->head[i], c->head[k]) == 0) {
        set_err(err, errlen, "%s:1: column '%s' twice in the header (columns %d and %d)", path,
                c->head[i], k + 1, i + 1);
        fclose(c->f);
        c->f = NULL;
        return -1;
      }
  return 0;
}

static void csv_close(csv *c) {
  if (c->f != NULL) fclose(c->f);
  c->f = NULL;
}

static int csv_col(const csv *c, const char *name) {
  for (int i = 0; i < c->nhead; i++)
    if (strcmp(c->head[i], name) == 0) return i;
  return -1;
}

/* The next non-empty line: 1, 0 at the end, -1 on a bad line (message set). */
static int csv_next(csv *c, char *err, size_t errlen) {
  for (;;) {
    if (fgets(c->buf, sizeof c->buf, c->f) == NULL) return 0;
    c->line++;
    if (strchr(c->buf, '\n') == NULL && !feof(c->f)) {
      set_err(err, errlen, "%s:%d: line longer than %d bytes", c->path, c->line,
              CSV_LINE_MAX - 2);
      return -1;
    }
    char *p = c->buf;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    if (*p == '\0' || *p == '#') continue;
    c->nfields = csv_split(c->buf, c->field);
    if (c->nfields != c->nhead) {
      set_err(err, errlen, "%s:%d: %d fields; the header has %d", c->path, c->line,
              c->nfields < 0 ? CSV_MAX_FIELDS + 1 : c->nfields, c->nhead);
      return -1;
    }
    return 1;
  }
}

/* A finite number in [lo, hi] from column col (named for the message). */
static int csv_num(const csv *c, int col, double lo, double hi, double *out, char *err,
                   size_t errlen) {
  const char *s = c->field[col];
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  /* Decimal only: strtod also reads 0x10, inf and nan. */
  int decimal = strspn(s, "+-0123456789.eE") == strlen(s);
  if (*s == '\0' || *end != '\0' || !decimal || errno == ERANGE || !isfinite(v) || v < lo ||
      v > hi) {
    set_err(err, errlen, "%s:%d: column '%s': '%s' is not a number in [%g, %g]", c->path,
            c->line, c->head[col], s, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

static int csv_int(const csv *c, int col, int lo, int hi, int *out, char *err, size_t errlen) {
  double v;
  if (csv_num(c, col, lo, hi, &v, err, errlen) != 0) return -1;
  if (v != floor(v)) {
    set_err(err, errlen, "%s:%d: column '%s': '%s' is not a whole number", c->path, c->line,
            c->head[col], c->field[col]);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int csv_require(const csv *c, const char *const *names, int n, int *cols, char *err,
                       size_t errlen) {
  for (int i = 0; i < n; i++) {
    cols[i] = csv_col(c, names[i]);
    if (cols[i] < 0) {
      set_err(err, errlen, "%s:1: no column '%s' in the header", c->path, names[i]);
      return -1;
    }
  }
  return 0;
}

/* ---- Workload building ----------------------------------------------------- */

static gs_csim_job *add_job(gs_csim_workload *w, int *cap) {
  if (w->njobs == *cap) {
    int nc = *cap ? *cap * 2 : 64;
    gs_csim_job *j = realloc(w->jobs, (size_t)nc * sizeof *j);
    if (j == NULL) return NULL;
    w->jobs = j;
    *cap = nc;
  }
  gs_csim_job *j = &w->jobs[w->njobs++];
  memset(j, 0, sizeof *j);
  j->weight = 1;
  return j;
}

static void copy_name(char *dst, const char *src) {
  snprintf(dst, GS_CSIM_NAME_MAX, "%s", src);
}

/* The optional user and account columns (cu, ca; -1: absent) of the row
 * into j: a user's name (gs_cluster_name_ok) and an account's path
 * (gs_cluster_account_path_ok), or empty. */
static int read_owner(const csv *c, int cu, int ca, gs_csim_job *j, char *err, size_t errlen) {
  if (cu >= 0 && c->field[cu][0]) {
    if (!gs_cluster_name_ok(c->field[cu])) {
      set_err(err, errlen, "%s:%d: column 'user': '%s' is not a user's name (1 to %d "
              "letters, digits or ._@-)", c->path, c->line, c->field[cu],
              GS_CLUSTER_NAME_MAX - 1);
      return -1;
    }
    snprintf(j->user, sizeof j->user, "%s", c->field[cu]);
  }
  if (ca >= 0 && c->field[ca][0]) {
    char why[160];
    if (!gs_cluster_account_path_ok(c->field[ca], why, sizeof why)) {
      set_err(err, errlen, "%s:%d: column 'account': '%s': %s (a path of 1 to %d names, "
              "'/'-separated, as science/physics)", c->path, c->line, c->field[ca], why,
              GS_CLUSTER_ACCOUNT_LEVELS);
      return -1;
    }
    snprintf(j->account, sizeof j->account, "%s", c->field[ca]);
  }
  return 0;
}


void gs_csim_workload_free(gs_csim_workload *w) {
  if (w == NULL) return;
  for (int i = 0; i < w->njobs; i++) {
    free(w->jobs[i].speed);
    free(w->jobs[i].start_s);
    free(w->jobs[i].end_s);
  }
  free(w->jobs);
  memset(w, 0, sizeof *w);
}

/* ---- Pollux's step-time tables -------------------------------------------- */

/* One measured placement of whole nodes: step times by local batch. */
typedef struct app_row {
  int nodes;
  int nb;
  double bsz[32], step[32];
} app_row;

typedef struct app_table {
  char name[GS_CSIM_NAME_MAX];
  app_row rows[32];
  int nrows;
  double min_lbsz, max_lbsz;
  double val_bsz[16], val_iters[16]; /* batch size -> steps to the epoch budget */
  int nval;
} app_table;

static void row_add(app_table *t, int nodes, double bsz, double step) {
  app_row *r = NULL;
  for (int i = 0; i < t->nrows; i++)
    if (t->rows[i].nodes == nodes) r = &t->rows[i];
  if (r == NULL) {
    if (t->nrows == 32) return;
    r = &t->rows[t->nrows++];
    r->nodes = nodes;
    r->nb = 0;
  }
  if (r->nb == 32) return;
  /* insertion in order of the local batch */
  int k = r->nb++;
  while (k > 0 && r->bsz[k - 1] > bsz) {
    r->bsz[k] = r->bsz[k - 1];
    r->step[k] = r->step[k - 1];
    k--;
  }
  r->bsz[k] = bsz;
  r->step[k] = step;
  if (t->min_lbsz == 0 || bsz < t->min_lbsz) t->min_lbsz = bsz;
  if (bsz > t->max_lbsz) t->max_lbsz = bsz;
}

static int cmp_row(const void *a, const void *b) {
  return ((const app_row *)a)->nodes - ((const app_row *)b)->nodes;
}

/* Linear interpolation in the local batch within one row (held at the ends). */
static double row_step(const app_row *r, double bsz) {
  if (bsz <= r->bsz[0]) return r->step[0];
  for (int k = 1; k < r->nb; k++)
    if (bsz <= r->bsz[k]) {
      double f = (bsz - r->bsz[k - 1]) / (r->bsz[k] - r->bsz[k - 1]);
      return r->step[k - 1] + f * (r->step[k] - r->step[k - 1]);
    }
  return r->step[r->nb - 1];
}

/* Step time on n nodes at local batch bsz: interpolated between the
 * measured node counts around n, held beyond the largest. */
static double app_step(const app_table *t, int n, double bsz) {
  const app_row *lo = NULL, *hi = NULL;
  for (int i = 0; i < t->nrows; i++) {
    if (t->rows[i].nodes <= n) lo = &t->rows[i];
    if (t->rows[i].nodes >= n && hi == NULL) hi = &t->rows[i];
  }
  if (lo == NULL) lo = hi;
  if (hi == NULL) hi = lo;
  double sl = row_step(lo, bsz), sh = row_step(hi, bsz);
  if (hi->nodes == lo->nodes) return sl;
  double f = (double)(n - lo->nodes) / (hi->nodes - lo->nodes);
  return sl + f * (sh - sl);
}

/* dir/app/file into out, or -1 with a message when it does not fit. */
static int path_join(char *out, size_t cap, const char *dir, const char *app, const char *file,
                     char *err, size_t errlen) {
  int n = snprintf(out, cap, "%s/%s/%s", dir, app, file);
  if (n < 0 || (size_t)n >= cap) {
    set_err(err, errlen, "path of %s/%s too long", app, file);
    return -1;
  }
  return 0;
}

static int load_app(const char *dir, const char *app, int gpus, app_table *t, char *err,
                    size_t errlen) {
  char path[4096];
  csv c;
  memset(t, 0, sizeof *t);
  copy_name(t->name, app);
  /* placements.csv: placement strings of n digits G. */
  if (path_join(path, sizeof path, dir, app, "placements.csv", err, errlen) != 0) return -1;
  if (csv_open(&c, path, "step-time table", err, errlen) != 0) return -1;
  int pc[3];
  static const char *const pnames[] = {"placement", "local_bsz", "step_time"};
  if (csv_require(&c, pnames, 3, pc, err, errlen) != 0) {
    csv_close(&c);
    return -1;
  }
  int r;
  while ((r = csv_next(&c, err, errlen)) == 1) {
    const char *p = c.field[pc[0]];
    int n = (int)strlen(p), whole = n > 0;
    for (int k = 0; k < n; k++) whole = whole && p[k] - '0' == gpus;
    if (!whole) continue;
    double b, s;
    if (csv_num(&c, pc[1], 1e-9, 1e12, &b, err, errlen) != 0 ||
        csv_num(&c, pc[2], 1e-12, 1e9, &s, err, errlen) != 0) {
      csv_close(&c);
      return -1;
    }
    row_add(t, n, b, s);
  }
  csv_close(&c);
  if (r < 0) return -1;
  /* scalability.csv: num_nodes, num_replicas = num_nodes * G. */
  if (path_join(path, sizeof path, dir, app, "scalability.csv", err, errlen) != 0) return -1;
  if (csv_open(&c, path, "step-time table", err, errlen) != 0) return -1;
  int sc[4];
  static const char *const snames[] = {"num_nodes", "num_replicas", "local_bsz", "step_time"};
  if (csv_require(&c, snames, 4, sc, err, errlen) != 0) {
    csv_close(&c);
    return -1;
  }
  while ((r = csv_next(&c, err, errlen)) == 1) {
    int nn, nr;
    double b, s;
    if (csv_int(&c, sc[0], 1, 1 << 20, &nn, err, errlen) != 0 ||
        csv_int(&c, sc[1], 1, 1 << 24, &nr, err, errlen) != 0 ||
        csv_num(&c, sc[2], 1e-9, 1e12, &b, err, errlen) != 0 ||
        csv_num(&c, sc[3], 1e-12, 1e9, &s, err, errlen) != 0) {
      csv_close(&c);
      return -1;
    }
    if (nr != nn * gpus) continue;
    int dup = 0; /* placements.csv's own row wins */
    for (int i = 0; i < t->nrows; i++)
      if (t->rows[i].nodes == nn && nn <= 4) dup = 1;
    if (!dup) row_add(t, nn, b, s);
  }
  csv_close(&c);
  if (r < 0) return -1;
  if (t->nrows == 0) {
    set_err(err, errlen, "%s/%s: no step time measured on whole nodes of %d GPUs", dir, app,
            gpus);
    return -1;
  }
  qsort(t->rows, (size_t)t->nrows, sizeof t->rows[0], cmp_row);
  /* validation-BATCH.csv: steps to the budget at each batch size. */
  static const int batches[] = {8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192,
                                200, 256, 320, 384, 400, 512, 640, 800, 1024, 1600, 2048,
                                3200, 4096, 6400, 8192, 12800, 16384, 32768};
  for (size_t k = 0; k < sizeof batches / sizeof batches[0] && t->nval < 16; k++) {
    char file[64];
    snprintf(file, sizeof file, "validation-%d.csv", batches[k]);
    if (path_join(path, sizeof path, dir, app, file, err, errlen) != 0) return -1;
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    fclose(f);
    if (csv_open(&c, path, "validation table", err, errlen) != 0) return -1;
    int ic = csv_col(&c, "iteration");
    if (ic < 0) {
      set_err(err, errlen, "%s:1: no column 'iteration' in the header", path);
      csv_close(&c);
      return -1;
    }
    double last = -1;
    while ((r = csv_next(&c, err, errlen)) == 1)
      if (csv_num(&c, ic, 0, 1e15, &last, err, errlen) != 0) {
        csv_close(&c);
        return -1;
      }
    csv_close(&c);
    if (r < 0) return -1;
    if (last > 0) {
      t->val_bsz[t->nval] = batches[k];
      t->val_iters[t->nval++] = last;
    }
  }
  if (t->nval == 0) {
    set_err(err, errlen, "%s/%s: no validation-BATCH.csv (the steps to the epoch budget)",
            dir, app);
    return -1;
  }
  return 0;
}

/* Steps to the budget at global batch b: log-log interpolation. */
static double app_iters(const app_table *t, double b) {
  if (b <= t->val_bsz[0]) return t->val_iters[0] * t->val_bsz[0] / b;
  for (int k = 1; k < t->nval; k++)
    if (b <= t->val_bsz[k]) {
      double f = (log(b) - log(t->val_bsz[k - 1])) / (log(t->val_bsz[k]) - log(t->val_bsz[k - 1]));
      return exp(log(t->val_iters[k - 1]) + f * (log(t->val_iters[k]) - log(t->val_iters[k - 1])));
    }
  return t->val_iters[t->nval - 1] * t->val_bsz[t->nval - 1] / b;
}

static int load_pollux(csv *c, const char *tables, int nodes, int gpus, gs_csim_workload *w,
                       char *err, size_t errlen) {
  char dir[4096];
  int dn;
  if (tables != NULL) {
    dn = snprintf(dir, sizeof dir, "%s", tables);
  } else {
    const char *slash = strrchr(c->path, '/');
    int len = slash ? (int)(slash - c->path) : 1;
    dn = snprintf(dir, sizeof dir, "%.*s/../traces", len, slash ? c->path : ".");
  }
  if (dn < 0 || (size_t)dn >= sizeof dir) {
    set_err(err, errlen, "%s: the tables' directory's path is too long", c->path);
    return -1;
  }
  int col[5];
  static const char *const names[] = {"name", "time", "application", "num_replicas",
                                      "batch_size"};
  if (csv_require(c, names, 5, col, err, errlen) != 0) return -1;
  int cu = csv_col(c, "user"), ca = csv_col(c, "account");
  app_table *apps = NULL;
  int napps = 0, cap = 0, r;
  while ((r = csv_next(c, err, errlen)) == 1) {
    const char *app = c->field[col[2]];
    app_table *t = NULL;
    for (int i = 0; i < napps; i++)
      if (strcmp(apps[i].name, app) == 0) t = &apps[i];
    if (t == NULL) {
      if (strchr(app, '/') != NULL || app[0] == '\0' || app[0] == '.') {
        set_err(err, errlen, "%s:%d: column 'application': '%s' is not an application name",
                c->path, c->line, app);
        r = -1;
        break;
      }
      app_table *na = realloc(apps, (size_t)(napps + 1) * sizeof *na);
      if (na == NULL) {
        set_err(err, errlen, "out of memory reading %s", c->path);
        r = -1;
        break;
      }
      apps = na;
      t = &apps[napps];
      if (load_app(dir, app, gpus, t, err, errlen) != 0) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", err);
        set_err(err, errlen, "%s:%d: application '%s': %s", c->path, c->line, app, inner);
        r = -1;
        break;
      }
      napps++;
    }
    double submit;
    int replicas, batch;
    if (csv_num(c, col[1], 0, 1e12, &submit, err, errlen) != 0 ||
        csv_int(c, col[3], 1, 1 << 24, &replicas, err, errlen) != 0 ||
        csv_int(c, col[4], 1, 1 << 30, &batch, err, errlen) != 0) {
      r = -1;
      break;
    }
    gs_csim_job *j = add_job(w, &cap);
    if (j == NULL) {
      set_err(err, errlen, "out of memory reading %s", c->path);
      r = -1;
      break;
    }
    copy_name(j->name, c->field[col[0]]);
    copy_name(j->model, app);
    j->line = c->line;
    if (read_owner(c, cu, ca, j, err, errlen) != 0) {
      r = -1;
      break;
    }
    j->submit = submit;
    j->work = app_iters(t, batch);
    /* Sizes whose local batch was measured. */
    int lo = 0, hi = 0;
    for (int n = 1; n <= nodes; n++) {
      double lb = (double)batch / ((double)n * gpus);
      if (lb <= t->max_lbsz * (1 + 1e-9) && lb >= t->min_lbsz * (1 - 1e-9)) {
        if (lo == 0) lo = n;
        hi = n;
      }
    }
    if (lo == 0) {
      set_err(err, errlen,
              "%s:%d: job '%s': batch %d fits no size of 1 to %d nodes of %d GPUs (%s's local "
              "batch was measured from %g to %g)%s",
              c->path, c->line, j->name, batch, nodes, gpus, app, t->min_lbsz, t->max_lbsz,
              gpus > 1 && batch < gpus * t->min_lbsz
                  ? "; its batch is too small to split over a whole node's GPUs: with "
                    "--gpus-per-node 1 (and --nodes the GPUs) each GPU is a node"
                  : "");
      r = -1;
      break;
    }
    j->min_nodes = lo;
    j->max_nodes = hi;
    int req = (replicas + gpus - 1) / gpus;
    j->req_nodes = req < lo ? lo : req > hi ? hi : req;
    j->speed = calloc((size_t)hi + 1, sizeof *j->speed);
    if (j->speed == NULL) {
      set_err(err, errlen, "out of memory reading %s", c->path);
      r = -1;
      break;
    }
    for (int n = lo; n <= hi; n++)
      j->speed[n] = 1.0 / app_step(t, n, (double)batch / ((double)n * gpus));
  }
  free(apps);
  if (r < 0) return -1;
  snprintf(w->kind, sizeof w->kind, "pollux");
  return 0;
}

/* ---- gradsync's table ------------------------------------------------------- */

typedef struct model_speed {
  char model[GS_CSIM_NAME_MAX];
  int n;
  int nodes[64];
  double tput[64]; /* samples per second */
  double step[64]; /* samples per step */
  double start[64]; /* start_s, or -1 */
  double end[64];   /* end_s, or -1 */
} model_speed;

static int load_speeds(const char *path, model_speed **out, int *nout, char *err,
                       size_t errlen) {
  csv c;
  if (csv_open(&c, path, "speed table", err, errlen) != 0) return -1;
  int col[4];
  static const char *const names[] = {"model", "nodes", "step_time_s", "samples_per_step"};
  if (csv_require(&c, names, 4, col, err, errlen) != 0) {
    csv_close(&c);
    return -1;
  }
  int cstart = csv_col(&c, "start_s"), cend = csv_col(&c, "end_s");
  model_speed *m = NULL;
  int n = 0, r;
  while ((r = csv_next(&c, err, errlen)) == 1) {
    int nodes;
    double st, sps, start = -1, end = -1;
    if (csv_int(&c, col[1], 1, 1 << 20, &nodes, err, errlen) != 0 ||
        csv_num(&c, col[2], 1e-12, 1e9, &st, err, errlen) != 0 ||
        csv_num(&c, col[3], 1e-12, 1e15, &sps, err, errlen) != 0 ||
        (cstart >= 0 && csv_num(&c, cstart, 0, 1e6, &start, err, errlen) != 0) ||
        (cend >= 0 && csv_num(&c, cend, 0, 1e6, &end, err, errlen) != 0)) {
      r = -1;
      break;
    }
    model_speed *s = NULL;
    for (int i = 0; i < n; i++)
      if (strcmp(m[i].model, c.field[col[0]]) == 0) s = &m[i];
    if (s == NULL) {
      model_speed *nm = realloc(m, (size_t)(n + 1) * sizeof *nm);
      if (nm == NULL) {
        set_err(err, errlen, "out of memory reading %s", path);
        r = -1;
        break;
      }
      m = nm;
      s = &m[n++];
      memset(s, 0, sizeof *s);
      copy_name(s->model, c.field[col[0]]);
    }
    if (s->n == 64) {
      set_err(err, errlen, "%s:%d: model '%s' has more than 64 rows", path, c.line, s->model);
      r = -1;
      break;
    }
    int k = s->n++;
    while (k > 0 && s->nodes[k - 1] > nodes) {
      s->nodes[k] = s->nodes[k - 1];
      s->tput[k] = s->tput[k - 1];
      s->step[k] = s->step[k - 1];
      s->start[k] = s->start[k - 1];
      s->end[k] = s->end[k - 1];
      k--;
    }
    if (k > 0 && s->nodes[k - 1] == nodes) {
      set_err(err, errlen, "%s:%d: model '%s' on %d nodes given twice", path, c.line, s->model,
              nodes);
      r = -1;
      break;
    }
    s->nodes[k] = nodes;
    s->tput[k] = sps / st;
    s->step[k] = sps;
    s->start[k] = start;
    s->end[k] = end;
  }
  csv_close(&c);
  if (r < 0) {
    free(m);
    return -1;
  }
  if (n == 0) {
    set_err(err, errlen, "%s: no rows", path);
    return -1;
  }
  *out = m;
  *nout = n;
  return 0;
}

/* v (tput or start) at n nodes: linear between the measured node counts,
 * the nearest held outside them. */
static double model_at(const model_speed *s, const double *v, int n) {
  if (n <= s->nodes[0]) return v[0];
  for (int k = 1; k < s->n; k++)
    if (n <= s->nodes[k]) {
      double f = (double)(n - s->nodes[k - 1]) / (s->nodes[k] - s->nodes[k - 1]);
      return v[k - 1] + f * (v[k] - v[k - 1]);
    }
  return v[s->n - 1];
}

/* v at every size lo..hi, in an array indexed by size (hi + 1 entries;
 * NULL when out of memory). */
static double *model_curve(const model_speed *s, const double *v, int lo, int hi) {
  double *out = calloc((size_t)hi + 1, sizeof *out);
  for (int n = lo; out && n <= hi; n++) out[n] = model_at(s, v, n);
  return out;
}

static int load_table(csv *c, const char *tables, int nodes, gs_csim_workload *w, char *err,
                      size_t errlen) {
  if (tables == NULL) {
    set_err(err, errlen,
            "%s: a gradsync workload needs a speed table (model,nodes,step_time_s,"
            "samples_per_step)",
            c->path);
    return -1;
  }
  int col[5];
  static const char *const names[] = {"name", "time", "model", "nodes", "samples"};
  if (csv_require(c, names, 5, col, err, errlen) != 0) return -1;
  int cmin = csv_col(c, "min_nodes"), cmax = csv_col(c, "max_nodes"),
      cw = csv_col(c, "weight"), ccw = csv_col(c, "commit_samples"),
      cu = csv_col(c, "user"), ca = csv_col(c, "account");
  /* A column this reader does not know is a typo ("min_node") whose values
   * would be silently ignored. */
  static const char *const known[] = {"name",   "time",     "model",          "nodes",
                                      "samples", "min_nodes", "max_nodes", "weight",
                                      "commit_samples", "user", "account"};
  for (int i = 0; i < c->nhead; i++) {
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(c->head[i], known[k]) != 0) k++;
    if (k == sizeof known / sizeof known[0]) {
      set_err(err, errlen, "%s:1: unknown column '%s' (a gradsync workload has name, time, "
              "model, nodes, samples, and optionally min_nodes, max_nodes, weight, "
              "commit_samples, user, account)", c->path, c->head[i]);
      return -1;
    }
  }
  model_speed *ms = NULL;
  int nms = 0, cap = 0, r;
  if (load_speeds(tables, &ms, &nms, err, errlen) != 0) return -1;
  while ((r = csv_next(c, err, errlen)) == 1) {
    const model_speed *s = NULL;
    for (int i = 0; i < nms; i++)
      if (strcmp(ms[i].model, c->field[col[2]]) == 0) s = &ms[i];
    if (s == NULL) {
      set_err(err, errlen, "%s:%d: column 'model': '%s' is not in the speed table %s", c->path,
              c->line, c->field[col[2]], tables);
      r = -1;
      break;
    }
    gs_csim_job *j = add_job(w, &cap);
    if (j == NULL) {
      set_err(err, errlen, "out of memory reading %s", c->path);
      r = -1;
      break;
    }
    copy_name(j->name, c->field[col[0]]);
    copy_name(j->model, s->model);
    j->line = c->line;
    if (read_owner(c, cu, ca, j, err, errlen) != 0) {
      r = -1;
      break;
    }
    int req;
    if (csv_num(c, col[1], 0, 1e12, &j->submit, err, errlen) != 0 ||
        csv_int(c, col[3], 1, 1 << 20, &req, err, errlen) != 0 ||
        csv_num(c, col[4], 1e-9, 1e18, &j->work, err, errlen) != 0) {
      r = -1;
      break;
    }
    int lo = s->nodes[0], hi = s->nodes[s->n - 1];
    if (cmin >= 0 && csv_int(c, cmin, 1, 1 << 20, &lo, err, errlen) != 0) { r = -1; break; }
    if (cmax >= 0 && csv_int(c, cmax, 1, 1 << 20, &hi, err, errlen) != 0) { r = -1; break; }
    if (cw >= 0 && csv_num(c, cw, 1e-6, 1e6, &j->weight, err, errlen) != 0) { r = -1; break; }
    if (ccw >= 0 && c->field[ccw][0] &&
        csv_num(c, ccw, 0, 1e18, &j->commit_work, err, errlen) != 0) {
      r = -1;
      break;
    }
    if (lo > hi) {
      set_err(err, errlen, "%s:%d: job '%s': min_nodes %d above max_nodes %d", c->path,
              c->line, j->name, lo, hi);
      r = -1;
      break;
    }
    if (lo > nodes) { /* (not "above max_nodes 4": the row's max_nodes may be 8) */
      set_err(err, errlen, "%s:%d: job '%s': min_nodes %d is above the pool's %d nodes",
              c->path, c->line, j->name, lo, nodes);
      r = -1;
      break;
    }
    if (req < lo || req > hi || req > nodes) { /* as a job that fits no size: refused */
      set_err(err, errlen, "%s:%d: job '%s': nodes %d is outside %s [%d, %d]", c->path,
              c->line, j->name, req, req > nodes && req <= hi ? "the pool's" : "its sizes",
              req > nodes && req <= hi ? 1 : lo, req > nodes && req <= hi ? nodes : hi);
      r = -1;
      break;
    }
    if (hi > nodes) hi = nodes;
    j->min_nodes = lo;
    j->max_nodes = hi;
    j->req_nodes = req;
    j->speed = model_curve(s, s->tput, lo, hi);
    j->step_work = model_at(s, s->step, req); /* (its global batch: the same on every size) */
    const int has_start = s->start[0] >= 0; /* the column is there: every row has it */
    if (has_start) j->start_s = model_curve(s, s->start, lo, hi);
    const int has_end = s->end[0] >= 0;
    if (has_end) j->end_s = model_curve(s, s->end, lo, hi);
    if (j->speed == NULL || (has_start && j->start_s == NULL) ||
        (has_end && j->end_s == NULL)) {
      set_err(err, errlen, "out of memory reading %s", c->path);
      r = -1;
      break;
    }
  }
  free(ms);
  if (r < 0) return -1;
  snprintf(w->kind, sizeof w->kind, "table");
  return 0;
}

static int cmp_job_name(const void *a, const void *b) {
  const gs_csim_job *x = *(const gs_csim_job *const *)a, *y = *(const gs_csim_job *const *)b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Every job has a name, and no two the same: the results, the trace and
 * the messages name jobs by it. */
static int check_names(const gs_csim_workload *w, const char *path, char *err, size_t errlen) {
  const gs_csim_job **by = malloc((size_t)w->njobs * sizeof *by);
  if (by == NULL) {
    set_err(err, errlen, "out of memory reading %s", path);
    return -1;
  }
  int rc = 0;
  for (int i = 0; i < w->njobs; i++) by[i] = &w->jobs[i];
  qsort(by, (size_t)w->njobs, sizeof *by, cmp_job_name);
  for (int i = 0; i < w->njobs && rc == 0; i++) {
    if (by[i]->name[0] == '\0') {
      set_err(err, errlen, "%s:%d: column 'name': empty (every job needs a name)", path,
              by[i]->line);
      rc = -1;
    } else if (i > 0 && strcmp(by[i]->name, by[i - 1]->name) == 0) {
      set_err(err, errlen, "%s:%d: job name '%s' is on line %d too (names must differ)", path,
              by[i]->line, by[i]->name, by[i - 1]->line);
      rc = -1;
    }
  }
  free(by);
  return rc;
}

int gs_csim_load(const char *workload, const char *tables, int nodes, int gpus_per_node,
                 gs_csim_workload *w, char *err, size_t errlen) {
  memset(w, 0, sizeof *w);
  if (nodes < 1) {
    set_err(err, errlen, "the pool has %d nodes; expected 1 or more", nodes);
    return -1;
  }
  if (gpus_per_node < 1 || gpus_per_node > 9) {
    set_err(err, errlen, "%d GPUs per node; expected 1 to 9 (Pollux's placement strings)",
            gpus_per_node);
    return -1;
  }
  csv c;
  if (csv_open(&c, workload, "workload", err, errlen) != 0) return -1;
  int rc;
  if (csv_col(&c, "application") >= 0)
    rc = load_pollux(&c, tables, nodes, gpus_per_node, w, err, errlen);
  else if (csv_col(&c, "model") >= 0)
    rc = load_table(&c, tables, nodes, w, err, errlen);
  else {
    set_err(err, errlen,
            "%s:1: not a workload header: expected Pollux's "
            "name,time,application,num_replicas,batch_size or gradsync's "
            "name,time,model,nodes,samples",
            workload);
    rc = -1;
  }
  csv_close(&c);
  if (rc == 0 && w->njobs == 0) {
    set_err(err, errlen, "%s: no jobs", workload);
    rc = -1;
  }
  if (rc == 0) rc = check_names(w, workload, err, errlen);
  if (rc != 0) {
    gs_csim_workload_free(w);
    return -1;
  }
  w->nodes = nodes;
  return 0;
}
