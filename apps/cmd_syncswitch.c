/*
 * gradsync syncswitch search: finds Sync-Switch's offline switch point for a
 * recurring job, by the halving search of Li et al. (ICDCS'21; their runs
 * try BSP shares of 50, 25, 12.5 and 6.25%). It trains the job once under
 * BSP over the parameter servers, then under switch:offline:F, bisecting F
 * between 0 (all ASP) and 1 (all BSP): a share whose final test accuracy is
 * within --tolerance points of BSP's is accepted and the search goes lower,
 * otherwise higher. The answer is the smallest accepted share.
 *
 * Every trial is a child `gradsync run ... -- gradsync train ... --json`,
 * whose summary line gives the accuracy and the training time.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync syncswitch search -np N --ps S [--net RATE] [--tolerance PTS]\n"
          "                                  [--steps K] [--json] [-- TRAIN OPTIONS...]\n\n"
          "Finds the smallest BSP share F of --sync switch:offline:F whose test accuracy\n"
          "is within PTS points (default 0.5) of BSP's, for the training job given by\n"
          "TRAIN OPTIONS (as for gradsync train; --ps, --sync and --json are set here).\n"
          "K halving steps (1 to 10, default 4) bisect F between 0 and 1 (resolution\n"
          "1/2^K). --net RATE shapes the emulated links as gradsync run --net does.\n"
          "Each trial trains the whole job: K + 1 runs in all.\n");
}

typedef struct {
  double acc; /* percent */
  double train_s;
} trial;

/* A trial's options for gradsync train, from a: the TRAIN OPTIONS, then
 * --ps S --sync SYNC --json (psbuf holds S); returns the next slot. */
static int trial_options(char **argv, int a, char **train_args, int ntrain, const char *psbuf,
                         const char *sync) {
  for (int i = 0; i < ntrain; i++) argv[a++] = train_args[i];
  argv[a++] = "--ps";
  argv[a++] = (char *)psbuf;
  argv[a++] = "--sync";
  argv[a++] = (char *)sync;
  argv[a++] = "--json";
  argv[a] = NULL;
  return a;
}

/* Runs one training job; returns 0 with its summary, 2 when the job ended
 * with the usage exit (gradsync train refused its options on this world
 * size: checks no run before it could make), or -1. */
static int run_trial(const char *self, int np, int ps, const char *net, const char *sync,
                     char **train_args, int ntrain, trial *out) {
  char npbuf[16], psbuf[16];
  snprintf(npbuf, sizeof npbuf, "%d", np);
  snprintf(psbuf, sizeof psbuf, "%d", ps);
  char **argv = calloc((size_t)ntrain + 20, sizeof *argv);
  if (!argv) return -1;
  int a = 0;
  argv[a++] = (char *)self;
  argv[a++] = "run";
  argv[a++] = "-np";
  argv[a++] = npbuf;
  if (net) {
    argv[a++] = "--net";
    argv[a++] = (char *)net;
  }
  argv[a++] = "--";
  argv[a++] = (char *)self;
  argv[a++] = "train";
  trial_options(argv, a, train_args, ntrain, psbuf, sync);
  int fd[2];
  if (pipe(fd) != 0) {
    free(argv);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    execv(self, argv);
    _exit(127);
  }
  free(argv);
  close(fd[1]);
  if (pid < 0) {
    close(fd[0]);
    return -1;
  }
  FILE *f = fdopen(fd[0], "r");
  char line[65536];
  int found = 0;
  while (f && fgets(line, sizeof line, f)) {
    cJSON *j = cJSON_Parse(line);
    cJSON *s = j ? cJSON_GetObjectItem(j, "summary") : NULL;
    cJSON *acc = s ? cJSON_GetObjectItem(s, "test_accuracy") : NULL;
    cJSON *ts = s ? cJSON_GetObjectItem(s, "train_s") : NULL;
    if (cJSON_IsNumber(acc) && cJSON_IsNumber(ts)) {
      out->acc = 100.0 * acc->valuedouble; /* train's JSON: a fraction */
      out->train_s = ts->valuedouble;
      found = 1;
    }
    cJSON_Delete(j);
  }
  if (f) fclose(f);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) return 2;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return found ? 0 : -1;
}

