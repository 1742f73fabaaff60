/*
 * gradsync cluster: sharing a pool of nodes among training jobs (issue 39;
 * docs/CLUSTER.md, "Sharing a cluster: policies and the simulator").
 *
 * `gradsync cluster simulate` replays a job trace under the manager's
 * allocation policies (gradsync/cluster_sim.h, library src/cluster); every
 * other subcommand (the manager itself: serve, drain, undrain, down) goes
 * to gs_cmd_cluster_manager (apps/cmd_cluster_mgr.c).
 * Exit status: 0 on success, 2 on bad options or input (a workload or speed
 * table that cannot be read or has a bad line, an unknown policy, a pool of
 * 0 nodes, an unwritable --trace-out), 1 on a failure of the simulation.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"
#include "gradsync/cluster_sim.h"
#include "cli_shares.h"

#define VERB "cluster simulate"
#define CSIM_MAX_NODES (1 << 20)


static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync cluster simulate --workload CSV --nodes N [--gpus-per-node G]\n"
          "                                 [--tables PATH] [--policy P|all]\n"
          "                                 [--restart-penalty S] [--start-penalty S]\n"
          "                                 [--learn-curves W|Ts [--share-speeds]\n"
          "                                 [--restart-prior]]\n"
          "                                 [--interference K]\n"
          "                                 [--commit-work W | --commit-time S\n"
          "                                 [--check-every S]] [--discover-every S]\n"
          "                                 [--launch-delay S]\n"
          "                                 [--interval S]\n"
          "                                 [--time-limit S] [--fairness-weight A]\n"
          "                                 [--fairness-window S]\n"
          "                                 [--adjust-weight B] [--node-loss T:K]\n"
          "                                 [--user-share USER:W] [--user-limit USER:N]\n"
          "                                 [--account-share ACCOUNT:W]\n"
          "                                 [--account-limit ACCOUNT:N]\n"
          "                                 [--json] [--trace-out FILE]\n"
          "\nReplays a trace of training jobs on a pool of N whole nodes, event by\n"
          "event (arrivals, completions, a re-allocation every --interval, a node\n"
          "loss), under the cluster manager's allocation policies, and reports\n"
          "utilisation, fairness loss (Dorm's), finish-time fairness (Themis' rho),\n"
          "mean and p99 job completion time and makespan (docs/CLUSTER.md).\n\n"
          "  --workload CSV       Pollux's workload (name,time,application,\n"
          "                       num_replicas,batch_size) or gradsync's\n"
          "                       (name,time,model,nodes,samples[,min_nodes,\n"
          "                       max_nodes,weight,commit_samples,user,account]:\n"
          "                       commit_samples a job's own commit interval for\n"
          "                       --commit-work); either may have the columns\n"
          "                       user and account (a path, science/physics),\n"
          "                       whose shares and limits the options below set\n"
          "                       as serve's do, and a table of node-hours by\n"
          "                       account (and by user where none) follows\n"
          "  --tables PATH        Pollux: the directory of step-time tables\n"
          "                       (APP/placements.csv, scalability.csv,\n"
          "                       validation-BATCH.csv; default ../traces beside\n"
          "                       the workload's directory); gradsync: the speed\n"
          "                       table model,nodes,step_time_s,samples_per_step\n"
          "                       [,start_s][,end_s] (a launch's start-up, every\n"
          "                       launch; the end after the last step, once)\n"
          "  --nodes N            nodes in the pool, 1 to %d\n"
          "  --gpus-per-node G    GPUs per node for Pollux's tables (default 4)\n"
          "  --policy P|all       static, dorm, goodput, or all (default all)\n"
          "  --restart-penalty S  seconds without progress charged per resize and\n"
          "                       per resumption (default 30)\n"
          "  --start-penalty S    seconds without progress at a job's first start\n"
          "                       (its launch and set-up; default 0)\n"
          "  --learn-curves W|Ts  the policies know a job's speed on N nodes only\n"
          "                       after it did W work (Ts: trained T seconds)\n"
          "                       there in one launch, as the manager measures it\n"
          "                       (with --commit-time: and two checks, its two\n"
          "                       progress reports; default: the table's curves\n"
          "                       from the start, an oracle)\n"
          "  --share-speeds       with --learn-curves: a job that learned nothing\n"
          "                       yet starts from the curve of the job of its\n"
          "                       model that learned the most (the manager's\n"
          "                       serve --share-speeds)\n"
          "  --restart-prior      with --learn-curves: a resize is priced before a\n"
          "                       job's own is measured as the manager prices it\n"
          "                       by default: its measured start-up plus the\n"
          "                       pool's measured stop, else the pool's mean\n"
          "                       resize (default: --restart-penalty)\n"
          "  --interference K     nodes that share one machine (the emulated\n"
          "                       cluster): a job on n of N nodes runs at its\n"
          "                       table speed / (1 + K (B - n) / (N - n)) while B\n"
          "                       nodes compute (default 0: real machines;\n"
          "                       bench/cluster/interference.sh measures K)\n"
          "  --commit-work W      resize as the manager does: jobs commit every W\n"
          "                       work (samples of a speed table, steps of\n"
          "                       Pollux's), a job's supervisor notices a new\n"
          "                       partition at its next discovery and the job\n"
          "                       moves at its next commit (after its start-up),\n"
          "                       running on its old nodes until then or ending\n"
          "                       first; a node is free once no launch uses it;\n"
          "                       a preempted job resumes from its last commit\n"
          "                       (default: resizes and nodes move at once)\n"
          "  --commit-time S      the same with commits by time, the manager's\n"
          "                       default for train jobs (serve --commit-every\n"
          "                       10s): a job commits every S seconds of its\n"
          "                       training, and moves at its next check, where it\n"
          "                       commits, losing no work; the policies see its\n"
          "                       progress as it is (its reports at each check)\n"
          "  --check-every S      with --commit-time: seconds of training between\n"
          "                       a job's checks, at least a step (the table's\n"
          "                       samples_per_step; default 0.5, train's)\n"
          "  --discover-every S   with --commit-work or --commit-time: seconds\n"
          "                       between a supervisor's discoveries (default 1,\n"
          "                       the manager's; 0 = at once)\n"
          "  --launch-delay S     with either: seconds from the manager's\n"
          "                       start of a job to its supervisor's launch, part\n"
          "                       of its start-up: a new partition before then\n"
          "                       costs nothing, and a relaunch after a stop does\n"
          "                       not pay it (default 0)\n"
          "  --interval S         re-allocate every S seconds as well as on\n"
          "                       arrivals and completions (default 60; 0 = only\n"
          "                       on events)\n"
          "  --time-limit S       dorm: GLPK's time limit per round (default 0.05)\n"
          "  --fairness-weight A  dorm: weight of the fairness loss (default 0.5)\n"
          "  --adjust-weight B    dorm: cost of resizing a running job (default 0.02)\n"
          "  --fairness-window S  dorm: fairness over time: a job's target is its fair\n"
          "                       share plus the node-seconds of share it was owed\n"
          "                       and not given, paid back over S seconds (default:\n"
          "                       none, the share now)\n"
          "  --node-loss T:K      K nodes leave the pool at time T (seconds)\n"
          "%s"
          "  --json               one JSON object per policy and line\n"
          "  --trace-out FILE     the run as CSV lines (node segments for a Gantt\n"
          "                       chart, utilisation over time, each job's times);\n"
          "                       with several policies one file each, the\n"
          "                       policy before FILE's extension (tr.csv:\n"
          "                       tr.static.csv, tr.dorm.csv, tr.goodput.csv)\n"
          "  --round-log FILE     each policy round as a JSON line: every job as the\n"
          "                       policy saw it and the size it answered (as cluster\n"
          "                       serve --round-log writes a real run's); several\n"
          "                       policies: one file each, named as --trace-out's\n"
          "  --help               this text\n",
          CSIM_MAX_NODES, cli_shares_usage);
}

typedef struct csim_cli {
  const char *workload, *tables, *policy, *trace_out, *round_log;
  int nodes, gpus, json;
  int shares_given; /* a --user-share, --user-limit, --account-share or --account-limit */
  gs_cluster_shares shares;
  gs_csim_opts o;
} csim_cli;

