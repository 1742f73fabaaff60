/*
 * gradsync train: data-parallel training of the C models (src/nn) on
 * Fashion-MNIST, with gradients averaged by the engine during backward.
 *
 * This file parses the options into a gs_train_config and runs the training
 * library (gradsync/train.h), which holds the loop, its checks and its
 * agreements between ranks; train_view.c shows its events.
 */
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"
#include "gradsync/nn.h"
#include "gradsync/train.h"

#define VERB "train"

static void usage(FILE *f) {
  fprintf(f,
    "usage: gradsync run -np N [--net RATE] -- gradsync train [options]\n\n"
    "Trains a model on Fashion-MNIST with data parallelism across the ranks;\n"
    "gradients are averaged during backward by gradsync's engine.\n\n"
    "  --model NAME        mlp, cnn (default) or resnet; dlrm is the\n"
    "                      recommendation model (gradsync train --model dlrm\n"
    "                      --help for its own options)\n"
    "  --epochs E          passes over the training set (default 1)\n"
    "  --batch B           samples per rank and step (default 64)\n"
    "  --global-batch G    samples per step over all ranks instead: each rank\n"
    "                      takes G/N (with --ps S: each worker G/(N-S)); kept\n"
    "                      when an elastic job changes size\n"
    "  --scale-lr linear   an elastic job keeps --batch per rank and scales --lr\n"
    "                      by N/N0 (N0: the first run's ranks)\n"
    "  --lr LR             base learning rate (default 0.05)\n"
    "  --momentum M        SGD momentum (default 0.9; 0.5 with --optimizer kfac)\n"
    "  --nesterov          Nesterov momentum\n"
    "  --weight-decay WD   L2 weight decay (default 0)\n"
    "  --schedule S        const (default), step (x0.1 every 1/3 of the run)\n"
    "                      or cosine\n"
    "  --warmup-epochs W   linear learning-rate warm-up (default 0)\n"
    "  --policy P          wfbp, single, bucket[:MB[,first=MB]], mgwfbp,\n"
    "                      optimal, dear or auto (default)\n"
    "  --compress SPEC     send gradients compressed (topk:0.01, gtopk:0.001,\n"
    "                      dgc:0.001, qsgd:16, powersgd:4, fp16, ...; see\n"
    "                      gradsync plan --help): every group, through the\n"
    "                      compressor's own exchange; auto:SPEC lets the plan\n"
    "                      choose per group between dense and SPEC (and the\n"
    "                      exchange), whichever it predicts faster.\n"
    "                      dgc applies momentum inside the compressor (DGC's\n"
    "                      momentum correction): --momentum moves into it, the\n"
    "                      optimizer's becomes 0, and a line on stderr says so\n"
    "                      (a Nesterov --momentum cannot move: an error)\n"
    "  --no-ef             no error feedback (the residual of compression is\n"
    "                      dropped instead of added to the next step)\n"
    "  --ef-decay G        damp the error feedback: the residual becomes\n"
    "                      G*e + g each step (0 < G <= 1; default 1, and\n"
    "                      0.5 for randomk, whose undamped residual diverged)\n"
    "  --compress-warmup-steps N  topk, mstopk, dgc: the density starts at 25%%\n"
    "                      and falls exponentially to SPEC's over N steps\n"
    "  --data DIR          Fashion-MNIST's IDX files (default\n"
    "                      " GS_NN_FASHION_MNIST_DIR ")\n"
    "  --synthetic N       train on N synthetic samples instead (10 classes,\n"
    "                      each a random image plus noise; N/5 + 1 test\n"
    "                      samples of their own, N/5 rounded down)\n"
    "  --data-cache DIR    keep the decoded data set in DIR: later runs and the\n"
    "                      other ranks sharing DIR read it from there\n"
    "  --no-prefetch       gather each batch in the training thread (default:\n"
    "                      a background thread prepares the next batch)\n"
    "  --checkpoint DIR    write DIR/checkpoint.gsck at every epoch's end\n"
    "  --resume[=auto]     continue from DIR/checkpoint.gsck (an epoch's end, or\n"
    "                      a commit: from the step after it); auto: if it exists\n"
    "  --commit-every N    also commit to DIR every N global steps inside epochs\n"
    "                      (weights, optimizer, position; atomic on disk); Ts:\n"
    "                      every T seconds (as 5s), at a step the ranks agree on\n"
    "                      at checks about 0.5 s apart, where SIGUSR1 is taken\n"
    "  --stop-at-step N    commit after global step N and stop (exit 0); --resume\n"
    "                      continues exactly there. SIGUSR1 asks for a stop at the\n"
    "                      next commit (exit 3: an elastic supervisor resizes)\n"
    "  --seed S            initialisation and shuffling seed (default 1)\n"
    "  --max-steps N       at most N steps per epoch (for quick checks)\n"
    "  --dropout P         dropout before the last layer (mlp, cnn)\n"
    "  --precision P       fp32 (default) or bf16: convolutions and linear layers\n"
    "                      in bfloat16 on oneDNN, fp32 weights and reductions\n"
    "                      (needs a CPU with AVX-512 BF16 or AMX)\n"
    "  --json              a JSON line per epoch and a summary line\n"
    "  --optimizer O       sgd (default) or kfac (docs/KFAC.md); with kfac:\n"
    "  --kfac-dist D       dkfac (default), spd or dp\n"
    "  --kfac-inverse M    chol (default) or eig\n"
    "  --kfac-cov-every N  factors every N steps (default 1)\n"
    "  --kfac-inv-every N  inverses every N steps (default 10)\n"
    "  --kfac-damping G    Tikhonov damping (default 0.003)\n"
    "  --kfac-decay X      factors' running-average decay (default 0.95)\n"
    "  --kfac-kl-clip K    KL clip, 0 for none (default 0.001)\n"
    "  --sync MODE         engine (default); with --ps S: bsp, asp, ssp:S,\n"
    "                      switch:offline:F, switch:online[:F]; or local:H,\n"
    "                      post-local:H[:F], delayed:D (docs/SYNC.md)\n"
    "  --ps S              the last S ranks are parameter servers\n"
    "  --straggler R:F[:A-B]  rank R computes F times slower (global steps A..B-1);\n"
    "                         R:+D[:A-B] sleeps D (20ms, 0.5s) after each step instead\n"
    "  --async-lr-scale X  ASP/SSP pushes' learning rate: X times --lr (default\n"
    "                      1/W, W workers: the per-worker batch)\n"
    "  --async-momentum M  ASP/SSP pushes' momentum, at most --momentum (default\n"
    "                      --momentum less 1 - 1/W: asynchrony adds the rest)\n");
}

