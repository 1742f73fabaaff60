/*
 * gradsync train: data-parallel training of the C models (src/nn) on
 * Fashion-MNIST, with gradients averaged by the engine during backward.
 *
 * Every rank holds a replica. Per step: forward (before each layer uses its
 * parameters, the pending update of that tensor is applied: under DeAR the
 * tensor's all-gather finishes there, gs_engine_wait_tensor), loss, backward
 * (each gradient is handed to the engine the moment it is final), then
 * gs_engine_wait. Applying updates lazily in the next forward is the same
 * arithmetic as stepping right after wait, and lets DeAR overlap its
 * all-gathers with the forward pass; a flush applies what is pending before
 * evaluation, checkpoints and the end.
 *
 * Failures. Where a rank can fail alone before a collective phase (options,
 * data, --resume, the model and engine, the output paths, evaluation,
 * checkpoints), the ranks agree on the outcome first (cli_agree) and stop
 * together. A failure inside a step, where the engine may have collectives
 * in flight, cannot be agreed on: that rank ends the job (cli_rank_abort).
 * Divergence is no such failure: it is detected on the averaged gradients,
 * bitwise the same on every rank, so every rank stops at the same step.
 *
 * Metrics (loss, accuracy), the initial weights and the agreements travel
 * on the engine's gs_comm, at points where the engine has nothing in
 * flight; the training thread never calls MPI itself (cli.h explains why).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gradsync.h"
#include "gradsync/nn.h"

#define VERB "train"

typedef struct train_opts {
  gs_nn_model model;
  int epochs, batch;
  float lr, momentum, weight_decay;
  int nesterov;
  const char *schedule; /* const, step, cosine */
  double warmup_epochs;
  const char *policy;
  const char *data_dir;
  long synthetic;       /* > 0: a synthetic data set of this many samples */
  const char *checkpoint_dir;
  int resume, json;
  uint64_t seed;
  long max_steps;       /* > 0: stop each epoch after this many steps (tests) */
  float dropout;
} train_opts;

/* The model's input: Fashion-MNIST's images, 1 channel of 28 x 28 pixels,
 * in 10 classes. */
enum { IN_C = 1, IN_H = 28, IN_W = 28, CLASSES = 10 };

typedef struct trainer {
  const train_opts *o;
  cli_rank *r;
  int rank, size;
  gs_comm *comm;
  gs_engine *engine;
  gs_nn_net *net;
  gs_nn_sgd *opt;
  size_t nparams;
  int *ids;
  unsigned char *pending; /* per tensor: an update waits to be applied */
  gs_status cb_status;    /* first failure inside a callback */
  char cb_error[512];
} trainer;

static void usage(FILE *f) {
  fprintf(f,
    "usage: gradsync run -np N [--net RATE] -- gradsync train [options]\n\n"
    "Trains a model on Fashion-MNIST with data parallelism across the ranks;\n"
    "gradients are averaged during backward by gradsync's engine.\n\n"
    "  --model NAME        mlp, cnn (default) or resnet\n"
    "  --epochs E          passes over the training set (default 1)\n"
    "  --batch B           samples per rank and step (default 64)\n"
    "  --lr LR             base learning rate (default 0.05)\n"
    "  --momentum M        SGD momentum (default 0.9)\n"
    "  --nesterov          Nesterov momentum\n"
    "  --weight-decay WD   L2 weight decay (default 0)\n"
    "  --schedule S        const (default), step (x0.1 every 1/3 of the run)\n"
    "                      or cosine\n"
    "  --warmup-epochs W   linear learning-rate warm-up (default 0)\n"
    "  --policy P          wfbp, single, bucket[:MB[,first=MB]], mgwfbp,\n"
    "                      optimal, dear or auto (default)\n"
    "  --data DIR          Fashion-MNIST's IDX files (default\n"
    "                      " GS_NN_FASHION_MNIST_DIR ")\n"
    "  --synthetic N       train on N synthetic samples instead\n"
    "  --checkpoint DIR    write DIR/checkpoint.gsck at every epoch's end\n"
    "  --resume            continue from DIR/checkpoint.gsck\n"
    "  --seed S            initialisation and shuffling seed (default 1)\n"
    "  --max-steps N       at most N steps per epoch (for quick checks)\n"
    "  --dropout P         dropout before the last layer (mlp, cnn)\n"
    "  --json              a JSON line per epoch and a summary line\n");
}