static int parse_double_opt(const char *name, const char *s, double lo, double hi, double *out) {
  if (cli_parse_double(s, lo, hi, out) != 0) {
    cli_error(VERB, "--%s: expected a number from %g to %g, got '%s'", name, lo, hi, s);
    return 2;
  }
  return 0;
}

static int parse_opts(int argc, char **argv, csim_cli *c) {
  static const struct option longs[] = {
      {"workload", required_argument, 0, 'w'},
      {"tables", required_argument, 0, 'T'},
      {"nodes", required_argument, 0, 'n'},
      {"gpus-per-node", required_argument, 0, 'g'},
      {"policy", required_argument, 0, 'P'},
      {"restart-penalty", required_argument, 0, 'r'},
      {"start-penalty", required_argument, 0, 's'},
      {"learn-curves", required_argument, 0, 'C'},
      {"share-speeds", no_argument, 0, 'S'},
      {"restart-prior", no_argument, 0, 'p'},
      {"interference", required_argument, 0, 'K'},
      {"commit-work", required_argument, 0, 'W'},
      {"commit-time", required_argument, 0, 'E'},
      {"check-every", required_argument, 0, 'k'},
      {"discover-every", required_argument, 0, 'D'},
      {"launch-delay", required_argument, 0, 'Y'},
      {"interval", required_argument, 0, 'i'},
      {"time-limit", required_argument, 0, 'l'},
      {"fairness-weight", required_argument, 0, 'f'},
      {"adjust-weight", required_argument, 0, 'a'},
      {"fairness-window", required_argument, 0, 'V'},
      {"node-loss", required_argument, 0, 'L'},
      {"json", no_argument, 0, 'J'},
      {"trace-out", required_argument, 0, 't'},
      {"round-log", required_argument, 0, 'R'},
      {"user-share", required_argument, 0, 'u'},
      {"user-limit", required_argument, 0, 'U'},
      {"account-share", required_argument, 0, 'A'},
      {"account-limit", required_argument, 0, 'B'},
      {"usage-halflife", required_argument, 0, 'H'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  memset(c, 0, sizeof *c);
  gs_csim_defaults(&c->o);
  c->policy = "all";
  c->gpus = 4;
  optind = 1;
  opterr = 0;
  cli_seen seen = {{0}};
  int ch, protocol_given = 0, check_given = 0;
  const char *dorm_opt = NULL; /* the last of dorm's settings given */
  while ((ch = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
    int repeats = ch == 'u' || ch == 'U' || ch == 'A' || ch == 'B' || ch == 'H';
    if (ch != '?' && ch != ':' && !repeats && cli_once(VERB, &seen, ch, longs)) return 2;
    switch (ch) {
      case 'u':
      case 'U':
      case 'A':
      case 'B':
      case 'H': {
        const char *name = ch == 'u'   ? "--user-share"
                           : ch == 'U' ? "--user-limit"
                           : ch == 'A' ? "--account-share"
                           : ch == 'B' ? "--account-limit"
                                       : "--usage-halflife";
        if (cli_shares_add(VERB, name, optarg) != 0) return 2;
        c->shares_given = 1;
        break;
      }
      case 'w': c->workload = optarg; break;
      case 'T': c->tables = optarg; break;
      case 'n':
        if (cli_parse_int(optarg, 1, CSIM_MAX_NODES, &c->nodes) != 0) {
          cli_error(VERB, "--nodes: expected an integer from 1 to %d, got '%s'",
                    CSIM_MAX_NODES, optarg);
          return 2;
        }
        break;
      case 'g':
        if (cli_parse_int(optarg, 1, 9, &c->gpus) != 0) {
          cli_error(VERB, "--gpus-per-node: expected an integer from 1 to 9, got '%s'", optarg);
          return 2;
        }
        break;
      case 'P': c->policy = optarg; break;
      case 'r':
        if (parse_double_opt("restart-penalty", optarg, 0, 86400, &c->o.restart_penalty_s))
          return 2;
        break;
      case 's':
        if (parse_double_opt("start-penalty", optarg, 0, 86400, &c->o.start_penalty_s))
          return 2;
        break;
      case 'C': { /* W work, or Ts seconds of training */
        int rc = cli_parse_seconds_suffix(optarg, 1e-9, 1e9, &c->o.learn_s);
        if (rc < 0 || (rc == 1 && cli_parse_double(optarg, 1e-9, 1e18, &c->o.learn_work))) {
          cli_error(VERB, "--learn-curves: expected work from 1e-09 to 1e+18 or seconds "
                    "from 1e-09 to 1e+09 with an s (2s), got '%s'", optarg);
          return 2;
        }
        break;
      }
      case 'S':
        c->o.share_speeds = 1;
        break;
      case 'p':
        c->o.restart_prior = 1;
        break;
      case 'K':
        if (parse_double_opt("interference", optarg, 0, 100, &c->o.interference)) return 2;
        break;
      case 'W':
        if (parse_double_opt("commit-work", optarg, 1e-9, 1e18, &c->o.commit_work)) return 2;
        break;
      case 'E':
        if (parse_double_opt("commit-time", optarg, 1e-3, 1e9, &c->o.commit_every_s)) return 2;
        break;
      case 'k':
        if (parse_double_opt("check-every", optarg, 0, 86400, &c->o.check_every_s)) return 2;
        check_given = 1;
        break;
      case 'D':
        if (parse_double_opt("discover-every", optarg, 0, 86400, &c->o.discover_every_s))
          return 2;
        protocol_given = 1;
        break;
      case 'Y':
        if (parse_double_opt("launch-delay", optarg, 0, 86400, &c->o.launch_delay_s)) return 2;
        protocol_given = 1;
        break;
      case 'i':
        if (parse_double_opt("interval", optarg, 0, 86400, &c->o.interval_s)) return 2;
        break;
      case 'l':
        if (parse_double_opt("time-limit", optarg, 0.001, 3600, &c->o.time_limit_s)) return 2;
        dorm_opt = "--time-limit";
        break;
      case 'f':
        if (parse_double_opt("fairness-weight", optarg, 0, 1000, &c->o.fairness_weight))
          return 2;
        dorm_opt = "--fairness-weight";
        break;
      case 'a':
        if (parse_double_opt("adjust-weight", optarg, 0, 1000, &c->o.adjust_weight)) return 2;
        dorm_opt = "--adjust-weight";
        break;
      case 'V':
        if (parse_double_opt("fairness-window", optarg, 1, 1e9, &c->o.fairness_window_s))
          return 2;
        dorm_opt = "--fairness-window";
        break;
      case 'L': {
        const char *colon = strchr(optarg, ':');
        char first[64];
        int ok = colon != NULL && colon - optarg < 64;
        if (ok) {
          memcpy(first, optarg, (size_t)(colon - optarg));
          first[colon - optarg] = '\0';
          ok = cli_parse_double(first, 0, 1e12, &c->o.loss_time_s) == 0 &&
               cli_parse_int(colon + 1, 1, CSIM_MAX_NODES, &c->o.loss_nodes) == 0;
        }
        if (!ok) {
          cli_error(VERB, "--node-loss: expected T:K (seconds >= 0, nodes >= 1), got '%s'",
                    optarg);
          return 2;
        }
        break;
      }
      case 'J': c->json = 1; break;
      case 't':
        if (!*optarg) { /* (else ".static" and the like in ".") */
          cli_error(VERB, "--trace-out needs a file name");
          return 2;
        }
        c->trace_out = optarg;
        break;
      case 'R':
        if (!*optarg) {
          cli_error(VERB, "--round-log needs a file name");
          return 2;
        }
        c->round_log = optarg;
        break;
      case 'h': usage(stdout); return -1;
      default: return cli_getopt_error(VERB, ch, argv, longs);
    }
  }
  if (optind < argc) {
    cli_error(VERB, "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (c->workload == NULL) {
    cli_error(VERB, "--workload is required");
    return 2;
  }
  if (c->nodes == 0) {
    cli_error(VERB, "--nodes is required");
    return 2;
  }
  if (protocol_given && !(c->o.commit_work > 0) && !(c->o.commit_every_s > 0)) {
    cli_error(VERB, "--discover-every and --launch-delay apply to the manager's resizes: "
              "give --commit-work or --commit-time too");
    return 2;
  }
  if (c->o.commit_work > 0 && c->o.commit_every_s > 0) {
    cli_error(VERB, "--commit-work and --commit-time: the manager commits by work or by "
              "time; give one");
    return 2;
  }
  if (check_given && !(c->o.commit_every_s > 0)) {
    cli_error(VERB, "--check-every is of commits by time: give --commit-time too");
    return 2;
  }
  /* dorm's own settings (its weights, GLPK's time limit and the fairness
   * window that moves its targets): until 2026-12-06 the first three were
   * accepted and ignored by another policy. */
  if (dorm_opt && strcmp(c->policy, "dorm") != 0 && strcmp(c->policy, "all") != 0) {
    cli_error(VERB, "%s is dorm's: it needs --policy dorm (or all), got '%s'", dorm_opt,
              c->policy);
    return 2;
  }
  if (c->o.share_speeds && !(c->o.learn_work > 0) && !(c->o.learn_s > 0)) {
    cli_error(VERB, "--share-speeds shares what jobs learn: give --learn-curves too");
    return 2;
  }
  if (c->o.restart_prior && !(c->o.learn_work > 0) && !(c->o.learn_s > 0)) {
    cli_error(VERB, "--restart-prior prices from what the jobs measured: give "
              "--learn-curves too");
    return 2;
  }
  if (c->o.loss_nodes >= c->nodes) {
    cli_error(VERB, "--node-loss: %d nodes lost from a pool of %d; at most %d", c->o.loss_nodes,
              c->nodes, c->nodes - 1);
    return 2;
  }
  return 0;
}

/* FILE with .POLICY before its extension (or after it, without one). */
static void trace_path(char *out, size_t cap, const char *path, const char *policy, int several) {
  if (!several) {
    snprintf(out, cap, "%s", path);
    return;
  }
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  if (dot != NULL && (slash == NULL || dot > slash) && dot != path && dot[-1] != '/')
    snprintf(out, cap, "%.*s.%s%s", (int)(dot - path), path, policy, dot);
  else
    snprintf(out, cap, "%s.%s", path, policy);
}

/* Opens policy's file of option value `out` (NULL: none, NULL returned),
 * its name in path; says so and returns NULL where it cannot. */
static FILE *open_output(const char *out, const char *what, const char *policy, int several,
                         char *path, size_t cap) {
  if (out == NULL) return NULL;
  trace_path(path, cap, out, policy, several);
  FILE *f = fopen(path, "w");
  if (f == NULL) cli_fail(VERB, "cannot write %s '%s'", what, path);
  return f;
}

static void print_text_header(const csim_cli *c, const gs_csim_workload *w) {
  printf("workload %s (%s, %d jobs) on %d nodes; restart %g s, start %g s, interval %g s",
         c->workload, w->kind, w->njobs, c->nodes, c->o.restart_penalty_s, c->o.start_penalty_s,
         c->o.interval_s);
  if (c->o.commit_work > 0)
    printf("; resizes at commits every %g work, discovery every %g s, launch after %g s",
           c->o.commit_work, c->o.discover_every_s, c->o.launch_delay_s);
  if (c->o.commit_every_s > 0)
    printf("; commits every %g s, resizes at checks every %g s (at least a step), discovery "
           "every %g s, launch after %g s", c->o.commit_every_s, c->o.check_every_s,
           c->o.discover_every_s, c->o.launch_delay_s);
  if (c->o.learn_s > 0) printf("; speeds learned after %g s of training", c->o.learn_s);
  if (c->o.restart_prior) printf("; resizes priced by the pool's measured prior");
  if (c->o.interference > 0) printf("; interference %g", c->o.interference);
  if (c->o.shares && c->o.shares->usage_halflife_s > 0)
    printf("; fair shares lowered by usage, half-life %g s", c->o.shares->usage_halflife_s);
  if (c->o.fairness_window_s > 0)
    printf("; dorm's fairness window %g s", c->o.fairness_window_s);
  printf("\n");
  printf("%-8s %6s %6s %10s %10s %10s %6s %6s %8s %8s %7s %8s %9s\n", "policy", "done",
         "never", "jct_mean", "jct_p99", "makespan", "util", "busy", "fairloss", "rho_max",
         "resizes", "round_ms", "round_max");
}

static void print_text_row(const char *policy, const gs_csim_result *r) {
  char mean[32], p99[32], span[32];
  printf("%-8s %6d %6d %10s %10s %10s %6.3f %6.3f %8.3f %8.2f %7d %8.2f %9.2f\n",
         policy, r->done, r->jobs - r->done, cli_secs(mean, sizeof mean, r->jct_mean_s),
         cli_secs(p99, sizeof p99, r->jct_p99_s), cli_secs(span, sizeof span, r->makespan_s),
         r->util, r->util_busy, r->fairness_loss, r->ftf_max, r->resizes, r->policy_ms_mean,
         r->policy_ms_max);
}

static void owner_table(const gs_csim_workload *w, const double *node_s, const double *fair_s,
                        const double *jct, cJSON *json, const char *policy);

/* per: the run's per-job figures (gs_csim_opts.job_node_s, then
 * job_fair_node_s, then job_jct_s; NULL: no accounts' table). */
static void print_json_row(const csim_cli *c, const gs_csim_workload *w, const char *policy,
                           const gs_csim_result *r, const double *per) {
  cJSON *o = cJSON_CreateObject();
  char clean[512];
  cJSON_AddStringToObject(o, "workload", cli_clean_text(clean, sizeof clean, c->workload));
  cJSON_AddStringToObject(o, "kind", w->kind);
  cJSON_AddStringToObject(o, "policy", policy);
  cJSON_AddNumberToObject(o, "nodes", c->nodes);
  cJSON_AddNumberToObject(o, "gpus_per_node", c->gpus);
  cli_json_add(o, "restart_penalty_s", c->o.restart_penalty_s, "%.3f");
  cli_json_add(o, "start_penalty_s", c->o.start_penalty_s, "%.3f");
  cli_json_add(o, "learn_work", c->o.learn_work, "%.6g");
  if (c->o.learn_s > 0) cli_json_add(o, "learn_s", c->o.learn_s, "%.6g");
  cli_json_add(o, "share_speeds", (double)c->o.share_speeds, "%.0f");
  if (c->o.restart_prior) cli_json_add(o, "restart_prior", 1.0, "%.0f");
  if (c->o.interference > 0) cli_json_add(o, "interference", c->o.interference, "%.4f");
  if (c->o.commit_work > 0) { /* the manager's resizes */
    cli_json_add(o, "commit_work", c->o.commit_work, "%.6g");
    cli_json_add(o, "discover_every_s", c->o.discover_every_s, "%.3f");
    cli_json_add(o, "launch_delay_s", c->o.launch_delay_s, "%.3f");
  }
  if (c->o.commit_every_s > 0) { /* the manager's resizes, commits by time */
    cli_json_add(o, "commit_every_s", c->o.commit_every_s, "%.6g");
    cli_json_add(o, "check_every_s", c->o.check_every_s, "%.3f");
    cli_json_add(o, "discover_every_s", c->o.discover_every_s, "%.3f");
    cli_json_add(o, "launch_delay_s", c->o.launch_delay_s, "%.3f");
  }
  cli_json_add(o, "interval_s", c->o.interval_s, "%.3f");
  if (c->o.shares && c->o.shares->usage_halflife_s > 0)
    cli_json_add(o, "usage_halflife_s", c->o.shares->usage_halflife_s, "%.6g");
  cJSON_AddNumberToObject(o, "jobs", r->jobs);
  cJSON_AddNumberToObject(o, "done", r->done);
  cJSON_AddNumberToObject(o, "unfinished", r->jobs - r->done);
  if (r->jobs > r->done)
    cJSON_AddStringToObject(o, "unfinished_jobs", cli_clean_text(clean, sizeof clean,
                                                                 r->unfinished));
  cli_json_add(o, "jct_mean_s", r->jct_mean_s, "%.2f");
  cli_json_add(o, "jct_p50_s", r->jct_p50_s, "%.2f");
  cli_json_add(o, "jct_p99_s", r->jct_p99_s, "%.2f");
  cli_json_add(o, "makespan_s", r->makespan_s, "%.2f");
  cli_json_add(o, "util", r->util, "%.4f");
  cli_json_add(o, "util_busy", r->util_busy, "%.4f");
  cli_json_add(o, "fairness_loss", r->fairness_loss, "%.4f");
  cli_json_add(o, "ftf_max", r->ftf_max, "%.3f");
  cli_json_add(o, "ftf_mean", r->ftf_mean, "%.3f");
  cJSON_AddNumberToObject(o, "resizes", r->resizes);
  cJSON_AddNumberToObject(o, "rounds", r->rounds);
  cli_json_add(o, "jobs_per_round", r->jobs_per_round, "%.1f");
  cli_json_add(o, "round_ms_mean", r->policy_ms_mean, "%.3f");
  cli_json_add(o, "round_ms_max", r->policy_ms_max, "%.3f");
  if (strcmp(policy, "dorm") == 0) {
    cli_json_add(o, "dorm_gap_max", r->gap_max, "%.4g");
    cJSON_AddNumberToObject(o, "dorm_fallbacks", r->fallbacks);
    cJSON_AddNumberToObject(o, "dorm_exact_rounds", r->exact_rounds);
    cli_json_add(o, "time_limit_s", c->o.time_limit_s, "%.4g");
    cli_json_add(o, "fairness_weight", c->o.fairness_weight, "%.4g");
    cli_json_add(o, "adjust_weight", c->o.adjust_weight, "%.4g");
    if (c->o.fairness_window_s > 0)
      cli_json_add(o, "fairness_window_s", c->o.fairness_window_s, "%.6g");
  }
  cli_json_add(o, "sim_s", r->sim_s, "%.3f");
  if (per) owner_table(w, per, per + w->njobs, per + 2 * (size_t)w->njobs, o, policy);
  cli_print_json(stdout, o);
}

/* The accounts' table of a run (cli_owner_table) from its per-job figures
 * (gs_csim_opts.job_node_s, job_fair_node_s and job_jct_s). */
static void owner_table(const gs_csim_workload *w, const double *node_s, const double *fair_s,
                        const double *jct, cJSON *json, const char *policy) {
  const char **user = malloc((size_t)w->njobs * 2 * sizeof *user + 1);
  if (user == NULL) return;
  const char **account = user + w->njobs;
  for (int j = 0; j < w->njobs; j++) {
    user[j] = w->jobs[j].user;
    account[j] = w->jobs[j].account;
  }
  cli_owner_jobs oj = {.n = w->njobs, .user = user, .account = account, .node_s = node_s,
                       .fair_s = fair_s, .jct_s = jct};
  char title[64];
  snprintf(title, sizeof title, "policy %s", policy);
  (void)cli_owner_table(&oj, json, title);
  free(user);
}

static int cmd_cluster_simulate(int argc, char **argv) {
  csim_cli c;
  int rc = parse_opts(argc, argv, &c);
  if (rc < 0) return 0; /* --help */
  if (rc != 0) return rc;
  static const char *all[] = {"static", "dorm", "goodput"};
  const char *one[1] = {c.policy};
  const char **pols = all;
  int npols = 3;
  if (strcmp(c.policy, "all") != 0) {
    int known = 0;
    for (int i = 0; i < 3; i++) known |= strcmp(c.policy, all[i]) == 0;
    if (!known) {
      cli_error(VERB, "--policy: unknown policy '%s'; expected static, dorm, goodput or all",
                c.policy);
      return 2;
    }
    pols = one;
    npols = 1;
  }
  char path[4096];
  for (int p = 0; p < npols; p++)
    for (int f = 0; f < 2; f++) {
      const char *out = f ? c.round_log : c.trace_out;
      if (out == NULL) continue;
      trace_path(path, sizeof path, out, pols[p], npols > 1);
      if (cli_check_writable(path, f ? "--round-log" : "--trace-out") != GS_OK) {
        cli_error(VERB, "%s", gs_last_error());
        return 2;
      }
    }
  gs_csim_workload w;
  char err[1024];
  if (gs_csim_load(c.workload, c.tables, c.nodes, c.gpus, &w, err, sizeof err) != 0) {
    /* The speed tables' errors start with their file, from --tables; the
     * workload's with its own (and may name a table: "not in the speed
     * table T"). */
    size_t wl = strlen(c.workload);
    int in_workload = strncmp(err, c.workload, wl) == 0 && err[wl] == ':';
    int tables = !in_workload && c.tables != NULL && strstr(err, c.tables) != NULL;
    cli_error(VERB, "%s: %s", tables ? "--tables" : "--workload", err);
    return 2;
  }
  if (c.shares_given) {
    c.shares = cli_shares_get();
    c.o.shares = &c.shares;
  }
  /* The accounts' table: with jobs that name a user or an account, or
   * shares given. */
  int owners = c.shares_given;
  for (int j = 0; j < w.njobs && !owners; j++) owners = w.jobs[j].user[0] || w.jobs[j].account[0];
  double *per = owners ? malloc((size_t)w.njobs * 3 * sizeof *per + 1) : NULL;
  if (owners && per == NULL) {
    cli_fail(VERB, "out of memory for %d jobs' accounts", w.njobs);
    gs_csim_workload_free(&w);
    return 1;
  }
  /* What the replays refuse before they start is bad input, said before
   * the table starts. */
  for (int p = 0; p < npols; p++) {
    gs_csim_opts o = c.o;
    o.nodes = c.nodes;
    o.policy = pols[p];
    if (gs_csim_check(&w, &o, err, sizeof err) != 0) {
      cli_error(VERB, "%s", err);
      free(per);
      gs_csim_workload_free(&w);
      return 2;
    }
  }
  if (!c.json) print_text_header(&c, &w);
  rc = 0;
  for (int p = 0; p < npols && rc == 0; p++) {
    gs_csim_opts o = c.o;
    o.nodes = c.nodes;
    o.policy = pols[p];
    if (per) {
      o.job_node_s = per;
      o.job_fair_node_s = per + w.njobs;
      o.job_jct_s = per + 2 * (size_t)w.njobs;
    }
    char rpath[4096];
    FILE *tf = open_output(c.trace_out, "the trace", pols[p], npols > 1, path, sizeof path);
    FILE *rf = open_output(c.round_log, "the round log", pols[p], npols > 1, rpath,
                           sizeof rpath);
    if ((c.trace_out != NULL && tf == NULL) || (c.round_log != NULL && rf == NULL)) {
      if (tf != NULL) fclose(tf);
      if (rf != NULL) fclose(rf);
      rc = 1;
      break;
    }
    o.trace = tf;
    o.round_log = rf;
    gs_csim_result r;
    if (gs_csim_run(&w, &o, &r, err, sizeof err) != 0) {
      /* What the run refuses before it starts (a job that can never fit) is
       * bad input; the policies' own failures are failures of the work. */
      if (r.rounds == 0) {
        cli_error(VERB, "%s", err);
        rc = 2;
      } else {
        cli_fail(VERB, "%s", err);
        rc = 1;
      }
    } else {
      if (r.jobs > r.done) {
        char clean[600];
        fprintf(stderr, "gradsync cluster simulate: warning: policy %s: %d of %d jobs never "
                "finished (the run ended with no node able to run them; its JCTs count only "
                "the %d done): %s\n", pols[p], r.jobs - r.done, r.jobs, r.done,
                cli_clean_text(clean, sizeof clean, r.unfinished));
      }
      if (c.json) {
        print_json_row(&c, &w, pols[p], &r, per);
      } else {
        print_text_row(pols[p], &r);
        if (per) owner_table(&w, o.job_node_s, o.job_fair_node_s, o.job_jct_s, NULL, pols[p]);
      }
    }
    if (tf != NULL && fclose(tf) != 0 && rc == 0) {
      cli_fail(VERB, "cannot write the trace '%s'", path);
      rc = 1;
    }
    if (rf != NULL && fclose(rf) != 0 && rc == 0) {
      cli_fail(VERB, "cannot write the round log '%s'", rpath);
      rc = 1;
    }
  }
  free(per);
  gs_csim_workload_free(&w);
  return rc;
}

int cmd_cluster(int argc, char **argv) {
  if (argc < 2) {
    cli_error("cluster", "no subcommand given (simulate, serve, drain, undrain, down)");
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    /* The simulator's line, then the manager's own usage. */
    printf("usage: gradsync cluster simulate ...     replay a job trace under a policy "
           "(--help)\n");
    return gs_cmd_cluster_manager(argc, argv);
  }
  if (strcmp(argv[1], "simulate") == 0) return cmd_cluster_simulate(argc - 1, argv + 1);
  return gs_cmd_cluster_manager(argc, argv);
}
