/* What run a checkpoint belongs to, so that --resume can refuse one that
 * does not fit the run and say what differs.
 *
 * Beside DIR/checkpoint.gsck, rank 0 writes DIR/checkpoint.json after every
 * save (atomically: a temporary file, fsync, rename): the model and its
 * parameter count, the batch per rank, the rank count, the data set (its
 * source, size, shape and a CRC-32 of the decoded samples), the seed, the
 * epochs and learning-rate schedule, the sync mode and the optimizer, and a
 * hash (FNV-1a) of the checkpoint file it describes. A resumed run checks each
 * against its own; a description of another checkpoint is refused too.
 *
 * A save is three steps, so that a kill at any point leaves a checkpoint
 * that resumes: the new checkpoint is written to checkpoint.gsck.next; the
 * description of it, carrying the previous description as "previous", is
 * renamed into place; then checkpoint.gsck.next is renamed over
 * checkpoint.gsck. Cut between the last two, the old checkpoint is still in
 * place and matches "previous". */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "gs_internal.h"
#include "train_internal.h"

/* Descriptions are small; a larger file is not one. */
enum { META_MAX_BYTES = 1 << 16 };

void train_meta_path(const gs_train_config *c, char *buf, size_t n) {
  snprintf(buf, n, "%s/checkpoint.json", c->checkpoint_dir);
}

void train_data_identify(const gs_train_config *c, const gs_nn_dataset *ds,
                         const uint32_t *known_crc, train_data_id *id) {
  memset(id, 0, sizeof *id);
  if (c->synthetic > 0) snprintf(id->source, sizeof id->source, "synthetic %ld", c->synthetic);
  else
    snprintf(id->source, sizeof id->source, "%s",
             c->data_dir ? c->data_dir
             : getenv("GRADSYNC_FASHION_MNIST_DIR") ? getenv("GRADSYNC_FASHION_MNIST_DIR")
                                                    : GS_NN_FASHION_MNIST_DIR);
  id->samples = ds->n;
  snprintf(id->shape, sizeof id->shape, "%dx%dx%d", ds->c, ds->h, ds->w);
  id->classes = ds->classes;
  if (known_crc) {
    id->crc32 = *known_crc;
    return;
  }
  /* zlib's crc32 takes at most 4 GiB a call. */
  uLong crc = crc32(0L, Z_NULL, 0);
  const unsigned char *p = (const unsigned char *)ds->images;
  size_t left = ds->n * (size_t)ds->c * ds->h * ds->w * sizeof(float);
  while (left > 0) {
    uInt n = left > (1u << 30) ? (1u << 30) : (uInt)left;
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  crc = crc32(crc, (const unsigned char *)ds->labels, (uInt)(ds->n * sizeof(int32_t)));
  id->crc32 = (uint32_t)crc;
}

/* The FNV-1a 64-bit hash of a whole file, as text. (Not a CRC: a
 * checkpoint ends with the CRC-32 of what precedes it, which makes any
 * CRC-32 of the whole file, salted or not, depend on its length alone.) */
static gs_status file_hash(const char *path, char *out, size_t n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return gs_error(GS_ERR_IO, "%s: %s", path, strerror(errno));
  uint64_t h = GS_FNV1A_BASIS;
  unsigned char buf[1 << 16];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) h = gs_fnv1a(h, buf, k);
  int err = ferror(f);
  fclose(f);
  if (err) return gs_error(GS_ERR_IO, "%s: read failed", path);
  snprintf(out, n, "fnv1a64:%016llx", (unsigned long long)h);
  return GS_OK;
}

/* The run's K-FAC settings: its own, or the defaults. */
static gs_train_kfac_options kfac_of(const gs_train_config *c) {
  gs_train_kfac_options k;
  gs_train_kfac_options_init(&k);
  return c->kfac ? *c->kfac : k;
}

/* K-FAC's distribution scheme of a K-FAC run, NULL for another optimizer. */
static const char *kfac_dist(const gs_train_config *c) {
  if (c->optimizer == NULL || strcmp(c->optimizer, "kfac") != 0) return NULL;
  return gs_kfac_dist_name(kfac_of(c).dist);
}

/* The settings a resume may change, told in a note when it does: the
 * optimizer's, K-FAC's, the asynchronous pushes' and the sync mode's own
 * (a Sync-Switch share, an SSP bound; the mode itself must match). */
