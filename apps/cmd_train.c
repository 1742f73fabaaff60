/*
 * gradsync train: data-parallel training of the C models (src/nn) on
 * Fashion-MNIST, with gradients averaged by the engine during backward.
 *
 * This file parses the options into a train_config and runs the training
 * library (src/train/train.h), which holds the loop, its checks, its
 * agreements between ranks and its output.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"
#include "gradsync/nn.h"
#include "train.h"

#define VERB "train"

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
    "  --data-cache DIR    keep the decoded data set in DIR: later runs and the\n"
    "                      other ranks sharing DIR read it from there\n"
    "  --no-prefetch       gather each batch in the training thread (default:\n"
    "                      a background thread prepares the next batch)\n"
    "  --checkpoint DIR    write DIR/checkpoint.gsck at every epoch's end\n"
    "  --resume            continue from DIR/checkpoint.gsck\n"
    "  --seed S            initialisation and shuffling seed (default 1)\n"
    "  --max-steps N       at most N steps per epoch (for quick checks)\n"
    "  --dropout P         dropout before the last layer (mlp, cnn)\n"
    "  --json              a JSON line per epoch and a summary line\n");
}

/* ---- Options ----------------------------------------------------------------- */

static int parse_opts(int argc, char **argv, train_config *o) {
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
      {"data-cache", required_argument, 0, 'C'}, {"no-prefetch", no_argument, 0, 'P'},
      {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
  unsigned char seen[128] = {0};
  train_config_init(o);
  int c;
  double v;
  long n;
  optind = 1;
  opterr = 0; /* unknown options get one line in the verbs' format */
  while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    /* An option given twice is a mistake to point out, not a silent
     * last-one-wins. */
    if (c > 0 && c < 128 && c != '?' && c != 'h' && seen[c]++) {
      const char *name = "?";
      for (const struct option *l = longs; l->name; l++)
        if (l->val == c) name = l->name;
      cli_error(VERB, "--%s is given more than once", name);
      return 2;
    }
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
      case 'C':
        if (!*optarg) {
          cli_error(VERB, "--data-cache needs a directory");
          return 2;
        }
        o->data_cache = optarg;
        break;
      case 'P': o->prefetch = 0; break;
      case 'h': usage(stdout); return 1;
      default:
        cli_error(VERB, "option '%s' is unknown or needs a value", argv[optind - 1]);
        return 2;
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
  /* Options that cannot apply together. */
  if (o->synthetic > 0 && o->data_dir) {
    cli_error(VERB, "--synthetic and --data cannot be used together (one data set)");
    return 2;
  }
  if (o->synthetic > 0 && o->data_cache) {
    cli_error(VERB, "--data-cache caches a data set read from files: not with --synthetic");
    return 2;
  }
  if (o->dropout > 0 && o->model == GS_NN_MODEL_RESNET) {
    cli_error(VERB, "--dropout applies to the mlp and cnn models, not to resnet");
    return 2;
  }
  if (o->nesterov && o->momentum == 0) {
    cli_error(VERB, "--nesterov needs a momentum above 0 (--momentum 0 was given)");
    return 2;
  }
  if (o->warmup_epochs > o->epochs) {
    cli_error(VERB, "--warmup-epochs %g is longer than the run (--epochs %d)", o->warmup_epochs,
              o->epochs);
    return 2;
  }
  return 0;
}

int cmd_train(int argc, char **argv) {
  train_config cfg;
  int rc = parse_opts(argc, argv, &cfg);
  if (rc == 1) return 0; /* --help */
  cli_rank r;
  if (cli_rank_init(&r, VERB, &argc, &argv)) return rc ? rc : 1;
  rc = cli_rank_connect(&r, CLI_RANK_BLAS, rc, "bad options");
  if (rc) return rc;
  train_ranks ranks = {.verb = VERB, .comm = r.comm, .rank = r.rank, .size = r.size};
  rc = train_run(&cfg, &ranks, NULL);
  return cli_rank_finish(&r, rc);
}
