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
 * Metrics (loss, accuracy, stop decisions) travel on a separate duplicate of
 * MPI_COMM_WORLD from the training thread, never on the engine's
 * communicator, whose collectives the engine's threads issue.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gradsync.h"
#include "gradsync/nn.h"
#include "gs_internal.h"

/* OpenBLAS's own thread count (from cblas.h, not included here to keep the
 * CLI free of BLAS headers). */
void openblas_set_num_threads(int num_threads);

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

typedef struct trainer {
  const train_opts *o;
  int rank, size;
  gs_comm *comm;
  MPI_Comm metrics;
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

static int parse_float(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

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
          cli_error(VERB, "--epochs '%s' must be a positive integer", optarg);
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
        if (parse_float(optarg, 0, c == 'l' ? 100 : c == 'W' ? 1 : 0.999, &v) ||
            (c == 'l' && v <= 0)) {
          cli_error(VERB, "--%s '%s' is out of range", c == 'l' ? "lr" : c == 'M' ? "momentum"
                    : c == 'W' ? "weight-decay" : "dropout", optarg);
          return 2;
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
        if (parse_float(optarg, 0, 1000, &o->warmup_epochs)) {
          cli_error(VERB, "--warmup-epochs '%s' must be a number >= 0", optarg);
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
        int n;
        if (cli_parse_int(optarg, 1, 100000000, &n)) {
          cli_error(VERB, "--%s '%s' must be a positive integer",
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
        if (parse_float(optarg, 0, 1e18, &v)) {
          cli_error(VERB, "--seed '%s' must be a non-negative integer", optarg);
          return 2;
        }
        o->seed = (uint64_t)v;
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
  GS_CHECK(gs_engine_wait_tensor(t->engine, t->ids[i]));
  GS_CHECK(gs_nn_sgd_step_param(t->opt, i));
  t->pending[i] = 0;
  return GS_OK;
}

static void before_forward(void *ctx, size_t i) {
  trainer *t = ctx;
  gs_status st = apply_pending(t, i);
  if (st != GS_OK) fail_cb(t, st);
}

static gs_status flush_updates(trainer *t) {
  for (size_t i = 0; i < t->nparams; i++) GS_CHECK(apply_pending(t, i));
  return GS_OK;
}

static gs_status callbacks_status(trainer *t) {
  if (t->cb_status != GS_OK) {
    gs__error_set_message(t->cb_error);
    return t->cb_status;
  }
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
 * buffers), so every rank evaluates the same model. */
static gs_status evaluate(trainer *t, const gs_nn_dataset *test, double *acc,
                          double *loss) {
  size_t nbuf = 0;
  float *buffers = gs_nn_buffers_flat(t->net, &nbuf);
  if (nbuf > 0 && MPI_Bcast(buffers, (int)nbuf, MPI_FLOAT, 0, t->metrics) != MPI_SUCCESS)
    return gs_error(GS_ERR_MPI, "train: broadcasting batch-norm statistics failed");
  gs_nn_set_training(t->net, 0);
  int b = gs_nn_max_batch(t->net);
  size_t in = gs_nn_input_size(t->net);
  float *x = gs_malloc((size_t)b * in * sizeof(float));
  int32_t *y = gs_malloc((size_t)b * sizeof(int32_t));
  size_t *idx = gs_malloc((size_t)b * sizeof(size_t));
  gs_status st = (x && y && idx) ? GS_OK : GS_ERR_NOMEM;
  double sums[3] = {0, 0, 0}; /* correct, loss * n, n */
  /* Rank r takes samples r, r + size, ...; no callbacks during evaluation. */
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
  GS_CHECK(st);
  if (MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, t->metrics) != MPI_SUCCESS)
    return gs_error(GS_ERR_MPI, "train: summing test accuracy failed");
  *acc = sums[2] > 0 ? sums[0] / sums[2] : 0;
  *loss = sums[2] > 0 ? sums[1] / sums[2] : 0;
  return GS_OK;
}

/* ---- Checkpoints ---------------------------------------------------------------- */

static void checkpoint_path(const train_opts *o, char *buf, size_t n) {
  snprintf(buf, n, "%s/checkpoint.gsck", o->checkpoint_dir);
}

static gs_status save_checkpoint(trainer *t, long epoch, long step) {
  char path[4096];
  checkpoint_path(t->o, path, sizeof path);
  gs_status st = GS_OK;
  /* Replicas are identical: rank 0 writes; everyone learns the outcome. */
  if (t->rank == 0) {
    if (mkdir(t->o->checkpoint_dir, 0777) != 0 && errno != EEXIST)
      st = gs_error(GS_ERR_IO, "train: cannot create %s: %s", t->o->checkpoint_dir,
                    strerror(errno));
    gs_nn_train_state ts = {.epoch = epoch, .step = step, .seed = t->o->seed};
    if (st == GS_OK) st = gs_nn_checkpoint_save(path, t->net, t->opt, &ts);
  }
  int bad = st != GS_OK;
  MPI_Bcast(&bad, 1, MPI_INT, 0, t->metrics);
  if (bad && t->rank != 0)
    st = gs_error(GS_ERR_IO, "train: rank 0 could not write %s", path);
  return st;
}

/* ---- The loop --------------------------------------------------------------------- */

static gs_status setup_engine(trainer *t) {
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = t->o->policy;
  cfg.forward_overlap = 1;
  GS_CHECK(gs_engine_create(t->comm, &cfg, &t->engine));
  t->nparams = gs_nn_param_count(t->net);
  t->ids = gs_calloc(t->nparams, sizeof *t->ids);
  t->pending = gs_calloc(t->nparams, 1);
  if (!t->ids || !t->pending) return GS_ERR_NOMEM;
  for (size_t i = 0; i < t->nparams; i++) {
    const gs_nn_param *p = gs_nn_param_at(t->net, i);
    GS_CHECK(gs_engine_register(t->engine, p->name, p->grad, p->count, GS_F32,
                                &t->ids[i]));
  }
  gs_nn_set_callbacks(t->net, on_grad_ready, before_forward, t);
  return GS_OK;
}

static gs_status load_data(const train_opts *o, gs_nn_dataset *train, gs_nn_dataset *test) {
  if (o->synthetic > 0) {
    GS_CHECK(gs_nn_dataset_synthetic(train, (size_t)o->synthetic, 1, 28, 28, 10, 1.0f, 7));
    return gs_nn_dataset_synthetic(test, (size_t)(o->synthetic / 5 + 1), 1, 28, 28, 10,
                                   1.0f, 7);
  }
  GS_CHECK(gs_nn_fashion_mnist_load(o->data_dir, 1, train));
  return gs_nn_fashion_mnist_load(o->data_dir, 0, test);
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

static void set_lr(trainer *t, const gs_nn_lr_schedule *sched, long step) {
  gs_nn_sgd_set_lr(t->opt, gs_nn_lr_at(sched, step));
}

static int run(trainer *t) {
  const train_opts *o = t->o;
  gs_nn_dataset train = {0}, test = {0};
  gs_nn_sampler sampler = {0};
  float *x = NULL;
  int32_t *y = NULL;
  gs_status st = load_data(o, &train, &test);
  gs_nn_model_options mopt = {.dropout = o->dropout};
  if (st == GS_OK) st = gs_nn_model_create(&t->net, o->model, o->batch, o->seed, &mopt);
  gs_nn_sgd_config scfg = {.lr = o->lr, .momentum = o->momentum,
                           .weight_decay = o->weight_decay, .nesterov = o->nesterov};
  if (st == GS_OK) st = gs_nn_sgd_create(&t->opt, t->net, &scfg);
  if (st == GS_OK) st = gs_nn_sampler_init(&sampler, train.n, t->rank, t->size, o->seed, 1);
  long steps = st == GS_OK ? (long)(sampler.count / (size_t)o->batch) : 0;
  if (o->max_steps > 0 && steps > o->max_steps) steps = o->max_steps;
  if (st == GS_OK && steps == 0)
    st = gs_error(GS_ERR_INVALID_ARG, "train: %zu samples per rank give no full batch of %d",
                  sampler.count, o->batch);
  long start_epoch = 0;
  if (st == GS_OK && o->resume) {
    char path[4096];
    checkpoint_path(o, path, sizeof path);
    gs_nn_train_state ts;
    st = gs_nn_checkpoint_load(path, t->net, t->opt, &ts);
    if (st == GS_OK) start_epoch = ts.epoch;
    if (st == GS_OK && start_epoch >= o->epochs && t->rank == 0 && !o->json)
      printf("checkpoint %s is at epoch %ld: nothing left to train\n", path, start_epoch);
  }
  /* Every replica starts from rank 0's weights. */
  if (st == GS_OK && MPI_Bcast(gs_nn_weights_flat(t->net), (int)gs_nn_param_total(t->net),
                               MPI_FLOAT, 0, t->metrics) != MPI_SUCCESS)
    st = gs_error(GS_ERR_MPI, "train: broadcasting the initial weights failed");
  if (st == GS_OK) st = setup_engine(t);
  if (st == GS_OK) {
    x = gs_malloc((size_t)o->batch * gs_nn_input_size(t->net) * sizeof(float));
    y = gs_malloc((size_t)o->batch * sizeof(int32_t));
    if (!x || !y) st = GS_ERR_NOMEM;
  }

  gs_nn_lr_schedule sched = {.base_lr = o->lr,
                             .warmup_steps = (long)(o->warmup_epochs * steps),
                             .total_steps = (long)o->epochs * steps};
  if (strcmp(o->schedule, "step") == 0) {
    sched.decay = GS_NN_LR_STEP;
    sched.step_size = GS_MAX(1L, (long)o->epochs * steps / 3);
    sched.gamma = 0.1f;
  } else if (strcmp(o->schedule, "cosine") == 0) {
    sched.decay = GS_NN_LR_COSINE;
  }
  double t_start = gs_now(), train_s = 0, last_acc = 0;
  long images = 0;
  for (long epoch = start_epoch; st == GS_OK && epoch < o->epochs; epoch++) {
    st = gs_nn_sampler_set_epoch(&sampler, epoch);
    double e0 = gs_now(), loss_sum = 0;
    long correct = 0, seen = 0;
    gs_engine_stats s0 = {0}, s1 = {0};
    gs_engine_get_stats(t->engine, &s0);
    for (long step = 0; step < steps && st == GS_OK; step++) {
      long gstep = epoch * steps + step;
      st = gs_nn_dataset_gather(&train, sampler.indices + (size_t)step * (size_t)o->batch,
                                o->batch, x, y);
      float loss = 0;
      int ok = 0;
      if (st == GS_OK) st = gs_nn_forward(t->net, x, o->batch, NULL);
      if (st == GS_OK) st = callbacks_status(t);
      /* The forward pass applied the previous step's updates, so the
       * gradient buffers hold that step's averages, the same on every rank:
       * every rank takes the same decision without communicating. */
      if (st == GS_OK && step > 0) st = check_finite(t, epoch, step - 1);
      if (st == GS_OK) st = gs_nn_loss(t->net, y, &loss, &ok);
      if (st == GS_OK) st = gs_nn_backward(t->net);
      if (st == GS_OK) st = callbacks_status(t);
      if (st == GS_OK) st = gs_engine_wait(t->engine);
      if (st != GS_OK) break;
      set_lr(t, &sched, gstep);
      memset(t->pending, 1, t->nparams);
      loss_sum += loss;
      correct += ok;
      seen += o->batch;
      /* A terminal's bar is redrawn at most 5 times a second; a log gets a
       * line every 5% of the epoch. */
      static double last_draw;
      int draw = on_terminal() ? gs_now() - last_draw > 0.2
                               : (step + 1) % GS_MAX(1L, steps / 20) == 0;
      if (t->rank == 0 && step + 1 < steps && draw) {
        last_draw = gs_now();
        gs_engine_get_stats(t->engine, &s1);
        gs_engine_stats d = {.comm_s = s1.comm_s - s0.comm_s, .wait_s = s1.wait_s - s0.wait_s};
        double el = gs_now() - e0;
        progress(t, (int)epoch, step + 1, steps, loss_sum / (step + 1), (double)correct / seen,
                 el > 0 ? seen * t->size / el : 0, hidden_share(&d), 0);
      }
    }
    if (st != GS_OK) break;
    st = flush_updates(t);
    if (st == GS_OK) st = check_finite(t, epoch, steps - 1);
    double epoch_s = gs_now() - e0;
    train_s += epoch_s;
    images += seen * t->size;
    double acc = 0, test_loss = 0;
    if (st == GS_OK) st = evaluate(t, &test, &acc, &test_loss);
    if (st == GS_OK && o->checkpoint_dir) st = save_checkpoint(t, epoch + 1, (epoch + 1) * steps);
    if (st != GS_OK) break;
    last_acc = acc;
    gs_engine_get_stats(t->engine, &s1);
    gs_engine_stats d = {.comm_s = s1.comm_s - s0.comm_s, .wait_s = s1.wait_s - s0.wait_s};
    if (t->rank == 0) {
      if (o->json)
        printf("{\"epoch\": %ld, \"epoch_s\": %.3f, \"train_loss\": %.5f, \"test_loss\": "
               "%.5f, \"test_accuracy\": %.4f, \"images_per_s\": %.1f, \"comm_s\": %.3f, "
               "\"comm_hidden\": %.3f}\n", epoch + 1, epoch_s, loss_sum / steps, test_loss,
               acc, seen * t->size / epoch_s, d.comm_s, hidden_share(&d));
      else {
        progress(t, (int)epoch, steps, steps, loss_sum / steps, (double)correct / seen,
                 seen * t->size / epoch_s, hidden_share(&d), 1);
        printf("epoch %ld: %.1f s, test accuracy %.2f%%, test loss %.4f\n", epoch + 1,
               epoch_s, 100 * acc, test_loss);
      }
      fflush(stdout);
    }
  }
  if (st == GS_OK && t->rank == 0) {
    gs_engine_stats s;
    gs_engine_get_stats(t->engine, &s);
    gs_plan *plan = NULL;
    gs_engine_get_plan(t->engine, &plan);
    const char *chosen = plan ? gs_plan_policy_name(plan->chosen) : "-";
    if (o->json)
      printf("{\"summary\": {\"model\": \"%s\", \"ranks\": %d, \"epochs\": %d, \"batch_per_rank\": "
             "%d, \"policy\": \"%s\", \"chosen\": \"%s\", \"groups\": %zu, \"train_s\": %.3f, "
             "\"wall_s\": %.3f, \"images_per_s\": %.1f, \"test_accuracy\": %.4f, "
             "\"messages\": %llu, \"comm_s\": %.3f, \"comm_hidden\": %.3f}}\n",
             gs_nn_model_name(o->model), t->size, o->epochs, o->batch, o->policy, chosen,
             plan ? plan->ngroups : 0, train_s, gs_now() - t_start,
             train_s > 0 ? images / train_s : 0, last_acc, (unsigned long long)s.messages,
             s.comm_s, hidden_share(&s));
    else
      printf("\nsummary: %s on %d rank(s), %d epoch(s), batch %d per rank\n"
             "  time        %.1f s training, %.1f s in all\n"
             "  throughput  %.0f images/s\n"
             "  accuracy    %.2f%% on the test set\n"
             "  comm        policy %s (plan: %s, %zu messages per step), %llu collectives,\n"
             "              %.1f s communicating, %.0f%% of it hidden behind compute\n",
             gs_nn_model_name(o->model), t->size, o->epochs, o->batch, train_s,
             gs_now() - t_start, train_s > 0 ? images / train_s : 0, 100 * last_acc,
             o->policy, chosen, plan ? plan->ngroups : 0, (unsigned long long)s.messages,
             s.comm_s, 100 * hidden_share(&s));
    gs_plan_free(plan);
  }
  if (st != GS_OK) cli_error(VERB, "rank %d: %s", t->rank, gs_last_error());
  gs_free(x);
  gs_free(y);
  gs_nn_sampler_free(&sampler);
  gs_nn_dataset_free(&train);
  gs_nn_dataset_free(&test);
  return st == GS_OK ? 0 : 1;
}

int cmd_train(int argc, char **argv) {
  train_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : rc;
  if (gs_init(&argc, &argv) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    return 1;
  }
  trainer t = {.o = &o};
  if (gs_comm_create(MPI_COMM_WORLD, &t.comm) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    gs_finalize();
    return 1;
  }
  t.rank = gs_comm_rank(t.comm);
  t.size = gs_comm_size(t.comm);
  /* One compute thread per rank, as the ranks share the machine's cores:
   * OpenBLAS's default of one thread per core makes N ranks run N x cores
   * threads that spin against each other (measured: half the throughput of
   * 4 ranks on 2 cores). GRADSYNC_BLAS_THREADS overrides it. */
  const char *bt = getenv("GRADSYNC_BLAS_THREADS");
  openblas_set_num_threads(bt && atoi(bt) > 0 ? atoi(bt) : 1);
  MPI_Comm_dup(MPI_COMM_WORLD, &t.metrics);
  MPI_Comm_set_errhandler(t.metrics, MPI_ERRORS_RETURN);
  rc = run(&t);
  /* A failure on one rank must not leave the others waiting: agree on the
   * outcome before tearing down. */
  int any = rc;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, t.metrics);
  if (t.engine) gs_engine_destroy(t.engine);
  gs_nn_sgd_destroy(t.opt);
  gs_nn_net_destroy(t.net);
  gs_free(t.ids);
  gs_free(t.pending);
  MPI_Comm_free(&t.metrics);
  gs_comm_destroy(t.comm);
  gs_finalize();
  return any ? 1 : 0;
}