static const char *const hyper[] = {"lr", "momentum", "weight_decay", "dropout",
                                    "kfac_cov_every", "kfac_inv_every", "kfac_damping",
                                    "kfac_decay", "kfac_kl_clip", "async_lr_scale",
                                    "async_momentum"};
enum { NHYPER = sizeof hyper / sizeof hyper[0] };
/* Two named ones: the keys in the description and the fields they name. */
static const char *const hyper_text[][2] = {{"kfac_inverse", "kfac_inverse"},
                                            {"sync_spec", "sync"}};
enum { NHYPER_TEXT = sizeof hyper_text / sizeof hyper_text[0] };

static double hyper_value(const gs_train_config *c, size_t i) {
  const gs_train_kfac_options k = kfac_of(c);
  const float v[NHYPER] = {c->lr,       c->momentum,         c->weight_decay,
                           c->dropout,  (float)k.cov_every,  (float)k.inv_every,
                           k.damping,   k.decay,             k.kl_clip,
                           c->async_lr_scale, c->async_momentum};
  return v[i];
}

static const char *hyper_text_value(const gs_train_config *c, size_t i) {
  return i == 0 ? gs_kfac_inverse_name(kfac_of(c).inverse) : c->sync ? c->sync : "";
}

/* "--lr 0.05 -> 0.01, --sync switch:offline:0.5 -> switch:offline:0.25":
 * what this run changes of the checkpoint's; "" when nothing (or the
 * checkpoint predates recording it). */
static void resume_changes(const cJSON *m, const gs_train_config *c, char *out, size_t n) {
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < NHYPER + NHYPER_TEXT && len < n; i++) {
    int k = 0;
    if (i < NHYPER) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, hyper[i]);
      const double mine = hyper_value(c, i);
      /* Floats: the JSON's 15 digits may not give back the same double. */
      if (!cJSON_IsNumber(v) || (float)v->valuedouble == (float)mine) continue;
      k = snprintf(out + len, n - len, "%s%s %g -> %g", len ? ", " : "",
                   train_option(c, hyper[i]), v->valuedouble, mine);
    } else {
      const size_t t = i - NHYPER;
      const char *was = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, hyper_text[t][0]));
      const char *mine = hyper_text_value(c, t);
      if (was == NULL || strcmp(was, mine) == 0) continue;
      k = snprintf(out + len, n - len, "%s%s %s -> %s", len ? ", " : "",
                   train_option(c, hyper_text[t][1]), was, mine);
    }
    if (k > 0) len += (size_t)k;
  }
}

static cJSON *describe_run(const train_ctx *t, const train_data_id *data, long epoch) {
  const gs_train_config *c = t->cfg;
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "format", 1);
  cJSON_AddNumberToObject(m, "epoch", (double)epoch);
  /* Inside an unfinished epoch (a commit): the samples of its permutation
   * done, whatever world sizes did them. */
  cJSON_AddNumberToObject(m, "samples_in_epoch", (double)t->save_samples_in_epoch);
  cJSON_AddStringToObject(m, "model", gs_nn_model_name(c->model));
  cJSON_AddNumberToObject(m, "parameters", (double)gs_nn_param_total(t->net));
  cJSON_AddNumberToObject(m, "tensors", (double)t->nparams);
  cJSON_AddNumberToObject(m, "batch", t->batch);
  /* The job's ranks (servers included), as a resumed run counts them at
   * set-up, before a sync mode narrows its communicator to the workers. */
  cJSON_AddNumberToObject(m, "ranks", t->ranks->size);
  cJSON_AddNumberToObject(m, "global_batch", (double)t->batch * t->size);
  cJSON_AddNumberToObject(m, "base_ranks", t->base_ranks);
  cJSON *d = cJSON_AddObjectToObject(m, "data");
  cJSON_AddStringToObject(d, "source", data->source);
  cJSON_AddNumberToObject(d, "samples", (double)data->samples);
  cJSON_AddStringToObject(d, "shape", data->shape);
  cJSON_AddNumberToObject(d, "classes", data->classes);
  cJSON_AddNumberToObject(d, "crc32", data->crc32);
  cJSON_AddNumberToObject(m, "seed", (double)c->seed);
  cJSON_AddNumberToObject(m, "epochs", c->epochs);
  /* An epoch's length when --max-steps cuts it (0: the whole set). */
  cJSON_AddNumberToObject(m, "max_steps", (double)(c->max_steps > 0 ? c->max_steps : 0));
  cJSON_AddStringToObject(m, "schedule", c->schedule);
  /* The optimizer's settings: a resume may change them (a lower rate to
   * fine-tune), and is told what changed (resume_changes). */
  for (size_t i = 0; i < NHYPER; i++) cJSON_AddNumberToObject(m, hyper[i], hyper_value(c, i));
  for (size_t i = 0; i < NHYPER_TEXT; i++)
    cJSON_AddStringToObject(m, hyper_text[i][0], hyper_text_value(c, i));
  cJSON_AddNumberToObject(m, "warmup_epochs", c->warmup_epochs);
  cJSON_AddStringToObject(m, "sync", t->sync.ops ? t->sync.ops->name : c->sync);
  cJSON_AddStringToObject(m, "optimizer", t->optim.ops ? t->optim.ops->name : c->optimizer);
  const char *dist = kfac_dist(c);
  if (dist) cJSON_AddStringToObject(m, "kfac_dist", dist);
  /* The sync mode's per-rank files beside the checkpoint (the compressor
   * memory): the world size that wrote them, 0 for none. */
  cJSON_AddNumberToObject(m, "sync_rank_files", t->sync_files);
  return m;
}

