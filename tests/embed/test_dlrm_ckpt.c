/*
 * Checkpoints of hybrid-parallel DLRM training (gs_dlrm_train_run's
 * checkpoint_dir, commit_every, stop_at_step, resume) under mpirun.
 *
 * Exact resume: a run stopped after a commit inside the first epoch, resumed
 * and stopped again at the first epoch's end, then resumed to the end, gives
 * bitwise the losses of every step, the epochs' training losses, held-out AUC
 * and log loss, and the final files of every rank (shards, accumulators,
 * MLPs, dp replicas) of a run that was never stopped; for row-wise shards
 * with row-wise Adagrad and for the planner's plan (dp replicas and whole
 * tables), and with SGD. A crash's leftovers (files of an unpublished
 * commit, temporary files) do not disturb the resume and are removed by its
 * first commit; only the last commit's files are left.
 *
 * Another world size with the same global batch: shrunk to 1 rank (row
 * blocks, and column blocks with SGD), grown from 1 rank, each within 1e-5
 * relative loss of the uninterrupted run. A
 * stop asked on one rank (gs_dlrm_train_request_stop, as SIGUSR1 does)
 * stops every rank at the next commit point.
 *
 * Commits in the background (the default): each put in place after its
 * step with its writer's time, the last in the foreground, the training
 * bitwise the uninterrupted run's; a copy of the directory taken when one
 * is put in place resumes bitwise; a writer failing on the last rank alone
 * (its rename blocked) fails every rank, naming it, and leaves the commit
 * before, from which the run resumes bitwise.
 *
 * Refusals, on every rank and naming what differs: another seed, table, MLP,
 * sharding or batch than the checkpoint's; another world size (each rank
 * alone on a communicator of its own); no checkpoint (and auto starting
 * afresh); one rank's file missing or corrupted, which fails every rank
 * with that rank's message and leaves no rank waiting.
 *
 * Every run is given its lookup cost (gs_dlrm_train_config's lookup), as
 * none of this is about measuring it (embed_train_dlrm_np3 measures it):
 * the events carry the cost given, the predicted lookup times are priced
 * with it (twice the cost, twice the times), and a cost refused (a negative
 * or NaN figure, on every rank or one) or given differently on one rank
 * (another, or none) fails every rank before a step, naming the figure or
 * the rank.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "gradsync.h"
#include "mrt.h"
#include "test_lookup.h"

#define EPOCHS 2
#define STEPS 4
#define MAXSTEPS (EPOCHS * STEPS)
#define RECSTEPS 64 /* the steps a record keeps (regroup(): up to 2 x 4 x ranks) */

static gs_embed_spec g_tables[] = {
    {"one", 1, 8, 2}, {"two", 2, 8, 2}, {"C3", 50, 8, 2}, {"C4", 300, 8, 2}, {"C5", 1000, 8, 2},
};

/* What a run reports, by global step and epoch. */
typedef struct record {
  double loss[RECSTEPS + 1];
  int have[RECSTEPS + 1];
  double epoch_loss[EPOCHS + 1], auc[EPOCHS + 1], log_loss[EPOCHS + 1];
  int epochs_seen, commits, stopped, resumed_at;
  int ask_at; /* this rank asks for a stop (gs_dlrm_train_request_stop) after this step */
  gs_cost_lookup lookup; /* the PLAN event's (lookup_seen: one was there) */
  int lookup_seen;
  double pred_ms; /* the last epoch's predicted lookup ms a step, summed over the ranks */
  /* every commit event: its step, the step after which it was put in place,
   * its writer's seconds */
  size_t commit_step[16], published[16];
  double write_s[16];
  /* background(): at the commit event of step copy_at, rank 0 copies dir to
   * copy; at block_at's, the last rank blocks the file of the commit at
   * block_step (a directory where its rename would put it) */
  int copy_at, block_at, block_step;
  const char *dir, *copy;
  /* at the commit event of step look_at (every rank's writer done), what
   * look_dir holds: rank 0's and rank 1's files, and a crash's leftovers
   * (names with "deadbeef") */
  int look_at, look_r0, look_r1, look_junk;
  const char *look_dir;
  int look_world; /* 1: every rank of MPI_COMM_WORLD runs the job (look's barriers) */
} record;

static void look(record *r);
static void plant_junk(const char *dir);

static void copy_dir(const record *r);
static void block_next(const record *r);

static void on_event(const gs_dlrm_train_event *ev, void *user) {
  record *r = user;
  if (ev->kind == GS_DLRM_EV_STEP) {
    size_t g = (size_t)(ev->epoch - 1) * ev->steps + ev->step;
    if (g <= RECSTEPS) {
      r->loss[g] = ev->loss;
      r->have[g] = 1;
    }
    if (r->ask_at && (size_t)r->ask_at == g) gs_dlrm_train_request_stop();
  } else if (ev->kind == GS_DLRM_EV_EPOCH && ev->epoch <= EPOCHS) {
    r->epoch_loss[ev->epoch] = ev->loss;
    r->auc[ev->epoch] = ev->auc;
    r->log_loss[ev->epoch] = ev->log_loss;
    r->epochs_seen++;
    r->pred_ms = 0;
    for (int k = 0; ev->rank_lookup_pred_ms && k < ev->ranks; k++)
      r->pred_ms += ev->rank_lookup_pred_ms[k];
  } else if (ev->kind == GS_DLRM_EV_PLAN && ev->lookup) {
    r->lookup = *ev->lookup;
    r->lookup_seen = 1;
  } else if (ev->kind == GS_DLRM_EV_COMMIT) {
    if (r->commits < 16) {
      r->commit_step[r->commits] = ev->global_step;
      r->published[r->commits] = ev->published_step;
      r->write_s[r->commits] = ev->write_s;
    }
    r->commits++;
    r->stopped = ev->stopped;
    if (r->copy_at && (size_t)r->copy_at == ev->global_step) copy_dir(r);
    if (r->block_at && (size_t)r->block_at == ev->global_step) block_next(r);
    if (r->look_at && (size_t)r->look_at == ev->global_step) look(r);
  } else if (ev->kind == GS_DLRM_EV_RESUME) {
    r->resumed_at = (int)ev->global_step;
  }
}