/* Whether arg is option name ("--sync") or its "--sync=VALUE" form. */
static int is_option(const char *arg, const char *name) {
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

int cmd_syncswitch(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "search") != 0) {
    cli_error("syncswitch", "unknown action '%s' (search)", argv[1]);
    return 2;
  }
  int np = 0, ps = 0, steps = 4, json = 0, i;
  double tol = 0.5;
  const char *net = NULL;
  static const char *const once[] = {"-np", "--ps", "--net", "--tolerance", "--steps", "--json"};
  int seen[6] = {0};
  for (i = 2; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    for (int k = 0; k < 6; k++)
      if (strcmp(a, once[k]) == 0 && seen[k]++) {
        cli_error("syncswitch", "%s is given more than once", a);
        return 2;
      }
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "-np") == 0) {
      if (!has || cli_parse_int(argv[++i], 2, 1 << 16, &np) != 0) {
        cli_error("syncswitch", "-np needs a rank count of at least 2");
        return 2;
      }
    } else if (strcmp(a, "--ps") == 0) {
      if (!has || cli_parse_int(argv[++i], 1, 1 << 16, &ps) != 0) {
        cli_error("syncswitch", "--ps needs a server count of at least 1");
        return 2;
      }
    } else if (strcmp(a, "--net") == 0) {
      if (!has) {
        cli_error("syncswitch", "--net needs a rate");
        return 2;
      }
      net = argv[++i];
      /* Checked here as `gradsync run` checks it: a bad rate is usage (2),
       * not a failed BSP trial (1). */
      double bps;
      if (cli_link_net_arg("syncswitch", net, &bps) != 0) return 2;
    } else if (strcmp(a, "--tolerance") == 0) {
      if (!has || cli_parse_double(argv[++i], 0, 100, &tol) != 0) {
        cli_error("syncswitch", "--tolerance needs accuracy points from 0 to 100");
        return 2;
      }
    } else if (strcmp(a, "--steps") == 0) {
      if (!has || cli_parse_int(argv[++i], 1, 10, &steps) != 0) {
        cli_error("syncswitch", "--steps needs 1 to 10 halving steps");
        return 2;
      }
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else {
      cli_error("syncswitch", "unknown option '%s'", a);
      return 2;
    }
  }
  if (np == 0 || ps == 0) {
    cli_error("syncswitch", "needs %s", np == 0 && ps == 0
              ? "-np N and --ps S (the job's ranks, and how many of them are servers)"
              : np == 0 ? "-np N (the job's ranks)" : "--ps S (how many of the ranks are servers)");
    return 2;
  }
  if (ps >= np) {
    cli_error("syncswitch", "--ps %d on -np %d: at least one rank must be a worker (1 <= S < N)",
              ps, np);
    return 2;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    cli_error("syncswitch", "cannot find the gradsync binary: %s", strerror(errno));
    return 2;
  }
  self[n] = '\0';
  char **train_args = argv + i;
  int ntrain = argc - i;
  /* The trials set these; one among the TRAIN OPTIONS was said to be
   * "given more than once" by the first trial, which then "failed" (1). */
  for (int k = 0; k < ntrain; k++) {
    static const char *const ours[] = {"--ps", "--sync", "--json"};
    for (int q = 0; q < 3; q++)
      if (is_option(train_args[k], ours[q])) {
        cli_error("syncswitch", "TRAIN OPTIONS: %s is set by syncswitch (--ps S before "
                  "'--', --sync for each trial, --json to read its results)", ours[q]);
        return 2;
      }
  }
  /* Every trial trains from scratch: trials sharing a checkpoint directory
   * would resume one from another's run (with --resume=auto the second
   * trial failed, "the checkpoint's run had 'bsp', this run has 'switch'"),
   * or a trial from an old run's checkpoint. */
  for (int k = 0; k < ntrain; k++) {
    static const char *const fresh[] = {"--checkpoint", "--resume", "--commit-every",
                                        "--stop-at-step"};
    for (int q = 0; q < 4; q++)
      if (is_option(train_args[k], fresh[q])) {
        cli_error("syncswitch", "TRAIN OPTIONS: %s: every trial of the search trains "
                  "from scratch, so it takes no checkpoint options (run the chosen "
                  "--sync with gradsync train to checkpoint it)", fresh[q]);
        return 2;
      }
  }
  /* DLRM's training has no parameter servers, so no Sync-Switch. */
  if (cli_option_is(train_args, ntrain, "--model", "dlrm")) {
    cli_error("syncswitch", "TRAIN OPTIONS: --model dlrm has no parameter servers, so no "
              "Sync-Switch to search (mlp, cnn or resnet)");
    return 2;
  }
  /* Options the trainer refuses are refused here, before any run. */
  char why[1024], psbuf[16];
  snprintf(psbuf, sizeof psbuf, "%d", ps);
  char **targs = calloc((size_t)ntrain + 8, sizeof *targs);
  if (!targs) {
    cli_fail("syncswitch", "out of memory");
    return 1;
  }
  int nt = trial_options(targs, 0, train_args, ntrain, psbuf, "switch:offline:0.5");
  int crc = cli_check_train_args(targs, nt, why, sizeof why);
  free(targs);
  if (crc != 0) {
    cli_error("syncswitch", "TRAIN OPTIONS: %s", *why ? why : "refused by gradsync train");
    return crc == 2 ? 2 : 1;
  }
  trial bsp;
  int trc = run_trial(self, np, ps, net, "bsp", train_args, ntrain, &bsp);
  if (trc == 2) {
    /* Usage, as train's checks before the run (until 2026-12-07: exit 1). */
    cli_error("syncswitch", "TRAIN OPTIONS: refused by gradsync train on -np %d --ps %d "
              "(its reason above)", np, ps);
    return 2;
  }
  if (trc != 0) {
    cli_fail("syncswitch", "the BSP run failed (see its output above)");
    return 1;
  }
  if (!json)
    printf("bsp: test accuracy %.2f%%, %.1f s\n", bsp.acc, bsp.train_s);
  double lo = 0, hi = 1, best = 1;
  trial best_t = bsp;
  cJSON *runs = cJSON_CreateArray();
  for (int k = 0; k < steps; k++) {
    double f = (lo + hi) / 2;
    char sync[64];
    snprintf(sync, sizeof sync, "switch:offline:%g", f);
    trial t;
    trc = run_trial(self, np, ps, net, sync, train_args, ntrain, &t);
    if (trc != 0) {
      cli_fail("syncswitch", "the run with --sync %s failed (see its output above)", sync);
      cJSON_Delete(runs);
      return trc == 2 ? 2 : 1;
    }
    int ok = t.acc >= bsp.acc - tol;
    if (!json)
      printf("%s: test accuracy %.2f%%, %.1f s: %s\n", sync, t.acc, t.train_s,
             ok ? "within the tolerance" : "too far from BSP");
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "fraction", f);
    cJSON_AddNumberToObject(r, "test_accuracy", t.acc / 100);
    cJSON_AddNumberToObject(r, "train_s", t.train_s);
    cJSON_AddBoolToObject(r, "accepted", ok);
    cJSON_AddItemToArray(runs, r);
    if (ok) {
      hi = f;
      best = f;
      best_t = t;
    } else {
      lo = f;
    }
  }
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "bsp_accuracy", bsp.acc / 100);
    cJSON_AddNumberToObject(o, "bsp_train_s", bsp.train_s);
    cJSON_AddNumberToObject(o, "tolerance", tol);
    cJSON_AddNumberToObject(o, "fraction", best);
    cJSON_AddNumberToObject(o, "accuracy", best_t.acc / 100);
    cJSON_AddNumberToObject(o, "train_s", best_t.train_s);
    cJSON_AddItemToObject(o, "runs", runs);
    cli_print_json(stdout, o);
  } else {
    cJSON_Delete(runs);
    printf("switch point: --sync switch:offline:%g (test accuracy %.2f%% against BSP's %.2f%%, "
           "%.1f s against %.1f s)\n",
           best, best_t.acc, bsp.acc, best_t.train_s, bsp.train_s);
  }
  return 0;
}