static gs_status read_meta(const char *path, cJSON **out);

struct cJSON *train_meta_describe(const train_ctx *t, const train_data_id *data, long epoch) {
  return describe_run(t, data, epoch);
}

gs_status train_meta_save(const train_ctx *t, const char *ckpt_path, const train_data_id *data,
                          long epoch) {
  char path[4200];
  train_meta_path(t->cfg, path, sizeof path);
  cJSON *m = describe_run(t, data, epoch);
  if (m == NULL) return gs_error(GS_ERR_NOMEM, "out of memory for %s", path);
  return train_meta_write(path, m, ckpt_path);
}

gs_status train_meta_write(const char *path, struct cJSON *m, const char *ckpt_path) {
  char hash[64];
  gs_status st = file_hash(ckpt_path, hash, sizeof hash);
  if (st != GS_OK) {
    cJSON_Delete(m);
    return st;
  }
  cJSON_AddStringToObject(m, "checkpoint_hash", hash);
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  /* The description now in place, if any, stays as "previous" (its own
   * previous dropped): it describes the checkpoint this save replaces. */
  cJSON *old = NULL;
  if (access(path, F_OK) == 0 && read_meta(path, &old) == GS_OK) {
    cJSON_DeleteItemFromObjectCaseSensitive(old, "previous");
    cJSON_AddItemToObject(m, "previous", old);
  }
  char *text = cJSON_PrintUnformatted(m);
  cJSON_Delete(m);
  if (text == NULL) return gs_error(GS_ERR_NOMEM, "out of memory for %s", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t len = strlen(text);
  int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1 &&
           fsync(fd) == 0;
  int err = errno;
  cJSON_free(text);
  if (fd >= 0 && close(fd) != 0 && ok) {
    ok = 0;
    err = errno;
  }
  if (!ok || rename(tmp, path) != 0) {
    if (ok) err = errno;
    unlink(tmp);
    return gs_error(GS_ERR_IO, "%s: cannot write the checkpoint's description: %s", path,
                    strerror(err));
  }
  return GS_OK;
}

void train_profile_save(train_ctx *t) {
  gs_profile *p = NULL;
  if (t->profile_saved || t->cfg->checkpoint_dir == NULL) return;
  /* The engine's profile, or the sync mode's own where there is no engine
   * (a parameter-server worker's: t->size counts the workers; one rank's
   * alone, sync_engine.c's solo). */
  if (t->engine != NULL) {
    if (gs_engine_get_profile(t->engine, &p) != GS_OK) p = NULL;
  } else if (t->sync.ops != NULL && t->sync.ops->profile != NULL) {
    if (t->sync.ops->profile(t->sync.self, &p) != GS_OK) p = NULL;
  }
  if (p == NULL) return;
  char source[160], name[64], *own = p->source, *own_name = p->name;
  const int servers = t->engine == NULL && t->sync.ops != NULL && t->sync.ops->servers;
  snprintf(source, sizeof source, "gradsync train's %s, rank 0 of %d%s, %d samples a rank",
           t->engine    ? "engine profiler"
           : servers    ? "parameter-server worker"
                        : "step timer (one rank, no engine)",
           t->size, servers ? " workers" : "", t->batch);
  snprintf(name, sizeof name, "%s", gs_nn_model_name(t->cfg->model));
  p->batch_size = t->batch;
  p->source = source;
  p->name = name;
  char *text = gs_profile_to_json(p);
  p->source = own;
  p->name = own_name;
  gs_profile_free(p);
  if (text == NULL) return;
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/profile.json", t->cfg->checkpoint_dir);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  int ok = f != NULL && fputs(text, f) >= 0;
  if (f != NULL && fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
  else t->profile_saved = 1;
  gs_free(text);
}

/* Reads and parses path (at most META_MAX_BYTES). */
static gs_status read_meta(const char *path, cJSON **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return gs_error(GS_ERR_IO,
                    "%s: %s: without it resuming cannot check that the checkpoint fits "
                    "this run (it is written with every checkpoint)", path, strerror(errno));
  char *buf = gs_malloc(META_MAX_BYTES + 1);
  if (buf == NULL) {
    fclose(f);
    return gs_error(GS_ERR_NOMEM, "out of memory reading %s", path);
  }
  size_t n = fread(buf, 1, META_MAX_BYTES + 1, f);
  fclose(f);
  if (n > META_MAX_BYTES) {
    gs_free(buf);
    return gs_error(GS_ERR_PARSE, "%s: larger than %d bytes: not a checkpoint description",
                    path, META_MAX_BYTES);
  }
  buf[n] = '\0';
  *out = cJSON_Parse(buf);
  gs_free(buf);
  if (*out == NULL || !cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
    return gs_error(GS_ERR_PARSE, "%s: not a valid checkpoint description (JSON object)", path);
  }
  return GS_OK;
}

/* Compares one number or string; fills why on a difference. */
static int differs_num(const cJSON *m, const char *key, double mine, char *why, size_t n,
                       const char *what) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
  if (!cJSON_IsNumber(v)) {
    snprintf(why, n, "it does not record %s", what);
    return 1;
  }
  if (v->valuedouble != mine) {
    snprintf(why, n, "%s: the checkpoint's run had %.17g, this run has %.17g", what,
             v->valuedouble, mine);
    return 1;
  }
  return 0;
}

static int differs_str(const cJSON *m, const char *key, const char *mine, char *why, size_t n,
                       const char *what) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
  if (!cJSON_IsString(v)) {
    snprintf(why, n, "it does not record %s", what);
    return 1;
  }
  if (strcmp(v->valuestring, mine) != 0) {
    snprintf(why, n, "%s: the checkpoint's run had '%s', this run has '%s'", what,
             v->valuestring, mine);
    return 1;
  }
  return 0;
}