/* ---- Options ----------------------------------------------------------------- */

static int parse_opts(int argc, char **argv, train_opts *o) {
  static const struct option longs[] = {
      {"model", required_argument, 0, 'm'},   {"epochs", required_argument, 0, 'e'},
      {"batch", required_argument, 0, 'b'},   {"lr", required_argument, 0, 'l'},
      {"momentum", required_argument, 0, 'M'}, {"nesterov", no_argument, 0, 'N'},
      {"weight-decay", required_argument, 0, 'W'},
      {"schedule", required_argument, 0, 'S'},
      {"warmup-epochs", required_argument, 0, 'w'},
      {"policy", required_argument, 0, 'p'},  {"data", required_argument, 0, 'd'},
      {"synthetic", required_argument, 0, 'y'},
      {"checkpoint", required_argument, 0, 'c'}, {"resume", no_argument, 0, 'r'},
      {"seed", required_argument, 0, 's'},    {"max-steps", required_argument, 0, 'x'},
      {"dropout", required_argument, 0, 'D'}, {"json", no_argument, 0, 'j'},
      {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
  *o = (train_opts){.model = GS_NN_MODEL_CNN, .epochs = 1, .batch = 64, .lr = 0.05f,
                    .momentum = 0.9f, .schedule = "const", .policy = "auto",
                    .seed = 1};
  int c;
  double v;
  long n;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    switch (c) {
      case 'm':
        if (gs_nn_model_parse(optarg, &o->model) != GS_OK) {
          cli_error(VERB, "unknown --model '%s' (mlp, cnn or resnet)", optarg);
          return 2;
        }
        break;
      case 'e':
        if (cli_parse_int(optarg, 1, 100000, &o->epochs)) {
          cli_error(VERB, "--epochs '%s' must be an integer from 1 to 100000", optarg);
          return 2;
        }
        break;
      case 'b':
        if (cli_parse_int(optarg, 1, 65536, &o->batch)) {
          cli_error(VERB, "--batch '%s' must be an integer from 1 to 65536", optarg);
          return 2;
        }
        break;
      case 'l':
      case 'M':
      case 'W':
      case 'D':
      {
        double hi = c == 'l' ? 100 : c == 'W' ? 1 : 0.999;
        if (cli_parse_double(optarg, 0, hi, &v) || (c == 'l' && v == 0)) {
          cli_error(VERB, "--%s '%s' must be a number %s 0 and %g",
                    c == 'l' ? "lr" : c == 'M' ? "momentum" : c == 'W' ? "weight-decay"
                    : "dropout", optarg, c == 'l' ? "above" : "from", hi);
          return 2;
        }
      }
        if (c == 'l') o->lr = (float)v;
        else if (c == 'M') o->momentum = (float)v;
        else if (c == 'W') o->weight_decay = (float)v;
        else o->dropout = (float)v;
        break;
      case 'N': o->nesterov = 1; break;
      case 'S':
        if (strcmp(optarg, "const") && strcmp(optarg, "step") && strcmp(optarg, "cosine")) {
          cli_error(VERB, "--schedule '%s' must be const, step or cosine", optarg);
          return 2;
        }
        o->schedule = optarg;
        break;
      case 'w':
        if (cli_parse_double(optarg, 0, 1000, &o->warmup_epochs)) {
          cli_error(VERB, "--warmup-epochs '%s' must be a number from 0 to 1000", optarg);
          return 2;
        }
        break;
      case 'p': {
        gs_plan_policy pol;
        if (gs_plan_policy_parse(optarg, &pol) != GS_OK) {
          cli_error(VERB, "--policy: %s", gs_last_error());
          return 2;
        }
        o->policy = optarg;
        break;
      }
      case 'd': o->data_dir = optarg; break;
      case 'y':
      case 'x': {
        if (cli_parse_long(optarg, 1, 100000000, &n)) {
          cli_error(VERB, "--%s '%s' must be an integer from 1 to 100000000",
                    c == 'y' ? "synthetic" : "max-steps", optarg);
          return 2;
        }
        if (c == 'y') o->synthetic = n;
        else o->max_steps = n;
        break;
      }
      case 'c': o->checkpoint_dir = optarg; break;
      case 'r': o->resume = 1; break;
      case 's':
        if (cli_parse_long(optarg, 0, LONG_MAX, &n)) {
          cli_error(VERB, "--seed '%s' must be an integer from 0 to %ld", optarg, LONG_MAX);
          return 2;
        }
        o->seed = (uint64_t)n;
        break;
      case 'j': o->json = 1; break;
      case 'h': usage(stdout); return 1;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (o->resume && !o->checkpoint_dir) {
    cli_error(VERB, "--resume needs --checkpoint DIR");
    return 2;
  }
  return 0;
}

/* ---- Engine wiring ---------------------------------------------------------- */

static void fail_cb(trainer *t, gs_status st) {
  if (t->cb_status == GS_OK) {
    t->cb_status = st;
    snprintf(t->cb_error, sizeof t->cb_error, "%s", gs_last_error());
  }
}

static void on_grad_ready(void *ctx, size_t i) {
  trainer *t = ctx;
  gs_status st = gs_engine_grad_ready(t->engine, t->ids[i]);
  if (st != GS_OK) fail_cb(t, st);
}

/* Applies tensor i's pending update once its average is in place. */
static gs_status apply_pending(trainer *t, size_t i) {
  if (!t->pending[i]) return GS_OK;
  gs_status st = gs_engine_wait_tensor(t->engine, t->ids[i]);
  if (st == GS_OK) st = gs_nn_sgd_step_param(t->opt, i);
  if (st == GS_OK) t->pending[i] = 0;
  return st;
}

static void before_forward(void *ctx, size_t i) {
  trainer *t = ctx;
  gs_status st = apply_pending(t, i);
  if (st != GS_OK) fail_cb(t, st);
}

static gs_status flush_updates(trainer *t) {
  gs_status st = GS_OK;
  for (size_t i = 0; i < t->nparams && st == GS_OK; i++) st = apply_pending(t, i);
  return st;
}

static gs_status callbacks_status(trainer *t) {
  if (t->cb_status != GS_OK) return gs_error(t->cb_status, "%s", t->cb_error);
  return GS_OK;
}

/* ---- Progress ------------------------------------------------------------------ */

/* Whether the user watches a terminal: `gradsync run` says so in GRADSYNC_TTY,
 * since ranks write to mpirun's pseudo-terminal even when the user's output
 * is a file. */
static int on_terminal(void) {
  const char *s = getenv("GRADSYNC_TTY");
  if (s && *s) return strcmp(s, "1") == 0;
  return isatty(STDOUT_FILENO);
}

static void progress(const trainer *t, int epoch, long step, long steps, double loss,
                     double acc, double img_s, double hidden, int final) {
  if (t->rank != 0 || t->o->json) return;
  if (on_terminal()) {
    int width = 30, done = steps ? (int)(width * step / steps) : width;
    printf("\repoch %d/%d [", epoch + 1, t->o->epochs);
    for (int i = 0; i < width; i++) putchar(i < done ? '#' : '.');
    printf("] %3ld%% loss %.4f acc %5.1f%% %7.0f img/s comm hidden %3.0f%%",
           steps ? 100 * step / steps : 100, loss, 100 * acc, img_s, 100 * hidden);
    if (final) putchar('\n');
  } else {
    printf("epoch %d/%d step %ld/%ld loss %.4f acc %.1f%% %.0f img/s comm hidden %.0f%%\n",
           epoch + 1, t->o->epochs, step, steps, loss, 100 * acc, img_s, 100 * hidden);
  }
  fflush(stdout);
}

static double hidden_share(const gs_engine_stats *s) {
  return s->comm_s > 0 ? fmax(0.0, 1.0 - s->wait_s / s->comm_s) : 1.0;
}

/* ---- Evaluation ---------------------------------------------------------------- */

/* Accuracy on the test set: each rank evaluates a shard; the counts are
 * summed. Batch-norm statistics come from rank 0 first (as DDP broadcasts
 * buffers), so every rank evaluates the same model. Called with the engine
 * idle (after flush_updates). Returns 0, or 1 on every rank after a failure
 * on any. */
static int evaluate(trainer *t, const gs_nn_dataset *test, double *acc, double *loss) {
  size_t nbuf = 0;
  float *buffers = gs_nn_buffers_flat(t->net, &nbuf);
  gs_status st = GS_OK;
  if (nbuf > 0) st = gs_bcast(t->comm, buffers, nbuf, GS_F32, 0, GS_ALGO_AUTO);
  int b = gs_nn_max_batch(t->net);
  size_t in = gs_nn_input_size(t->net);
  float *x = gs_malloc((size_t)b * in * sizeof(float));
  int32_t *y = gs_malloc((size_t)b * sizeof(int32_t));
  size_t *idx = gs_malloc((size_t)b * sizeof(size_t));
  if (st == GS_OK && !(x && y && idx))
    st = gs_error(GS_ERR_NOMEM, "out of memory for an evaluation batch of %d", b);
  double sums[3] = {0, 0, 0}; /* correct, loss * n, n */
  /* Rank r takes samples r, r + size, ...; no callbacks during evaluation. */
  gs_nn_set_training(t->net, 0);
  gs_nn_set_callbacks(t->net, NULL, NULL, NULL);
  for (size_t s = (size_t)t->rank; s < test->n && st == GS_OK;) {
    int n = 0;
    for (; n < b && s < test->n; s += (size_t)t->size) idx[n++] = s;
    st = gs_nn_dataset_gather(test, idx, n, x, y);
    float l = 0;
    int correct = 0;
    if (st == GS_OK) st = gs_nn_forward(t->net, x, n, NULL);
    if (st == GS_OK) st = gs_nn_loss(t->net, y, &l, &correct);
    sums[0] += correct;
    sums[1] += (double)l * n;
    sums[2] += n;
  }
  gs_nn_set_callbacks(t->net, on_grad_ready, before_forward, t);
  gs_nn_set_training(t->net, 1);
  gs_free(x);
  gs_free(y);
  gs_free(idx);
  if (cli_agree_status(t->r, st)) return 1;
  st = gs_allreduce(t->comm, GS_IN_PLACE, sums, 3, GS_F64, GS_SUM, GS_ALGO_MPI);
  if (cli_agree_status(t->r, st)) return 1;
  *acc = sums[2] > 0 ? sums[0] / sums[2] : 0;
  *loss = sums[2] > 0 ? sums[1] / sums[2] : 0;
  return 0;
}

/* ---- Checkpoints and other outputs ------------------------------------------------ */

static void checkpoint_path(const train_opts *o, char *buf, size_t n) {
  snprintf(buf, n, "%s/checkpoint.gsck", o->checkpoint_dir);
}

/* Replicas are identical: rank 0 writes; every rank learns the outcome.
 * Returns 0, or 1 on every rank. */
static int save_checkpoint(trainer *t, long epoch, long step) {
  char path[4096];
  checkpoint_path(t->o, path, sizeof path);
  gs_status st = GS_OK;
  if (t->rank == 0) {
    gs_nn_train_state ts = {.epoch = epoch, .step = step, .seed = t->o->seed};
    st = gs_nn_checkpoint_save(path, t->net, t->opt, &ts);
  }
  return cli_agree_status(t->r, st);
}

/* Everything the run will write is checked before any work: the checkpoint
 * directory (rank 0 writes it; created here) and each rank's timeline. */
static gs_status check_outputs(const trainer *t) {
  const char *dir = t->o->checkpoint_dir;
  if (dir && t->rank == 0) {
    struct stat sb;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
      return gs_error(GS_ERR_IO, "--checkpoint %s: cannot create the directory: %s", dir,
                      strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return gs_error(GS_ERR_IO, "--checkpoint %s: not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
      return gs_error(GS_ERR_IO, "--checkpoint %s: cannot write there: %s", dir,
                      strerror(errno));
  }
  const char *timeline = getenv("GRADSYNC_TIMELINE");
  if (timeline && *timeline) return cli_check_writable(timeline, "GRADSYNC_TIMELINE");
  return GS_OK;
}

/* ---- Data ----------------------------------------------------------------------- */

/* The file a split's images come from, as gs_nn_fashion_mnist_load picks
 * it (for messages), or a description of the synthetic set. */
static void data_name(const train_opts *o, int train, char *buf, size_t n) {
  if (o->synthetic > 0) {
    snprintf(buf, n, "the synthetic %s set", train ? "training" : "test");
    return;
  }
  const char *dir = o->data_dir;
  if (!dir) dir = getenv("GRADSYNC_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = GS_NN_FASHION_MNIST_DIR;
  struct stat sb;
  snprintf(buf, n, "%s/%s-images-idx3-ubyte.gz", dir, train ? "train" : "t10k");
  if (stat(buf, &sb) != 0) snprintf(buf, n, "%s/%s-images-idx3-ubyte", dir, train ? "train" : "t10k");
}

static gs_status load_data(const train_opts *o, gs_nn_dataset *train, gs_nn_dataset *test) {
  gs_status st;
  if (o->synthetic > 0) {
    st = gs_nn_dataset_synthetic(train, (size_t)o->synthetic, IN_C, IN_H, IN_W, CLASSES,
                                 1.0f, 7);
    if (st == GS_OK)
      st = gs_nn_dataset_synthetic(test, (size_t)(o->synthetic / 5 + 1), IN_C, IN_H, IN_W,
                                   CLASSES, 1.0f, 7);
    return st;
  }
  st = gs_nn_fashion_mnist_load(o->data_dir, 1, train);
  if (st == GS_OK) st = gs_nn_fashion_mnist_load(o->data_dir, 0, test);
  return st;
}

/* A data set the model cannot take is an error before training, never a
 * batch copied past the end of the model's input buffer: the image shape,
 * the class count and every label are checked against the model. */
static gs_status check_data(const train_opts *o, const gs_nn_dataset *ds, int train) {
  char name[4200];
  data_name(o, train, name, sizeof name);
  if (ds->n == 0) return gs_error(GS_ERR_INVALID_ARG, "%s: no samples", name);
  if (ds->c != IN_C || ds->h != IN_H || ds->w != IN_W)
    return gs_error(GS_ERR_INVALID_ARG,
                    "%s: the images are %dx%dx%d (channels x rows x columns), but the %s "
                    "model takes %dx%dx%d images (Fashion-MNIST's shape)",
                    name, ds->c, ds->h, ds->w, gs_nn_model_name(o->model), IN_C, IN_H, IN_W);
  if (ds->classes != CLASSES)
    return gs_error(GS_ERR_INVALID_ARG, "%s: %d classes, but the %s model has %d outputs",
                    name, ds->classes, gs_nn_model_name(o->model), CLASSES);
  for (size_t i = 0; i < ds->n; i++)
    if (ds->labels[i] < 0 || ds->labels[i] >= CLASSES)
      return gs_error(GS_ERR_INVALID_ARG,
                      "%s: the label of sample %zu is %d, outside the model's %d classes",
                      name, i, (int)ds->labels[i], CLASSES);
  return GS_OK;
}

/* ---- The loop --------------------------------------------------------------------- */

static gs_status setup_engine(trainer *t) {
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = t->o->policy;
  cfg.forward_overlap = 1;
  gs_status st = gs_engine_create(t->comm, &cfg, &t->engine);
  if (st != GS_OK) return st;
  t->nparams = gs_nn_param_count(t->net);
  t->ids = gs_calloc(t->nparams, sizeof *t->ids);
  t->pending = gs_calloc(t->nparams, 1);
  if (!t->ids || !t->pending)
    return gs_error(GS_ERR_NOMEM, "out of memory for %zu tensors", t->nparams);
  for (size_t i = 0; i < t->nparams && st == GS_OK; i++) {
    const gs_nn_param *p = gs_nn_param_at(t->net, i);
    st = gs_engine_register(t->engine, p->name, p->grad, p->count, GS_F32, &t->ids[i]);
  }
  if (st == GS_OK) gs_nn_set_callbacks(t->net, on_grad_ready, before_forward, t);
  return st;
}

/* Stops training whose averaged gradients are not finite, naming where. */
static gs_status check_finite(trainer *t, long epoch, long step) {
  size_t index;
  const char *bad = gs_nn_first_nonfinite_grad(t->net, &index);
  if (bad == NULL) return GS_OK;
  return gs_error(GS_ERR_INVALID_ARG,
                  "training diverged at epoch %ld, step %ld: the averaged gradient "
                  "of %s (the first layer in backward order that is not finite) "
                  "holds a NaN or an infinity; lower --lr or check the data",
                  epoch + 1, step + 1, bad);
}

/* A failure inside a step: the engine may have collectives in flight on this
 * rank, which the others are waiting in, so no agreement can reach them. */
static _Noreturn void step_failed(trainer *t, long epoch, long step) {
  cli_rank_abort(t->r, "epoch %ld, step %ld: %s", epoch + 1, step + 1, gs_last_error());
}

static void print_epoch(long epoch, double epoch_s, double train_loss,
                        double test_loss, double acc, double img_s,
                        const gs_engine_stats *d) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "epoch", (double)epoch);
  cli_json_add(j, "epoch_s", epoch_s, "%.3f");
  cli_json_add(j, "train_loss", train_loss, "%.5f");
  cli_json_add(j, "test_loss", test_loss, "%.5f");
  cli_json_add(j, "test_accuracy", acc, "%.4f");
  cli_json_add(j, "images_per_s", img_s, "%.1f");
  cli_json_add(j, "comm_s", d->comm_s, "%.3f");
  cli_json_add(j, "comm_hidden", hidden_share(d), "%.3f");
  cli_print_json(stdout, j);
}

static void print_summary(const trainer *t, double train_s, double wall_s, long images,
                          double last_acc) {
  const train_opts *o = t->o;
  gs_engine_stats s;
  gs_engine_get_stats(t->engine, &s);
  gs_plan *plan = NULL;
  gs_engine_get_plan(t->engine, &plan);
  const char *chosen = plan ? gs_plan_policy_name(plan->chosen) : "-";
  size_t groups = plan ? plan->ngroups : 0;
  double img_s = train_s > 0 ? (double)images / train_s : 0;
  if (o->json) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "model", gs_nn_model_name(o->model));
    cJSON_AddNumberToObject(m, "ranks", t->size);
    cJSON_AddNumberToObject(m, "epochs", o->epochs);
    cJSON_AddNumberToObject(m, "batch_per_rank", o->batch);
    cJSON_AddStringToObject(m, "policy", o->policy);
    cJSON_AddStringToObject(m, "chosen", chosen);
    cJSON_AddNumberToObject(m, "groups", (double)groups);
    cli_json_add(m, "train_s", train_s, "%.3f");
    cli_json_add(m, "wall_s", wall_s, "%.3f");
    cli_json_add(m, "images_per_s", img_s, "%.1f");
    cli_json_add(m, "test_accuracy", last_acc, "%.4f");
    cJSON_AddNumberToObject(m, "messages", (double)s.messages);
    cli_json_add(m, "comm_s", s.comm_s, "%.3f");
    cli_json_add(m, "comm_hidden", hidden_share(&s), "%.3f");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "summary", m);
    cli_print_json(stdout, j);
  } else {
    printf("\nsummary: %s on %d rank(s), %d epoch(s), batch %d per rank\n"
           "  time        %.1f s training, %.1f s in all\n"
           "  throughput  %.0f images/s\n"
           "  accuracy    %.2f%% on the test set\n"
           "  comm        policy %s (plan: %s, %zu messages per step), %llu collectives,\n"
           "              %.1f s communicating, %.0f%% of it hidden behind compute\n",
           gs_nn_model_name(o->model), t->size, o->epochs, o->batch, train_s, wall_s, img_s,
           100 * last_acc, o->policy, chosen, groups, (unsigned long long)s.messages,
           s.comm_s, 100 * hidden_share(&s));
  }
  gs_plan_free(plan);
}

/* Returns the exit status: 0, or 1 after a failure (reported; the ranks
 * agreed on it). */
static int run(trainer *t) {
  const train_opts *o = t->o;
  cli_rank *r = t->r;
  gs_nn_dataset train = {0}, test = {0};
  gs_nn_sampler sampler = {0};
  float *x = NULL;
  int32_t *y = NULL;
  int rc = 1;
  long steps = 0, start_epoch = 0;

  /* What each rank does alone: data, model, optimizer, checkpoint, outputs. */
  gs_status st = load_data(o, &train, &test);
  if (st == GS_OK) st = check_data(o, &train, 1);
  if (st == GS_OK) st = check_data(o, &test, 0);
  gs_nn_model_options mopt = {.c = IN_C, .h = IN_H, .w = IN_W, .classes = CLASSES,
                              .dropout = o->dropout};
  if (st == GS_OK) st = gs_nn_model_create(&t->net, o->model, o->batch, o->seed, &mopt);
  gs_nn_sgd_config scfg = {.lr = o->lr, .momentum = o->momentum,
                           .weight_decay = o->weight_decay, .nesterov = o->nesterov};
  if (st == GS_OK) st = gs_nn_sgd_create(&t->opt, t->net, &scfg);
  if (st == GS_OK) st = gs_nn_sampler_init(&sampler, train.n, t->rank, t->size, o->seed, 1);
  if (st == GS_OK) steps = (long)(sampler.count / (size_t)o->batch);
  if (o->max_steps > 0 && steps > o->max_steps) steps = o->max_steps;
  if (st == GS_OK && steps == 0)
    st = gs_error(GS_ERR_INVALID_ARG, "%zu samples per rank give no full batch of %d",
                  sampler.count, o->batch);
  if (st == GS_OK && o->resume) {
    char path[4096];
    checkpoint_path(o, path, sizeof path);
    gs_nn_train_state ts;
    st = gs_nn_checkpoint_load(path, t->net, t->opt, &ts);
    if (st == GS_OK) start_epoch = ts.epoch;
  }
  if (st == GS_OK) st = check_outputs(t);
  if (st == GS_OK) {
    x = gs_malloc((size_t)o->batch * gs_nn_input_size(t->net) * sizeof(float));
    y = gs_malloc((size_t)o->batch * sizeof(int32_t));
    if (!x || !y) st = gs_error(GS_ERR_NOMEM, "out of memory for a batch of %d", o->batch);
  }
  if (cli_agree_status(r, st)) goto out;
  /* The ranks must run the same collectives: the same parameters and the
   * same number of steps from the same epoch. */
  const int64_t shared[] = {(int64_t)gs_nn_param_total(t->net), steps, o->epochs,
                            start_epoch};
  static const char *const shared_names[] = {"the parameter count", "the steps per epoch",
                                             "--epochs", "the checkpoint's epoch"};
  if (cli_agree_equal(r, shared, shared_names, 4)) goto out;
  if (start_epoch >= o->epochs && t->rank == 0 && !o->json)
    printf("the checkpoint in %s is at epoch %ld: nothing left to train\n",
           o->checkpoint_dir, start_epoch);

  /* Every replica starts from rank 0's weights. */
  st = gs_bcast(t->comm, gs_nn_weights_flat(t->net), gs_nn_param_total(t->net), GS_F32, 0,
                GS_ALGO_AUTO);
  if (st == GS_OK) st = setup_engine(t);
  if (cli_agree_status(r, st)) goto out;

  gs_nn_lr_schedule sched = {.base_lr = o->lr,
                             .warmup_steps = (long)(o->warmup_epochs * steps),
                             .total_steps = (long)o->epochs * steps};
  if (strcmp(o->schedule, "step") == 0) {
    sched.decay = GS_NN_LR_STEP;
    long third = (long)o->epochs * steps / 3;
    sched.step_size = third > 1 ? third : 1;
    sched.gamma = 0.1f;
  } else if (strcmp(o->schedule, "cosine") == 0) {
    sched.decay = GS_NN_LR_COSINE;
  }
  double t_start = gs_now(), train_s = 0, last_acc = 0, last_draw = 0;
  long images = 0, log_every = steps / 20 > 1 ? steps / 20 : 1;
  for (long epoch = start_epoch; epoch < o->epochs; epoch++) {
    st = gs_nn_sampler_set_epoch(&sampler, epoch);
    if (cli_agree_status(r, st)) goto out;
    double e0 = gs_now(), loss_sum = 0;
    long correct = 0, seen = 0;
    gs_engine_stats s0 = {0}, s1 = {0};
    gs_engine_get_stats(t->engine, &s0);
    for (long step = 0; step < steps; step++) {
      long gstep = epoch * steps + step;
      float loss = 0;
      int ok = 0;
      if (gs_nn_dataset_gather(&train, sampler.indices + (size_t)step * (size_t)o->batch,
                               o->batch, x, y) != GS_OK ||
          gs_nn_forward(t->net, x, o->batch, NULL) != GS_OK ||
          callbacks_status(t) != GS_OK)
        step_failed(t, epoch, step);
      /* The forward pass applied the previous step's updates, so the
       * gradient buffers hold that step's averages, the same on every rank:
       * every rank takes the same decision without communicating, with the
       * engine idle. */
      if (step > 0 && (st = check_finite(t, epoch, step - 1)) != GS_OK) break;
      if (gs_nn_loss(t->net, y, &loss, &ok) != GS_OK || gs_nn_backward(t->net) != GS_OK ||
          callbacks_status(t) != GS_OK || gs_engine_wait(t->engine) != GS_OK)
        step_failed(t, epoch, step);
      gs_nn_sgd_set_lr(t->opt, gs_nn_lr_at(&sched, gstep));
      memset(t->pending, 1, t->nparams);
      loss_sum += loss;
      correct += ok;
      seen += o->batch;
      /* A terminal's bar is redrawn at most 5 times a second; a log gets a
       * line every 5% of the epoch. */
      int draw = on_terminal() ? gs_now() - last_draw > 0.2 : (step + 1) % log_every == 0;
      if (t->rank == 0 && step + 1 < steps && draw) {
        last_draw = gs_now();
        gs_engine_get_stats(t->engine, &s1);
        gs_engine_stats d = {.comm_s = s1.comm_s - s0.comm_s, .wait_s = s1.wait_s - s0.wait_s};
        double el = gs_now() - e0;
        progress(t, (int)epoch, step + 1, steps, loss_sum / (step + 1), (double)correct / seen,
                 el > 0 ? seen * t->size / el : 0, hidden_share(&d), 0);
      }
    }
    if (st == GS_OK) {
      if (flush_updates(t) != GS_OK) step_failed(t, epoch, steps - 1);
      st = check_finite(t, epoch, steps - 1);
    }
    if (cli_agree_status(r, st)) goto out;
    double epoch_s = gs_now() - e0;
    train_s += epoch_s;
    images += seen * t->size;
    double acc = 0, test_loss = 0;
    if (evaluate(t, &test, &acc, &test_loss)) goto out;
    if (o->checkpoint_dir && save_checkpoint(t, epoch + 1, (epoch + 1) * steps)) goto out;
    last_acc = acc;
    gs_engine_get_stats(t->engine, &s1);
    gs_engine_stats d = {.comm_s = s1.comm_s - s0.comm_s, .wait_s = s1.wait_s - s0.wait_s};
    if (t->rank == 0) {
      if (o->json) {
        print_epoch(epoch + 1, epoch_s, loss_sum / steps, test_loss, acc,
                    seen * t->size / epoch_s, &d);
      } else {
        progress(t, (int)epoch, steps, steps, loss_sum / steps, (double)correct / seen,
                 seen * t->size / epoch_s, hidden_share(&d), 1);
        printf("epoch %ld: %.1f s, test accuracy %.2f%%, test loss %.4f\n", epoch + 1,
               epoch_s, 100 * acc, test_loss);
      }
      fflush(stdout);
    }
  }
  if (t->rank == 0) print_summary(t, train_s, gs_now() - t_start, images, last_acc);
  fflush(stdout);
  rc = 0;
out:
  gs_free(x);
  gs_free(y);
  gs_nn_sampler_free(&sampler);
  gs_nn_dataset_free(&train);
  gs_nn_dataset_free(&test);
  return rc;
}

int cmd_train(int argc, char **argv) {
  train_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc == 1) return 0; /* --help */
  cli_rank r;
  if (cli_rank_init(&r, VERB, &argc, &argv)) return rc ? rc : 1;
  rc = cli_rank_connect(&r, CLI_RANK_BLAS, rc, "bad options");
  if (rc) return rc;
  trainer t = {.o = &o, .r = &r, .rank = r.rank, .size = r.size, .comm = r.comm};
  rc = run(&t);
  /* Every path here has the engine idle on every rank: destroying it
   * issues no collective (it writes the timeline, which can fail alone:
   * cli_rank_finish agrees on that). */
  if (t.engine && gs_engine_destroy(t.engine) != GS_OK) {
    cli_rank_error(&r, "%s", gs_last_error());
    rc = 1;
  }
  gs_nn_sgd_destroy(t.opt);
  gs_nn_net_destroy(t.net);
  gs_free(t.ids);
  gs_free(t.pending);
  return cli_rank_finish(&r, rc);
}
