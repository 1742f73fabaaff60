/* gradsync: the command-line tool. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} verbs[] = {
    {"run", cmd_run, "launch N ranks, optionally on an emulated cluster"},
    {"bench", cmd_bench, "measure collectives against MPI's own"},
    {"plan", cmd_plan, "merge plan and predicted iteration time for a profile"},
    {"train", cmd_train, "train a model across the ranks (Fashion-MNIST; --model dlrm)"},
    {"replay", cmd_replay, "replay a profile's compute, communicating through the engine"},
    {"simulate", cmd_simulate, "simulate training iterations on N workers, event by event"},
    {"syncswitch", cmd_syncswitch, "search Sync-Switch's offline switch point for a job"},
    {"shard", cmd_shard, "plan where a recommendation model's embedding tables live"},
    {"cluster", cmd_cluster, "share a pool of nodes among elastic jobs (serve); simulate its policies"},
    {"submit", cmd_submit, "queue a training job on the cluster manager"},
    {"jobs", cmd_jobs, "the cluster manager's jobs: state, size, progress, resizes"},
    {"cancel", cmd_cancel, "cancel a job of the cluster manager"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: gradsync <command> [options]   (gradsync %s)\n\ncommands:\n",
          GRADSYNC_VERSION);
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help);
  fprintf(f, "\n'gradsync <command> --help' describes a command.\n");
}

/* Errors of the tool itself (no verb yet) speak like the verbs', one line:
 * "gradsync: message (see --help)" (exit status 2). */
static int main_error(const char *what, const char *arg) {
  char clean[512];
  fprintf(stderr, "gradsync: %s%s%s%s (see --help)\n", what, arg ? " '" : "",
          arg ? cli_clean_text(clean, sizeof clean, arg) : "", arg ? "'" : "");
  return 2;
}

int main(int argc, char **argv) {
  cli_blas_check(argv);
  if (argc < 2) {
    /* Every command, from the one table (it named six of twelve). */
    char what[256] = "no command given (";
    size_t w = strlen(what);
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0] && w < sizeof what; i++)
      w += (size_t)snprintf(what + w, sizeof what - w, "%s%s", i ? ", " : "", verbs[i].name);
    if (w < sizeof what) snprintf(what + w, sizeof what - w, ")");
    return main_error(what, NULL);
  }
  if (strcmp(argv[1], "help") == 0 && argc == 3) {
    /* "gradsync help VERB" is "gradsync VERB --help". */
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
      if (strcmp(argv[2], verbs[i].name) == 0) {
        char *hargv[] = {argv[2], "--help", NULL};
        return verbs[i].fn(2, hargv);
      }
    return main_error("help: unknown command", argv[2]);
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    if (argc > 2)
      return main_error("unexpected argument", argv[strcmp(argv[1], "help") == 0 ? 3 : 2]);
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
    if (argc > 2) return main_error("unexpected argument", argv[2]);
    printf("gradsync %s\n", GRADSYNC_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    if (strcmp(argv[1], verbs[i].name) == 0) return verbs[i].fn(argc - 1, argv + 1);
  return main_error(argv[1][0] == '-' ? "unknown option" : "unknown command", argv[1]);
}