/* The workers of the checkpoint's run against this run's: what fixes the
 * global batch and each worker's data. Parameter servers are left out: a
 * run resumed with another server count (the same workers) continues as
 * the servers' shards are cut afresh (gs_ps_worker_resume); until
 * 2026-12-01 it was refused as "the rank count". The checkpoint's workers
 * are its global batch over its per-rank batch; "ranks" where it lacks
 * them. */
static int differs_workers(const cJSON *m, const train_ctx *t, char *why, size_t n) {
  const gs_train_config *c = t->cfg;
  int servers = c->ps_servers > 0 ? c->ps_servers : 0;
  const cJSON *gb = cJSON_GetObjectItemCaseSensitive(m, "global_batch");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(m, "batch");
  const char *what = servers == 0
      ? "the rank count (the global batch and each rank's data would change; a run with a "
        "global batch or linear learning-rate scaling may change it)"
      : "the worker count (ranks less --ps servers: the global batch and each worker's data "
        "would change; a run with a global batch or linear learning-rate scaling may change "
        "it)";
  if (!cJSON_IsNumber(gb) || !cJSON_IsNumber(b) || b->valuedouble < 1)
    return differs_num(m, "ranks", t->size, why, n, what);
  double theirs = gb->valuedouble / b->valuedouble, mine = t->size - servers;
  if (theirs != mine) {
    snprintf(why, n, "%s: the checkpoint's run had %.17g, this run has %.17g", what, theirs,
             mine);
    return 1;
  }
  return 0;
}

gs_status train_meta_check_model(const train_ctx *t) {
  const gs_train_config *c = t->cfg;
  char path[4200], why[1024] = "";
  train_meta_path(c, path, sizeof path);
  cJSON *m = NULL;
  if (read_meta(path, &m) != GS_OK) return GS_OK; /* train_meta_check says why */
  gs_status st = GS_OK;
  if (differs_str(m, "model", gs_nn_model_name(c->model), why, sizeof why,
                  train_option(c, "model")))
    st = gs_error(GS_ERR_INVALID_ARG, "%s: the checkpoint in %s does not fit this run: %s",
                  train_option(c, "resume"), c->checkpoint_dir, why);
  cJSON_Delete(m);
  return st;
}