/* The lookup cost every run is given (test_lookup.h's). */
static gs_cost_lookup g_lookup;

static gs_dlrm_train_config base_config(const char *dir, int sharding, int sgd) {
  g_lookup = test_lookup();
  gs_dlrm_train_config c = {
      .model = {"13-16-8", "16-1", g_tables, 5, GS_DLRM_DOT, 0, 7},
      .optim = {0.1f, {sgd ? GS_EMBED_SGD : GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-8f}},
      .data = gs_dlrm_synth_defaults(),
      .sharding = sharding,
      .batch = 12,
      .epochs = EPOCHS,
      .steps = STEPS,
      .eval_samples = 96,
      .checkpoint_dir = dir,
      .lookup = &g_lookup};
  c.data.pooling = 2;
  c.data.pooling_random = 1;
  return c;
}

/* The uninterrupted runs' records: row-wise with row-wise Adagrad, and
 * table-wise with SGD (exact_resume "rw", "tw_sgd"). */
static record g_whole_rw, g_whole_sgd;

/* The test's directory, the same on every rank. */
static char g_root[256];

static void make_root(void) {
  char buf[256] = "";
  if (g_rank == 0) {
    snprintf(buf, sizeof buf, "/tmp/gs_dlrm_ckpt.XXXXXX");
    if (mkdtemp(buf) == NULL) buf[0] = '\0';
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  snprintf(g_root, sizeof g_root, "%s", buf);
}

static void subdir(char *out, size_t n, const char *name) {
  if (snprintf(out, n, "%s/%s", g_root, name) >= (int)n) fail("path too long: %s", name);
}

/* The files of dir ending in suffix (the last one's path into out); the
 * count found. */
static int files_ending(const char *dir, const char *suffix, char *out, size_t n) {
  DIR *d = opendir(dir);
  int found = 0;
  if (d == NULL) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name), sl = strlen(suffix);
    if (len > sl && strcmp(e->d_name + len - sl, suffix) == 0) {
      found++;
      if (snprintf(out, n, "%s/%s", dir, e->d_name) >= (int)n) fail("path too long");
    }
  }
  closedir(d);
  return found;
}

/* This rank's files in dir. */
static int rank_files(const char *dir, int rank, char *out, size_t n) {
  char suffix[32];
  snprintf(suffix, sizeof suffix, ".rank%d.gsck", rank);
  return files_ending(dir, suffix, out, n);
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
  if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* Every rank's status agrees, and is `want`. */
static void check_all(gs_status st, gs_status want, const char *what) {
  int mine = (int)st, lo, hi;
  MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi, "%s: the ranks returned different statuses (%d to %d)", what, lo, hi);
  CHECK(st == want, "%s: %s, expected %s (%s)", what, gs_strerror(st), gs_strerror(want),
        st == GS_OK ? "" : gs_last_error());
}

/* One refused resume: every rank fails with a message holding `needle`
 * (on `rank` only, or every rank when rank < 0). */
static void refused(const gs_dlrm_train_config *c, gs_status want, int rank, const char *needle,
                    const char *what) {
  record r = {0};
  gs_status st = gs_dlrm_train_run(c, g_comm, on_event, &r);
  check_all(st, want, what);
  if (st != GS_OK && (rank < 0 || rank == g_rank))
    CHECK(strstr(gs_last_error(), needle) != NULL, "%s: the message '%s' does not say '%s'",
          what, gs_last_error(), needle);
  if (st != GS_OK && rank >= 0 && rank != g_rank) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", rank);
    CHECK(strstr(gs_last_error(), who) != NULL, "%s: the message '%s' does not name %s", what,
          gs_last_error(), who);
  }
  CHECK(r.have[1] == 0, "%s: a step ran", what);
}

/* Uninterrupted against stopped at 3 (commits every 2), resumed and
 * stopped at 4 (the first epoch's end), resumed to the end. same_plan: the
 * stopped runs are given the uninterrupted run's plan (saved with its
 * checkpoint), since the planner's measured costs may differ between runs. */