/* ---- Options ----------------------------------------------------------------- */

/* zspec and zmom receive the compression spec and the momentum rule's
 * outcome (for the announcement of a move). */
static int parse_opts(int argc, char **argv, gs_train_config *o, cli_train_view *view,
                      gs_compress_spec *zspec, gs_compress_momentum *zmom) {
  const struct option *longs = cli_train_longs; /* cli_util.c: train's and run's one list */
  /* K-FAC's options and the events outlive parse_opts: gs_train_run reads
   * them. */
  static gs_train_events events;
  static gs_train_kfac_options kfac;
  gs_train_kfac_options_init(&kfac);
  const char *kfac_opt = NULL; /* the first --kfac-* option given */
  int momentum_given = 0;
  cli_seen seen = {{0}};
  gs_train_config_init(o);
  cli_train_events(view, &events);
  o->events = &events;
  gs_compress_spec_parse(NULL, zspec); /* off until --compress */
  int c;
  long n;
  optind = 1;
  opterr = 0; /* unknown options get one line in the verbs' format */
  /* ':' first: a missing value is told from an unknown option (until
   * 2026-12-06 both said "is unknown or needs a value"). */
  while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
    /* An option given twice is a mistake to point out, not a silent
     * last-one-wins. */
    if (c > 0 && c != '?' && c != ':' && c != 'h' && cli_once(VERB, &seen, c, longs)) return 2;
    switch (c) {
      case 'm':
        if (gs_nn_model_parse(optarg, &o->model) != GS_OK) {
          cli_error(VERB, "unknown --model '%s' (mlp, cnn, resnet or dlrm)", optarg);
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
        float f = 0;
        if (cli_parse_float(optarg, 0, hi, &f) || (c == 'l' && f == 0)) {
          cli_error(VERB, "--%s '%s' must be a number %s 0 %s %g",
                    c == 'l' ? "lr" : c == 'M' ? "momentum" : c == 'W' ? "weight-decay"
                    : "dropout", optarg, c == 'l' ? "above" : "from",
                    c == 'l' ? "and at most" : "to", hi);
          return 2;
        }
        if (c == 'l') o->lr = f;
        else if (c == 'M') { o->momentum = f; momentum_given = 1; }
        else if (c == 'W') o->weight_decay = f;
        else o->dropout = f;
        break;
      }
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
      case 'Z':
        /* The spec is checked here (exit 2) and agreed between ranks by
         * the engine. */
        if (cli_compress_arg(VERB, optarg)) return 2;
        if (gs_compress_spec_parse(optarg, zspec) != GS_OK) {
          cli_error(VERB, "--compress: %s", gs_last_error());
          return 2;
        }
        o->compress = optarg;
        break;
      case 'E': o->no_ef = 1; break;
      case 'F':
        /* A float: 1e-50 became 0, which reads as the kind's default. */
        if (cli_parse_float(optarg, 0, 1, &o->ef_decay) || o->ef_decay == 0) {
          cli_error(VERB, "--ef-decay '%s' must be a number above 0 and at most 1 (a float: "
                    "at least %g)", optarg, (double)FLT_MIN);
          return 2;
        }
        break;
      case 'U':
        if (cli_parse_long(optarg, 0, 100000000, &n)) {
          cli_error(VERB, "--compress-warmup-steps '%s' must be an integer from 0 to "
                    "100000000", optarg);
          return 2;
        }
        o->compress_warmup_steps = n;
        break;
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
      case 'T':
      case 'z':
        /* --commit-every 5s: by time (rank 0's clock), not steps. */
        if (c == 'T' && (n = cli_parse_seconds_suffix(optarg, 0.001, 1e9,
                                                      &o->commit_every_s)) != 1) {
          if (n == 0) break;
          cli_error(VERB, "--commit-every '%s': seconds must be a number from 0.001 to "
                    "1e9 (as 5s), or steps an integer", optarg);
          return 2;
        }
        if (cli_parse_long(optarg, 1, 1000000000, &n)) {
          cli_error(VERB, "--%s '%s' must be an integer from 1 to 1000000000",
                    c == 'T' ? "commit-every" : "stop-at-step", optarg);
          return 2;
        }
        if (c == 'T') o->commit_every = n;
        else o->stop_at_step = n;
        break;
      case 'r':
        if (optarg && strcmp(optarg, "auto") != 0) {
          cli_error(VERB, "--resume=%s: the only value is auto (resume if there is a "
                    "checkpoint)", optarg);
          return 2;
        }
        o->resume = optarg ? GS_TRAIN_RESUME_IF_ANY : 1;
        break;
      case 'B':
        if (cli_parse_int(optarg, 1, 1 << 24, &o->global_batch)) {
          cli_error(VERB, "--global-batch '%s' must be an integer from 1 to %d", optarg,
                    1 << 24);
          return 2;
        }
        break;
      case 'L':
        if (strcmp(optarg, "linear") != 0) {
          cli_error(VERB, "--scale-lr '%s': the only rule is linear", optarg);
          return 2;
        }
        o->scale_lr_linear = 1;
        break;
      case 's':
        if (cli_parse_long(optarg, 0, LONG_MAX, &n)) {
          cli_error(VERB, "--seed '%s' must be an integer from 0 to %ld", optarg, LONG_MAX);
          return 2;
        }
        o->seed = (uint64_t)n;
        break;
      case 'j': view->json = 1; break;
      case 'C':
        if (!*optarg) {
          cli_error(VERB, "--data-cache needs a directory");
          return 2;
        }
        o->data_cache = optarg;
        break;
      case 'P': o->prefetch = 0; break;
      case 'R':
        if (strcmp(optarg, "fp32") && strcmp(optarg, "bf16")) {
          cli_error(VERB, "--precision '%s' must be fp32 or bf16", optarg);
          return 2;
        }
        o->precision = optarg;
        break;
      case 'O':
        if (strcmp(optarg, "sgd") && strcmp(optarg, "kfac")) {
          cli_error(VERB, "--optimizer '%s' must be sgd or kfac", optarg);
          return 2;
        }
        o->optimizer = optarg;
        break;
      case 'K':
      case 'I':
      case 'v':
      case 'i':
      case 'g':
      case 'X':
      case 'k': {
        const char *name = "?";
        for (const struct option *l = longs; l->name; l++)
          if (l->val == c) name = l->name;
        if (!kfac_opt) kfac_opt = name;
        int bad = 0;
        if (c == 'K') bad = gs_kfac_dist_parse(optarg, &kfac.dist) != GS_OK;
        else if (c == 'I') bad = gs_kfac_inverse_parse(optarg, &kfac.inverse) != GS_OK;
        else if (c == 'v') bad = cli_parse_int(optarg, 1, 1000000, &kfac.cov_every);
        else if (c == 'i') bad = cli_parse_int(optarg, 1, 1000000, &kfac.inv_every);
        else {
          /* Floats: a damping of 1e-50 became 0 (refused by K-FAC on every
           * rank, exit 1), a clip of 1e-50 no clip. */
          float f = 0;
          bad = cli_parse_float(optarg, 0, c == 'g' ? 1e6 : c == 'X' ? 1 : 1e6, &f) ||
                (c == 'g' && f == 0) || (c == 'X' && f >= 1);
          if (!bad && c == 'g') kfac.damping = f;
          if (!bad && c == 'X') kfac.decay = f;
          if (!bad && c == 'k') kfac.kl_clip = f;
        }
        if (bad) {
          /* The floats' limits as cli_parse_float checks them: nothing
           * between 0 and the smallest normal float. */
          char lim[96];
          snprintf(lim, sizeof lim, "(a float: %s%g)", c == 'g' ? "at least " : "0 or from ",
                   (double)FLT_MIN);
          static const char *const want[] = {
              ['K'] = "dkfac, spd or dp", ['I'] = "chol or eig",
              ['v'] = "an integer from 1 to 1000000", ['i'] = "an integer from 1 to 1000000",
              ['g'] = "a number above 0 and at most 1e6",
              ['X'] = "a number from 0 to below 1",
              ['k'] = "a number from 0 (no clip) to 1e6"};
          cli_error(VERB, "--%s '%s' must be %s%s%s", name, optarg, want[c],
                    c == 'g' || c == 'k' || c == 'X' ? " " : "",
                    c == 'g' || c == 'k' || c == 'X' ? lim : "");
          return 2;
        }
        break;
      }
      case 'Y': o->sync = optarg; break; /* checked below */
      case 'Q':
        if (cli_parse_int(optarg, 1, 65535, &o->ps_servers)) {
          cli_error(VERB, "--ps '%s' must be a server count from 1 to 65535", optarg);
          return 2;
        }
        break;
      case 'G': o->straggler = optarg; break; /* checked below */
      case 'A':
        if (cli_parse_float(optarg, 0, 1000, &o->async_lr_scale) || o->async_lr_scale == 0) {
          cli_error(VERB, "--async-lr-scale '%s' must be a number above 0 and at most 1000",
                    optarg);
          return 2;
        }
        break;
      case 'a':
        if (cli_parse_float(optarg, 0, 0.999, &o->async_momentum)) {
          cli_error(VERB, "--async-momentum '%s' must be a number from 0 to 0.999", optarg);
          return 2;
        }
        break;
      case 'h': usage(stdout); return 1;
      default: return cli_getopt_error(VERB, c, argv, longs);
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  /* The names the library resolves: the sync mode, the straggler. */
  if (gs_train_config_check(o) != GS_OK) {
    cli_error(VERB, "%s", gs_last_error());
    return 2;
  }
  if ((o->no_ef || o->compress_warmup_steps || o->ef_decay > 0) && !o->compress) {
    cli_error(VERB, "--no-ef, --ef-decay and --compress-warmup-steps need --compress "
              "SPEC");
    return 2;
  }
  if (o->ef_decay > 0 && zspec->own_ef) {
    cli_error(VERB, "--ef-decay does not apply to --compress %s: %s keeps its residual "
              "its own way and does not damp it", zspec->normalised, zspec->kind);
    return 2;
  }
  if (o->no_ef && o->ef_decay > 0) {
    cli_error(VERB, "--ef-decay damps the error feedback that --no-ef turns off: "
              "give one of them");
    return 2;
  }
  if (kfac_opt && strcmp(o->optimizer, "kfac") != 0) {
    cli_error(VERB, "--%s applies to --optimizer kfac only", kfac_opt);
    return 2;
  }
  if (strcmp(o->optimizer, "kfac") == 0 && !momentum_given)
    o->momentum = GS_TRAIN_KFAC_MOMENTUM;
  /* A compressor that applies momentum itself (dgc) takes the optimizer's
   * (gs_compress_spec_momentum); cmd_train announces the move. There is no
   * option for the compressor's momentum: it is --momentum. */
  if (gs_compress_spec_momentum(zspec, o->momentum, o->nesterov, -1, zmom) != GS_OK) {
    cli_error(VERB, "--momentum %g%s with --compress: %s", (double)o->momentum,
              o->nesterov ? " --nesterov" : "", gs_last_error());
    return 2;
  }
  if (zmom->moved) {
    o->compress_momentum = zmom->compressor;
    o->momentum = zmom->optimizer;
  }
  if (strcmp(o->optimizer, "kfac") == 0) o->kfac = &kfac;
  if (o->global_batch > 0 && (seen.seen['b'] || o->scale_lr_linear)) {
    cli_error(VERB, "--global-batch sets the batch per rank: not with --batch or --scale-lr");
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
  if (o->ps_servers > 0 && !gs_train_sync_uses_servers(o->sync)) {
    cli_error(VERB, "--ps %d needs a parameter-server --sync (bsp, asp, ssp:S, "
              "switch:offline:F or switch:online[:F]), not '%s'", o->ps_servers, o->sync);
    return 2;
  }
  /* The policy schedules the engine's messages: a sync mode with its own
   * exchange would leave --policy unused. */
  if (seen.seen['p'] && o->sync && strcmp(o->sync, "engine") != 0) {
    cli_error(VERB, "--policy %s: the policy schedules the engine's messages, and --sync %s "
              "exchanges through its own %s: leave it out", o->policy, o->sync,
              o->ps_servers > 0 ? "parameter servers" : "averaging");
    return 2;
  }
  if ((seen.seen['A'] || seen.seen['a']) &&
      (o->ps_servers == 0 || (o->sync && strcmp(o->sync, "bsp") == 0))) {
    cli_error(VERB, "--async-lr-scale and --async-momentum apply to asynchronous parameter "
              "servers (--ps S with --sync asp, ssp:S or switch:...)%s",
              o->ps_servers > 0 ? ", not to bsp" : "");
    return 2;
  }
  if (seen.seen['a'] && o->async_momentum > o->momentum) {
    cli_error(VERB, "--async-momentum %g is above --momentum %g: asynchrony adds momentum, "
              "it cannot take the place of less", (double)o->async_momentum,
              (double)o->momentum);
    return 2;
  }
  if (o->ps_servers == 0 && gs_train_sync_uses_servers(o->sync)) {
    cli_error(VERB, "--sync %s runs over parameter servers: it needs --ps S", o->sync);
    return 2;
  }
  if (o->warmup_epochs > o->epochs) {
    cli_error(VERB, "--warmup-epochs %g is longer than the run (--epochs %d)", o->warmup_epochs,
              o->epochs);
    return 2;
  }
  return 0;
}

/* --model dlrm (or --model=dlrm) anywhere on the line: the DLRM trainer
 * (cmd_train_dlrm.c), whose options are its own. */
static int wants_dlrm(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--model=dlrm") == 0) return 1;
    if (strcmp(argv[i], "--model") == 0 && i + 1 < argc && strcmp(argv[i + 1], "dlrm") == 0)
      return 1;
  }
  return 0;
}

int cmd_train(int argc, char **argv) {
  /* (with GRADSYNC_CHECK_ARGS=1 the DLRM trainer too checks and returns) */
  if (wants_dlrm(argc, argv)) return cmd_train_dlrm(argc, argv);
  gs_train_config cfg;
  static cli_train_view view;
  gs_compress_spec zspec;
  gs_compress_momentum zmom = {0};
  /* The options are every rank's alike: rank 0 alone says what is wrong. */
  cli_argv_errors(1);
  int rc = parse_opts(argc, argv, &cfg, &view, &zspec, &zmom);
  cli_argv_errors(0);
  if (rc == 1) return 0; /* --help */
  /* `gradsync submit` checks a job's options before queueing it: with
   * GRADSYNC_CHECK_ARGS=1 the options are checked and nothing is run. */
  const char *check_only = getenv("GRADSYNC_CHECK_ARGS");
  if (check_only && strcmp(check_only, "1") == 0) {
    if (rc == 0 && cfg.checkpoint_dir)
      rc = cli_check_out_dir(VERB, "--checkpoint", cfg.checkpoint_dir);
    return rc;
  }
  /* SIGUSR1 (which mpirun forwards to the ranks): stop at the next commit.
   * Routed to a thread of its own before any thread that computes starts:
   * a handler on a thread inside oneDNN's GEMM kernels corrupts the heap
   * (gs_signal_route). */
  if (gs_signal_route(SIGUSR1, gs_train_request_stop) != GS_OK) {
    fprintf(stderr, "gradsync %s: %s\n", VERB, gs_last_error());
    return 1;
  }
  cli_rank r;
  if (cli_rank_init(&r, VERB, &argc, &argv)) return rc ? rc : 1;
  rc = cli_rank_connect(&r, CLI_RANK_BLAS, rc, "bad options");
  if (rc) return rc;
  if (zmom.moved && r.rank == 0)
    fprintf(stderr, "gradsync %s: --compress %s applies momentum inside the compressor "
            "(DGC's momentum correction): --momentum %g moved into it, and the "
            "optimizer's momentum is 0\n", VERB, cfg.compress, (double)zmom.compressor);
  /* K-FAC preconditions the averaged gradient the exchange delivers: a
   * lossy one (sparsified, quantised) is amplified along low curvature. */
  if (r.rank == 0 && cfg.compress && cfg.optimizer && strcmp(cfg.optimizer, "kfac") == 0 &&
      !zspec.off && strcmp(zspec.kind, "fp16") != 0 && strcmp(zspec.kind, "bf16") != 0)
    fprintf(stderr, "gradsync %s: note: --optimizer kfac preconditions the gradient that "
            "--compress %s delivers; with a lossy compressor it trained worse than either "
            "alone (docs/KFAC.md): fp16 or bf16 keep K-FAC's accuracy\n", VERB, cfg.compress);
  if (r.rank == 0 && cfg.checkpoint_dir && !cfg.resume)
    cli_warn_checkpoint_replaced(VERB, cfg.checkpoint_dir, 0);
  gs_train_ranks ranks = {.job = VERB, .comm = r.comm, .rank = r.rank, .size = r.size,
                          .usage_note = " (see --help)"};
  gs_train_result res;
  rc = gs_train_run(&cfg, &ranks, &res);
  int asked = rc == 0 && res.stop_requested;
  gs_train_result_free(&res);
  rc = cli_rank_finish(&r, rc);
  /* Stopped at a commit as asked: the supervisor's cue to relaunch. */
  return rc == 0 && asked ? 3 : rc;
}