gs_status train_meta_check(const train_ctx *t, const char *ckpt_path,
                           const train_data_id *data, long ckpt_epoch) {
  const gs_train_config *c = t->cfg;
  char path[4200], why[1024] = "";
  train_meta_path(c, path, sizeof path);
  cJSON *m = NULL;
  gs_status st = read_meta(path, &m);
  if (st != GS_OK) return st;
  char hash[64];
  st = file_hash(ckpt_path, hash, sizeof hash);
  if (st != GS_OK) {
    cJSON_Delete(m);
    return st;
  }
  /* A save cut after its description was renamed into place leaves the
   * checkpoint it replaced, described by "previous". */
  const cJSON *prev = cJSON_GetObjectItemCaseSensitive(m, "previous");
  const cJSON *mh = cJSON_GetObjectItemCaseSensitive(m, "checkpoint_hash");
  if (cJSON_IsObject(prev) && !(cJSON_IsString(mh) && strcmp(mh->valuestring, hash) == 0)) {
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(prev, "checkpoint_hash");
    if (cJSON_IsString(ph) && strcmp(ph->valuestring, hash) == 0) {
      cJSON *p = cJSON_DetachItemFromObjectCaseSensitive(m, "previous");
      cJSON_Delete(m);
      m = p;
    }
  }
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "data");
  char batch_label[96], epochs_label[128];
  snprintf(batch_label, sizeof batch_label, "%s (per rank)", train_option(c, "batch"));
  snprintf(epochs_label, sizeof epochs_label, "%s (the learning-rate schedule spans the run)",
           train_option(c, "epochs"));
  int bad =
      differs_str(m, "checkpoint_hash", hash, why, sizeof why, "the checkpoint file's hash (the description is of another checkpoint)") ||
      differs_num(m, "epoch", (double)ckpt_epoch, why, sizeof why, "the checkpoint's epoch") ||
      differs_str(m, "model", gs_nn_model_name(c->model), why, sizeof why,
                  train_option(c, "model")) ||
      differs_num(m, "parameters", (double)gs_nn_param_total(t->net), why, sizeof why,
                  "the parameter count") ||
      differs_num(m, "tensors", (double)t->nparams, why, sizeof why, "the tensor count") ||
      /* The world size may change where the run says what stays: the
       * global batch, or the per-rank batch with the learning rate scaled. */
      (c->global_batch > 0
           ? differs_num(m, "global_batch", c->global_batch, why, sizeof why,
                         train_option(c, "global_batch"))
           : differs_num(m, "batch", t->batch, why, sizeof why, batch_label) ||
                 (!c->scale_lr_linear && differs_workers(m, t, why, sizeof why)));
  if (!bad && !cJSON_IsObject(d)) {
    snprintf(why, sizeof why, "it does not record the data set");
    bad = 1;
  }
  int data_bad = 0;
  if (!bad)
    data_bad = bad = differs_num(d, "samples", (double)data->samples, why, sizeof why,
                      "the training set's size") ||
          differs_str(d, "shape", data->shape, why, sizeof why, "the images' shape") ||
          differs_num(d, "classes", data->classes, why, sizeof why, "the class count") ||
          differs_num(d, "crc32", data->crc32, why, sizeof why,
                      "the training set's contents (CRC-32)");
  if (!bad)
    bad = differs_num(m, "seed", (double)c->seed, why, sizeof why, train_option(c, "seed")) ||
          differs_str(m, "sync", t->sync.ops ? t->sync.ops->name : c->sync, why, sizeof why,
                      "the sync mode") ||
          differs_str(m, "optimizer", t->optim.ops->name, why, sizeof why,
                      train_option(c, "optimizer"));
  /* Another --max-steps gives the epochs another length: a position inside
   * an epoch, and a schedule over the run's steps, would not mean what they
   * meant (until 2026-12-06 a commit at sample 320 resumed with --max-steps
   * 3 closed its epoch without a step). At an epoch's end under a constant
   * rate the next epochs may be longer or shorter, as more --epochs may
   * follow. Checkpoints from before then do not record it. */
  const cJSON *in_epoch = cJSON_GetObjectItemCaseSensitive(m, "samples_in_epoch");
  if (!bad && cJSON_GetObjectItemCaseSensitive(m, "max_steps") &&
      ((cJSON_IsNumber(in_epoch) && in_epoch->valuedouble > 0) ||
       strcmp(c->schedule, "const") != 0 || c->warmup_epochs > 0))
    bad = differs_num(m, "max_steps", (double)(c->max_steps > 0 ? c->max_steps : 0), why,
                      sizeof why, train_option(c, "max_steps"));
  /* Each rank's K-FAC state is its scheme's (dp's a share of the layers):
   * another scheme is refused here, alike on every rank, not by each rank's
   * state file. Checkpoints from before 2026-12-06 do not record it. */
  if (!bad && kfac_dist(c) && cJSON_GetObjectItemCaseSensitive(m, "kfac_dist"))
    bad = differs_str(m, "kfac_dist", kfac_dist(c), why, sizeof why,
                      train_option(c, "kfac_dist"));
  /* More epochs continue a constant learning rate; a schedule that spans
   * the run (step, cosine, warm-up) would change under the finished part. */
  if (!bad && (strcmp(c->schedule, "const") != 0 || c->warmup_epochs > 0))
    bad = differs_num(m, "epochs", c->epochs, why, sizeof why, epochs_label) ||
          differs_str(m, "schedule", c->schedule, why, sizeof why,
                      train_option(c, "schedule")) ||
          differs_num(m, "warmup_epochs", c->warmup_epochs, why, sizeof why,
                      train_option(c, "warmup_epochs"));
  if (!bad && ckpt_epoch > c->epochs) {
    snprintf(why, sizeof why, "the checkpoint is at epoch %ld, beyond this run's %s %d",
             ckpt_epoch, train_option(c, "epochs"), c->epochs);
    bad = 1;
  }
  if (!bad) {
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(m, "samples_in_epoch");
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(m, "ranks");
    const cJSON *br = cJSON_GetObjectItemCaseSensitive(m, "base_ranks");
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(m, "sync_rank_files");
    train_ctx *w = (train_ctx *)t; /* the position is this call's output */
    w->resume_samples_in_epoch = cJSON_IsNumber(se) ? (long)se->valuedouble : 0;
    w->resume_ranks = cJSON_IsNumber(rk) ? (int)rk->valuedouble : t->size;
    if (cJSON_IsNumber(br) && br->valuedouble >= 1) w->base_ranks = (int)br->valuedouble;
    /* A checkpoint from before the files existed has none. */
    w->resume_sync_files =
        cJSON_IsNumber(sf) && sf->valuedouble >= 1 ? (int)sf->valuedouble : 0;
    char changed[512];
    resume_changes(m, c, changed, sizeof changed);
    if (changed[0])
      train_note(t, "resume: the checkpoint's run had other settings, this run goes on "
                 "with its own: %s", changed);
  }
  if (bad) {
    const char *src =
        data_bad ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "source")) : NULL;
    st = gs_error(GS_ERR_INVALID_ARG,
                  "%s: the checkpoint in %s does not fit this run: %s%s%s%s",
                  train_option(c, "resume"), c->checkpoint_dir, why, src ? " (its data: " : "", src ? src : "",
                  src ? ")" : "");
  }
  cJSON_Delete(m);
  return st;
}