static void exact_resume(const char *name, int sharding, int sgd, int same_plan) {
  begin_case("exact resume, %s, %d ranks", name, g_size);
  char du[300], ds[300], fu[400] = "", fs[400] = "";
  char nu[64], ns[64];
  snprintf(nu, sizeof nu, "%s_whole", name);
  snprintf(ns, sizeof ns, "%s_stopped", name);
  subdir(du, sizeof du, nu);
  subdir(ds, sizeof ds, ns);
  record u = {0}, s = {0};
  gs_dlrm_train_config c = base_config(du, sharding, sgd);
  CHECK_ST(gs_dlrm_train_run(&c, g_comm, on_event, &u), GS_OK);
  CHECK(u.commits == EPOCHS, "the whole run committed %d times, expected %d", u.commits, EPOCHS);
  if (sharding == GS_SHARD_RW && !sgd) g_whole_rw = u;
  if (sgd) g_whole_sgd = u;

  char plan[400] = "";
  MPI_Barrier(MPI_COMM_WORLD); /* rank 0 removes the older plans after the commit */
  CHECK(files_ending(du, ".plan.json", plan, sizeof plan) == 1, "not one plan in %s", du);
  c = base_config(ds, sharding, sgd);
  if (same_plan) {
    c.sharding = -1;
    c.plan_file = plan;
  }
  c.commit_every = 2;
  c.stop_at_step = 3;
  CHECK_ST(gs_dlrm_train_run(&c, g_comm, on_event, &s), GS_OK);
  CHECK(s.stopped && s.have[3] && !s.have[4] && s.epochs_seen == 0,
        "stopping at step 3: stopped %d, steps 3 and 4 %d %d, %d epochs", s.stopped, s.have[3],
        s.have[4], s.epochs_seen);
  /* What a crash during a later commit leaves. The manifest's commit
   * resumes; the next commit removes them. */
  plant_junk(ds);
  c.commit_every = 0;
  c.stop_at_step = 4;
  c.resume = GS_DLRM_RESUME;
  CHECK_ST(gs_dlrm_train_run(&c, g_comm, on_event, &s), GS_OK);
  CHECK(s.resumed_at == 3 && s.epochs_seen == 1 && s.stopped,
        "resumed at %d (expected 3), %d epochs, stopped %d", s.resumed_at, s.epochs_seen,
        s.stopped);
  c.stop_at_step = 0;
  CHECK_ST(gs_dlrm_train_run(&c, g_comm, on_event, &s), GS_OK);
  CHECK(s.resumed_at == 4 && s.epochs_seen == EPOCHS, "resumed at %d (expected 4), %d epochs",
        s.resumed_at, s.epochs_seen);

  for (int g = 1; g <= MAXSTEPS; g++)
    CHECK(s.have[g] && u.have[g] && memcmp(&s.loss[g], &u.loss[g], sizeof(double)) == 0,
          "step %d's loss: %.17g resumed, %.17g uninterrupted", g, s.loss[g], u.loss[g]);
  for (int e = 1; e <= EPOCHS; e++) {
    CHECK(memcmp(&s.epoch_loss[e], &u.epoch_loss[e], sizeof(double)) == 0,
          "epoch %d's training loss: %.17g resumed, %.17g uninterrupted", e, s.epoch_loss[e],
          u.epoch_loss[e]);
    CHECK(memcmp(&s.auc[e], &u.auc[e], sizeof(double)) == 0 &&
              memcmp(&s.log_loss[e], &u.log_loss[e], sizeof(double)) == 0,
          "epoch %d's held-out AUC %.17g / %.17g and log loss %.17g / %.17g", e, s.auc[e],
          u.auc[e], s.log_loss[e], u.log_loss[e]);
  }
  /* One file per rank left (a crash's leftovers removed), and the same
   * bytes. */
  MPI_Barrier(MPI_COMM_WORLD);
  char left[400];
  CHECK(files_ending(ds, ".plan.json", left, sizeof left) == 1 &&
            files_ending(ds, "dlrm.json.tmp.deadbeef", left, sizeof left) == 0 &&
            files_ending(ds, "Xa1b2c", left, sizeof left) == 0,
        "a crash's leftovers are still in %s", ds);
  int nu_files = rank_files(du, g_rank, fu, sizeof fu), ns_files = rank_files(ds, g_rank, fs,
                                                                                sizeof fs);
  CHECK(nu_files == 1 && ns_files == 1, "rank %d has %d and %d files (expected one each)",
        g_rank, nu_files, ns_files);
  size_t lu = 0, ls = 0;
  unsigned char *bu = slurp(fu, &lu), *bs = slurp(fs, &ls);
  CHECK(bu && bs && lu == ls && memcmp(bu, bs, lu) == 0,
        "rank %d's final state differs: %s (%zu bytes) and %s (%zu bytes)", g_rank, fu, lu, fs,
        ls);
  free(bu);
  free(bs);
  end_case();
}

static void refusals(void) {
  char dir[300], file[400];
  subdir(dir, sizeof dir, "rw_stopped"); /* exact_resume's: at the end of the run */
  begin_case("refusals, %d ranks", g_size);
  gs_dlrm_train_config c = base_config(dir, GS_SHARD_RW, 0);
  c.resume = GS_DLRM_RESUME;
  c.epochs = EPOCHS + 1; /* one more epoch to go */

  gs_dlrm_train_config x = c;
  x.model.seed = 8;
  refused(&x, GS_ERR_INVALID_ARG, -1, "the seed", "another seed");
  gs_embed_spec t2[5];
  memcpy(t2, g_tables, sizeof t2);
  t2[3].rows = 301;
  x = c;
  x.model.tables = t2;
  refused(&x, GS_ERR_INVALID_ARG, -1, "table 3", "another table");
  x = c;
  x.model.top_mlp = "32-1";
  refused(&x, GS_ERR_INVALID_ARG, -1, "the top MLP", "another top MLP");
  x = c;
  x.sharding = GS_SHARD_TW;
  refused(&x, GS_ERR_INVALID_ARG, -1, "the sharding", "another sharding");
  char other[300], plan[400] = "";
  subdir(other, sizeof other, "auto_stopped");
  files_ending(other, ".plan.json", plan, sizeof plan);
  x = c;
  x.sharding = -1;
  x.plan_file = plan; /* the planner's: dp and tw, not rw */
  refused(&x, GS_ERR_INVALID_ARG, -1, "the sharding", "a plan file");
  x = base_config(other, -1, 0);
  x.resume = GS_DLRM_RESUME;
  x.plan_file = plan; /* at its end: nothing left to run */
  record r0 = {0};
  check_all(gs_dlrm_train_run(&x, g_comm, on_event, &r0), GS_OK, "the checkpoint's own plan");
  CHECK(r0.resumed_at == MAXSTEPS && r0.commits == 0 && r0.epochs_seen == 0,
        "resumed at %d, %d commits, %d epochs", r0.resumed_at, r0.commits, r0.epochs_seen);
  x.plan_file = NULL;
  refused(&x, GS_ERR_INVALID_ARG, -1, "the sharding", "no plan file");
  x = c;
  x.batch = 13;
  refused(&x, GS_ERR_INVALID_ARG, -1, "do not split into steps of", "another batch");
  x = c;
  x.optim.embed.kind = GS_EMBED_SGD;
  refused(&x, GS_ERR_INVALID_ARG, -1, "the tables' optimizer", "another optimizer");
  x = c;
  x.epochs = 1;
  refused(&x, GS_ERR_INVALID_ARG, -1, "past this run's end", "a run that ends before it");

  /* No checkpoint: refused; auto starts afresh. */
  char empty[300];
  subdir(empty, sizeof empty, "empty");
  x = base_config(empty, GS_SHARD_RW, 0);
  x.epochs = 1;
  x.steps = 1;
  x.resume = GS_DLRM_RESUME;
  refused(&x, GS_ERR_IO, -1, "no checkpoint", "no checkpoint");
  x.resume = GS_DLRM_RESUME_IF_ANY;
  record r = {0};
  check_all(gs_dlrm_train_run(&x, g_comm, on_event, &r), GS_OK, "auto without a checkpoint");
  CHECK(r.have[1] && r.resumed_at == 0, "auto without a checkpoint did not start afresh");

  /* Another world size: each rank alone. */
  MPI_Comm solo;
  gs_comm *one = NULL;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank, 0, &solo);
  CHECK_ST(gs_comm_create(solo, &one), GS_OK);
  if (one) {
    record q = {0};
    gs_status st = gs_dlrm_train_run(&c, one, on_event, &q);
    char want[256];
    snprintf(want, sizeof want, "its global batch was %d (%d ranks) and this run's is 12 (1 "
             "rank): another global batch resumes on the same samples an epoch, and the "
             "checkpoint's epochs are 4 steps of %d (%d samples), this run's 4 steps of 12 "
             "(48); give --steps %d", 12 * g_size, g_size, 12 * g_size, 48 * g_size,
             4 * g_size);
    CHECK(st == GS_ERR_INVALID_ARG && strstr(gs_last_error(), want),
          "resuming 2 ranks' checkpoint on 1: %s (%s)", gs_strerror(st), gs_last_error());
    gs_comm_destroy(one);
  }
  MPI_Comm_free(&solo);

  /* The last rank's file missing, then corrupted: every rank fails. */
  int last = g_size - 1;
  char moved[420];
  rank_files(dir, last, file, sizeof file);
  if (snprintf(moved, sizeof moved, "%s.away", file) >= (int)sizeof moved) fail("path too long");
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == last) CHECK(rename(file, moved) == 0, "cannot move %s", file);
  MPI_Barrier(MPI_COMM_WORLD);
  refused(&c, GS_ERR_IO, last, "No such file", "a rank's file missing");
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == last) {
    CHECK(rename(moved, file) == 0, "cannot move %s back", moved);
    FILE *f = fopen(file, "r+b");
    CHECK(f != NULL, "cannot open %s", file);
    if (f) {
      fseek(f, 100, SEEK_SET);
      int ch = fgetc(f);
      fseek(f, 100, SEEK_SET);
      fputc(ch ^ 0x10, f);
      fclose(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  refused(&c, GS_ERR_PARSE, last, "corrupted", "a rank's file corrupted");
  end_case();
}

/* Steps 4.. of r against an uninterrupted run: the same samples in the
 * same steps, sums in another order. */
static void close_to(const record *r, const record *whole, const char *what) {
  for (int g = 4; g <= MAXSTEPS; g++) {
    double a = r->loss[g], b = whole->loss[g];
    CHECK(r->have[g] && fabs(a - b) <= 1e-5 * fabs(b), "%s: step %d's loss %.17g, "
          "uninterrupted %.17g", what, g, a, b);
  }
  for (int e = 1; e <= EPOCHS; e++)
    CHECK(fabs(r->epoch_loss[e] - whole->epoch_loss[e]) <= 1e-5 * whole->epoch_loss[e] &&
              fabs(r->log_loss[e] - whole->log_loss[e]) <= 1e-5 * whole->log_loss[e] &&
              fabs(r->auc[e] - whole->auc[e]) <= 1e-3,
          "%s: epoch %d: training loss %.9g / %.9g, log loss %.9g / %.9g, AUC %.9g / %.9g", what,
          e, r->epoch_loss[e], whole->epoch_loss[e], r->log_loss[e], whole->log_loss[e],
          r->auc[e], whole->auc[e]);
}

static void close_to_whole(const record *r, const char *what) { close_to(r, &g_whole_rw, what); }

/* A plan for P ranks splitting every table into two column blocks of 4 on
 * ranks t and t + 1 (mod P), or for 1 rank whole tables. */
static void write_cw_plan(const char *path, int P) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fail("cannot write %s", path);
    return;
  }
  fprintf(f, "{\"ranks\": %d, \"tables\": [", P);
  for (int t = 0; t < 5; t++)
    fprintf(f, "%s{\"name\": \"%s\", \"rows\": %zu, \"dim\": 8, \"sharding\": \"%s\", "
            "\"why\": \"test\"}", t ? ", " : "", g_tables[t].name, g_tables[t].rows,
            P > 1 ? "cw" : "tw");
  fprintf(f, "], \"shards\": [");
  for (int t = 0; t < 5; t++) {
    if (P == 1) {
      fprintf(f, "%s{\"table\": %d, \"rank\": 0, \"row_lo\": 0, \"row_hi\": %zu, "
              "\"col_lo\": 0, \"col_hi\": 8, \"est_s\": 0}", t ? ", " : "", t,
              g_tables[t].rows);
      continue;
    }
    for (int b = 0; b < 2; b++)
      fprintf(f, "%s{\"table\": %d, \"rank\": %d, \"row_lo\": 0, \"row_hi\": %zu, "
              "\"col_lo\": %d, \"col_hi\": %d, \"est_s\": 0}", t || b ? ", " : "", t,
              (t + b) % P, g_tables[t].rows, 4 * b, 4 * b + 4);
  }
  fprintf(f, "]}\n");
  fclose(f);
}