/* ---- A sync mode's per-rank files ---- */

void train_rank_files_init(train_rank_files *f) {
  memset(f, 0, sizeof *f);
  f->kept_step = f->written_step = -1;
}

void train_rank_files_saving(train_rank_files *f) {
  f->written_step = -1;
  f->saved = 1;
}

void train_rank_files_written(train_rank_files *f, long step) { f->written_step = step; }

void train_rank_files_commit(train_rank_files *f, const train_ctx *t, train_rank_path path) {
  if (!f->saved) return;
  f->saved = 0;
  for (int r = f->kept_first; f->kept_step >= 0 && r < f->kept_upto; r += t->size) {
    if (f->kept_step == f->written_step && r == t->rank) continue;
    char file[4200];
    path(file, sizeof file, t->cfg->checkpoint_dir, r, f->kept_step);
    (void)unlink(file);
  }
  f->kept_step = f->written_step;
  f->kept_first = t->rank;
  f->kept_upto = f->written_step >= 0 ? t->rank + 1 : 0;
  f->written_step = -1;
}

void train_rank_files_resumed(train_rank_files *f, const train_ctx *t, long step,
                              int files_size) {
  if (files_size <= 0) return;
  /* The old files are this rank's to remove once a newer commit is in: its
   * own, and after a resize every size-th from it. */
  f->kept_step = step;
  f->kept_first = t->rank;
  f->kept_upto = files_size;
}