/* Another world size with the same global batch: stopped at step 3 on
 * every rank, resumed by rank 0 alone (row-wise shards become whole
 * tables); stopped at 3 by rank 0 alone under the planner, resumed on every
 * rank. Both continue as the uninterrupted run within rounding. */
static void resize(void) {
  begin_case("resume on another world size, %d ranks", g_size);
  char d1[300], d2[300], d3[300];
  subdir(d1, sizeof d1, "shrink");
  subdir(d3, sizeof d3, "shrink_cw");
  subdir(d2, sizeof d2, "grow");
  gs_dlrm_train_config c = base_config(d1, GS_SHARD_RW, 0);
  c.stop_at_step = 3;
  record r = {0};
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &r), GS_OK, "stopping at step 3");
  char plan_p[400], plan_1[400];
  if (snprintf(plan_p, sizeof plan_p, "%s/cw_plan.json", g_root) >= (int)sizeof plan_p ||
      snprintf(plan_1, sizeof plan_1, "%s/cw_plan_1.json", g_root) >= (int)sizeof plan_1)
    fail("path too long");
  if (g_rank == 0) {
    write_cw_plan(plan_p, g_size);
    write_cw_plan(plan_1, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  gs_dlrm_train_config cw = base_config(d3, -1, 1);
  cw.plan_file = plan_p;
  cw.stop_at_step = 3;
  check_all(gs_dlrm_train_run(&cw, g_comm, on_event, &r), GS_OK, "column blocks at step 3");
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm solo;
  gs_comm *one = NULL;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank == 0 ? 0 : MPI_UNDEFINED, 0, &solo);
  if (g_rank == 0) {
    CHECK_ST(gs_comm_create(solo, &one), GS_OK);
    c.stop_at_step = 0;
    c.resume = GS_DLRM_RESUME;
    c.batch = 12 * (size_t)g_size;
    record s = {0};
    s.look_at = 4; /* the epoch's end: a commit in the background */
    s.look_dir = d1;
    if (one) CHECK_ST(gs_dlrm_train_run(&c, one, on_event, &s), GS_OK);
    CHECK(s.resumed_at == 3, "resumed at %d, expected 3", s.resumed_at);
    /* Its writer left the larger world's files of the commit in place
     * until then (step 3's), which rank 0 alone removes the rest of. */
    CHECK(s.look_r0 == 2 && s.look_r1 == 1, "when the commit at step 4 was put in place: %d "
          "files of rank 0 (expected 2: steps 3 and 4) and %d of rank 1 (expected 1: step 3's)",
          s.look_r0, s.look_r1);
    close_to_whole(&s, "shrunk to 1 rank");
    char f[400];
    CHECK(rank_files(d1, 0, f, sizeof f) == 1 && rank_files(d1, 1, f, sizeof f) == 0,
          "the larger world's files are left in %s", d1);
    /* Column blocks (SGD: cw is the one-process model) reassembled into
     * whole rows. */
    c = base_config(d3, -1, 1);
    c.plan_file = plan_1;
    c.resume = GS_DLRM_RESUME;
    c.batch = 12 * (size_t)g_size;
    record w = {0};
    if (one) CHECK_ST(gs_dlrm_train_run(&c, one, on_event, &w), GS_OK);
    CHECK(w.resumed_at == 3, "column blocks: resumed at %d, expected 3", w.resumed_at);
    close_to(&w, &g_whole_sgd, "column blocks shrunk to 1 rank");
    /* Rank 0 alone under the planner, stopped at 3. */
    gs_dlrm_train_config g = base_config(d2, -1, 0);
    g.batch = 12 * (size_t)g_size;
    g.stop_at_step = 3;
    record q = {0};
    if (one) CHECK_ST(gs_dlrm_train_run(&g, one, on_event, &q), GS_OK);
    if (one) gs_comm_destroy(one);
    MPI_Comm_free(&solo);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  gs_dlrm_train_config g = base_config(d2, -1, 0);
  g.resume = GS_DLRM_RESUME;
  record s = {0};
  check_all(gs_dlrm_train_run(&g, g_comm, on_event, &s), GS_OK, "grown from 1 rank");
  CHECK(s.resumed_at == 3, "resumed at %d, expected 3", s.resumed_at);
  close_to_whole(&s, "grown from 1 rank");
  end_case();
}

/* A stop asked on the last rank alone (as SIGUSR1 does) after step 1: every
 * rank stops at the next commit point (step 2), and the resume continues
 * bitwise as the uninterrupted run. */
/* Another global batch: resumed at the same sample, in this run's steps.
 * With learning rates of 0 the model is its first one throughout, so a
 * step's loss is a function of its samples alone: the resumed run's steps
 * must be, bitwise, the steps of a run at the new global batch that was
 * never stopped (the same world size, and 1 rank re-sharded from all),
 * and its epoch's mean loss the same within the steps' float rounding (the
 * steps before the commit, means over the old global batch, counted in
 * the new one's: counted as one step each, it would be 3/8 off). A
 * commit that is not at a step of the new global batch is refused, naming
 * the batches that would do. */
static void regroup(void) {
  begin_case("resume with another global batch, %d ranks", g_size);
  char d1[300], d2[300];
  subdir(d1, sizeof d1, "regroup");
  subdir(d2, sizeof d2, "regroup_ref");
  gs_dlrm_train_config c = base_config(d1, GS_SHARD_RW, 0);
  c.optim.mlp_lr = 0;
  c.optim.embed.lr = 0;
  c.stop_at_step = 3; /* 36 x ranks samples into the first epoch */
  record r = {0};
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &r), GS_OK, "stopping at step 3");
  char copy[340], cmd[800];
  if (snprintf(copy, sizeof copy, "%s.orig", d1) >= (int)sizeof copy) fail("path too long");
  if (g_rank == 0) {
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", d1, copy);
    CHECK(system(cmd) == 0, "%s failed", cmd);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* Half the batch, twice the steps: step 3 of 4 is step 6 of 8. */
  gs_dlrm_train_config h = c;
  h.stop_at_step = 0;
  h.resume = GS_DLRM_RESUME;
  h.batch = 6;
  h.steps = 2 * STEPS;
  record s = {0};
  check_all(gs_dlrm_train_run(&h, g_comm, on_event, &s), GS_OK, "resumed at half the batch");
  gs_dlrm_train_config u = h;
  u.checkpoint_dir = d2;
  u.resume = 0;
  record w = {0};
  check_all(gs_dlrm_train_run(&u, g_comm, on_event, &w), GS_OK, "the half batch's run");
  CHECK(s.resumed_at == 6, "resumed at step %d, expected 6 (of 8)", s.resumed_at);
  for (int g = 7; g <= 2 * MAXSTEPS; g++)
    CHECK(s.have[g] && memcmp(&s.loss[g], &w.loss[g], sizeof(double)) == 0,
          "half the batch: step %d's loss %.17g, never stopped %.17g", g, s.loss[g], w.loss[g]);
  for (int e = 1; e <= EPOCHS; e++)
    CHECK(fabs(s.epoch_loss[e] - w.epoch_loss[e]) <= 1e-6 * w.epoch_loss[e],
          "half the batch: epoch %d's loss %.17g, never stopped %.17g", e, s.epoch_loss[e],
          w.epoch_loss[e]);

  /* A step of twice the batch would start 1.5 steps in: refused. */
  gs_dlrm_train_config b = h;
  b.checkpoint_dir = copy;
  b.batch = 24;
  b.steps = STEPS / 2;
  char hint[256];
  snprintf(hint, sizeof hint, "which is not at a step of this run's global batch %d (%d ranks "
           "x 24): resume with a global batch that divides %d and the epoch's %d samples (on "
           "%d ranks: --batch 12 --steps 4, --batch 6 --steps 8, --batch 4 --steps 12)",
           24 * g_size, g_size, 36 * g_size, 48 * g_size, g_size);
  refused(&b, GS_ERR_INVALID_ARG, -1, hint, "a commit between two steps of twice the batch");

  /* Rank 0 alone, the same batch per rank: ranks x 4 steps of 12, from
   * every rank's file. */
  MPI_Comm solo;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank == 0 ? 0 : MPI_UNDEFINED, 0, &solo);
  if (g_rank == 0) {
    gs_comm *one = NULL;
    CHECK_ST(gs_comm_create(solo, &one), GS_OK);
    gs_dlrm_train_config o = c;
    o.checkpoint_dir = copy;
    o.stop_at_step = 0;
    o.resume = GS_DLRM_RESUME;
    o.steps = STEPS * (size_t)g_size;
    record q = {0}, v = {0};
    if (one) CHECK_ST(gs_dlrm_train_run(&o, one, on_event, &q), GS_OK);
    char d3[300];
    subdir(d3, sizeof d3, "regroup_ref1");
    o.checkpoint_dir = d3;
    o.resume = 0;
    if (one) CHECK_ST(gs_dlrm_train_run(&o, one, on_event, &v), GS_OK);
    CHECK(q.resumed_at == 3 * g_size, "1 rank: resumed at step %d, expected %d", q.resumed_at,
          3 * g_size);
    int last = 2 * STEPS * g_size < RECSTEPS ? 2 * STEPS * g_size : RECSTEPS;
    for (int g = 3 * g_size + 1; g <= last; g++)
      CHECK(q.have[g] && memcmp(&q.loss[g], &v.loss[g], sizeof(double)) == 0,
            "1 rank: step %d's loss %.17g, never stopped %.17g", g, q.loss[g], v.loss[g]);
    CHECK(fabs(q.epoch_loss[1] - v.epoch_loss[1]) <= 1e-6 * v.epoch_loss[1],
          "1 rank: the first epoch's loss %.17g, never stopped %.17g", q.epoch_loss[1],
          v.epoch_loss[1]);
    if (one) gs_comm_destroy(one);
    MPI_Comm_free(&solo);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  end_case();
}

static void asked_stop(void) {
  begin_case("a stop asked on one rank, %d ranks", g_size);
  char dir[300];
  subdir(dir, sizeof dir, "asked");
  gs_dlrm_train_config c = base_config(dir, GS_SHARD_RW, 0);
  c.commit_every = 2;
  record r = {0};
  if (g_rank == g_size - 1) r.ask_at = 1;
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &r), GS_OK, "asked to stop");
  CHECK(r.stopped == 2 && r.commits == 1 && r.have[2] && !r.have[3],
        "stopped %d after %d commits, steps 2 and 3 %d %d (expected a stop as asked at 2)",
        r.stopped, r.commits, r.have[2], r.have[3]);
  c.resume = GS_DLRM_RESUME;
  record s = {0};
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &s), GS_OK, "resumed after the stop");
  CHECK(s.resumed_at == 2 && s.stopped == 0 && s.epochs_seen == EPOCHS,
        "resumed at %d, stopped %d, %d epochs", s.resumed_at, s.stopped, s.epochs_seen);
  for (int g = 3; g <= MAXSTEPS; g++)
    CHECK(memcmp(&s.loss[g], &g_whole_rw.loss[g], sizeof(double)) == 0,
          "step %d's loss: %.17g resumed, %.17g uninterrupted", g, s.loss[g],
          g_whole_rw.loss[g]);
  end_case();
}

/* The lookup cost given: carried by the events, pricing the predictions
 * (linear in the cost without a cache model: twice the cost, twice the
 * times); refused on every rank, naming the figure, when a figure is
 * negative or NaN on every rank or on one; refused when one rank is given
 * another cost or none (that rank alone measures one), naming it. */
static void given_lookup(void) {
  begin_case("a given lookup cost, %d ranks", g_size);
  int last = g_size - 1;
  gs_dlrm_train_config c = base_config(NULL, -1, 0);
  c.epochs = 1;
  c.steps = 2;
  c.eval_samples = 0;
  gs_cost_lookup lk = test_lookup(), twice = lk;
  twice.alpha *= 2;
  twice.beta *= 2;
  record r1 = {0}, r2 = {0};
  c.lookup = &lk;
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &r1), GS_OK, "given a lookup cost");
  CHECK(r1.lookup_seen && memcmp(&r1.lookup, &lk, sizeof lk) == 0,
        "the plan's event carries alpha %g, beta %g, not the given %g, %g", r1.lookup.alpha,
        r1.lookup.beta, lk.alpha, lk.beta);
  c.lookup = &twice;
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &r2), GS_OK, "given twice the cost");
  CHECK(r1.pred_ms > 0 && fabs(r2.pred_ms - 2 * r1.pred_ms) <= 1e-9 * r2.pred_ms,
        "predicted lookup ms a step: %.17g at the cost, %.17g at twice it (expected twice)",
        r1.pred_ms, r2.pred_ms);

  gs_cost_lookup bad = lk;
  bad.beta = -1e-10;
  c.lookup = &bad;
  refused(&c, GS_ERR_INVALID_ARG, -1, "lookup cost: beta (s per byte of row) is -1e-10",
          "a negative beta on every rank");
  CHECK(strstr(gs_last_error(), "gs_dlrm_train_config's lookup") != NULL,
        "the message '%s' does not name the config's lookup", gs_last_error());
  bad = lk;
  if (g_rank == last) bad.gamma = NAN;
  refused(&c, GS_ERR_INVALID_ARG, last, "gamma (s per bag) is nan", "a NaN gamma on one rank");
  bad = lk;
  if (g_rank == last) bad.alpha = 41e-9;
  char who[64];
  snprintf(who, sizeof who, "rank %d was given another than rank 0's", last);
  refused(&c, GS_ERR_INVALID_ARG, -1, who, "another cost on one rank");
  c.lookup = g_rank == last ? NULL : &lk;
  snprintf(who, sizeof who, "given to rank 0 and not to rank %d", last);
  refused(&c, GS_ERR_INVALID_ARG, -1, who, "no cost on one rank");
  end_case();
}

/* rank 0 copies r->dir to r->copy, every rank waiting (called at a commit
 * event, on every rank: no writer is running then). */
static void look(record *r) {
  /* Every rank at this event before any looks, and none on to the next
   * commit (whose writer adds a file) until all have: without the
   * barriers rank 0 could be writing step 8's file while a slow rank
   * looked at step 6's (seen once under ASan, 2026-12-06). */
  if (r->look_world) MPI_Barrier(MPI_COMM_WORLD);
  char f[400];
  r->look_r0 = rank_files(r->look_dir, 0, f, sizeof f);
  r->look_r1 = rank_files(r->look_dir, 1, f, sizeof f);
  r->look_junk = 0;
  DIR *d = opendir(r->look_dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) r->look_junk += strstr(e->d_name, "deadbeef") != NULL;
  if (d) closedir(d);
  if (r->look_world) MPI_Barrier(MPI_COMM_WORLD);
}

/* What a crash during a commit leaves in dir: files of an unpublished
 * step and temporary files (rank 0 also a plan and a manifest's). */
static void plant_junk(const char *dir) {
  const char *junk[] = {"dlrm-00000000deadbeef-step9.rank%d.gsck",
                        "dlrm-00000000deadbeef-step9.rank%d.gsck.tmp.Xa1b2c",
                        "dlrm-00000000deadbeef-step9.plan.json", "dlrm.json.tmp.deadbeef"};
  MPI_Barrier(MPI_COMM_WORLD);
  for (int j = 0; j < 4; j++) {
    char name[128], path[500];
    if (j >= 2 && g_rank != 0) break;
    snprintf(name, sizeof name, junk[j], g_rank);
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) fail("path");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
      fputs("half a commit", f);
      fclose(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static void copy_dir(const record *r) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    char cmd[800];
    CHECK(snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", r->dir, r->copy) < (int)sizeof cmd &&
              system(cmd) == 0,
          "cannot copy %s", r->dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* The last rank makes a directory where the commit at r->block_step would
 * put its file (the run's id from the manifest in place), so that the
 * writer's rename fails there alone. */
static void block_next(const record *r) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == g_size - 1) {
    char path[600], id[32] = "";
    snprintf(path, sizeof path, "%s/dlrm.json", r->dir);
    size_t n = 0;
    unsigned char *m = slurp(path, &n);
    const char *k = m ? strstr((const char *)m, "\"run_id\"") : NULL;
    CHECK(k != NULL && sscanf(k, "\"run_id\":%*[ \t]\"%16[0-9a-f]\"", id) == 1,
          "no run_id in %s", path);
    free(m);
    snprintf(path, sizeof path, "%s/dlrm-%s-step%d.rank%d.gsck", r->dir, id, r->block_step,
             g_rank);
    CHECK(mkdir(path, 0700) == 0, "cannot make %s", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Commits in the background (the default): commits every 2 steps, those
 * the run goes on after put in place later (after their step, their
 * writer's time measured), the last in the foreground; the training is the
 * uninterrupted run's, bitwise. A copy of the directory taken when a
 * background commit is put in place resumes bitwise as the uninterrupted
 * run. A writer that fails on the last rank alone (its rename blocked)
 * fails every rank where that commit is put in place, naming the rank,
 * and leaves the commit before it, from which the run resumes bitwise. */
static void background(void) {
  begin_case("commits in the background, %d ranks", g_size);
  char dir[300], copy[300], dir2[300];
  subdir(dir, sizeof dir, "bg");
  subdir(copy, sizeof copy, "bg_copy");
  subdir(dir2, sizeof dir2, "bg_fail");
  gs_dlrm_train_config c = base_config(dir, GS_SHARD_RW, 0);
  c.commit_every = 2;
  /* a timeline: the writer thread records on it beside the steps */
  char tl[320], tl_rank[340];
  subdir(tl, sizeof tl, "bg_timeline.json");
  c.timeline = tl;
  record r = {0};
  r.copy_at = 4;
  r.dir = dir;
  r.copy = copy;
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &r), GS_OK, "commits in the background");
  CHECK(r.commits == 4, "%d commit events, expected 4 (steps 2, 4, 6, 8)", r.commits);
  snprintf(tl_rank, sizeof tl_rank, "%.*s.rank%d.json", (int)strlen(tl) - 5, tl, g_rank);
  size_t tn = 0;
  unsigned char *tt = slurp(tl_rank, &tn);
  CHECK(tt != NULL && strstr((const char *)tt, "\"commit 2 written\"") != NULL &&
            strstr((const char *)tt, "\"checkpoint writer\"") != NULL,
        "%s: no writer's span of the commit at step 2", tl_rank);
  free(tt);
  c.timeline = NULL;
  for (int k = 0; k < 4 && k < r.commits; k++) {
    size_t want = 2 * (size_t)(k + 1);
    int last = k == 3;
    CHECK(r.commit_step[k] == want, "commit event %d is step %zu's, expected %zu", k,
          r.commit_step[k], want);
    CHECK(last ? r.published[k] == want && r.write_s[k] == 0
               : r.published[k] > want && r.published[k] <= want + 2 && r.write_s[k] > 0,
          "the commit at step %zu: put in place after step %zu, its writer %.6f s (expected %s)",
          want, r.published[k], r.write_s[k],
          last ? "the run's last: at once, in the foreground"
               : "later, within the next commit point, in the background");
  }
  for (int g = 1; g <= MAXSTEPS; g++)
    CHECK(memcmp(&r.loss[g], &g_whole_rw.loss[g], sizeof(double)) == 0,
          "step %d's loss with background commits: %.17g, uninterrupted %.17g", g, r.loss[g],
          g_whole_rw.loss[g]);

  /* With a crash's leftovers beside it: the first background commit's
   * writer removes them (until 2026-12-06 the second's), and keeps the
   * resumed commit's files, which the manifest names until its own is in
   * place. */
  plant_junk(copy);
  gs_dlrm_train_config cc = base_config(copy, GS_SHARD_RW, 0);
  cc.resume = GS_DLRM_RESUME;
  cc.commit_every = 2;
  record s = {0};
  s.look_at = 6;
  s.look_dir = copy;
  s.look_world = 1;
  check_all(gs_dlrm_train_run(&cc, g_comm, on_event, &s), GS_OK,
            "resumed from the copy taken when step 4's commit was put in place");
  CHECK(s.resumed_at == 4, "the copy resumed at %d, expected 4", s.resumed_at);
  CHECK(s.look_junk == 0 && s.look_r0 == 2 && s.look_r1 == 2,
        "when the commit at step 6 (the first after the resume) was put in place: %d of a "
        "crash's leftovers (expected 0), %d and %d files of ranks 0 and 1 (expected 2 each: "
        "steps 4 and 6)", s.look_junk, s.look_r0, s.look_r1);
  for (int g = 5; g <= MAXSTEPS; g++)
    CHECK(memcmp(&s.loss[g], &g_whole_rw.loss[g], sizeof(double)) == 0,
          "step %d's loss resumed from the copy: %.17g, uninterrupted %.17g", g, s.loss[g],
          g_whole_rw.loss[g]);

  c = base_config(dir2, GS_SHARD_RW, 0);
  c.commit_every = 2;
  record f = {0};
  f.block_at = 2;
  f.block_step = 4;
  f.dir = dir2;
  gs_status st = gs_dlrm_train_run(&c, g_comm, on_event, &f);
  check_all(st, GS_ERR_IO, "a background writer failing on the last rank");
  char who[32];
  snprintf(who, sizeof who, "rank %d", g_size - 1);
  if (st != GS_OK)
    CHECK(strstr(gs_last_error(), "commit at step 4, written in the background") != NULL &&
              (g_rank == g_size - 1 ? strstr(gs_last_error(), "rename") != NULL
                                    : strstr(gs_last_error(), who) != NULL),
          "the message '%s' does not name the background commit at step 4 and %s",
          gs_last_error(), g_rank == g_size - 1 ? "its rename" : who);
  CHECK(f.commits == 1 && f.epochs_seen <= 2, "%d commits put in place before the failure "
        "(expected 1, step 2's)", f.commits);
  c.resume = GS_DLRM_RESUME;
  record g2 = {0};
  check_all(gs_dlrm_train_run(&c, g_comm, on_event, &g2), GS_OK,
            "resumed after the failed background commit");
  CHECK(g2.resumed_at == 2, "resumed at %d after the failure, expected 2", g2.resumed_at);
  for (int g = 3; g <= MAXSTEPS; g++)
    CHECK(memcmp(&g2.loss[g], &g_whole_rw.loss[g], sizeof(double)) == 0,
          "step %d's loss resumed after the failure: %.17g, uninterrupted %.17g", g,
          g2.loss[g], g_whole_rw.loss[g]);
  end_case();
}

int main(int argc, char **argv) {
  mrt_init(&argc, &argv);
  make_root();
  /* "background": that case alone (ThreadSanitizer's), after the run it
   * compares with */
  int only_bg = argc > 1 && strcmp(argv[1], "background") == 0;
  exact_resume("rw", GS_SHARD_RW, 0, 0);
  if (only_bg) {
    background();
    goto done;
  }
  exact_resume("auto", -1, 0, 1);
  exact_resume("tw_sgd", GS_SHARD_TW, 1, 0);
  refusals();
  resize();
  regroup();
  asked_stop();
  background();
  given_lookup();
done:
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0 && g_fail == 0) {
    char cmd[300];
    if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root) >= (int)sizeof cmd || system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_root);
  }
  return mrt_finish();
}
