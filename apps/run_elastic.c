/* gradsync run --elastic MIN:MAX: the command line's side of the elastic
 * supervisor (src/launch, gradsync/launch.h; docs/ELASTIC.md). The library
 * supervises; this file reads the program's own options that matter to it
 * (--global-batch, --checkpoint), and shows what happens: one line on
 * stderr per resize, a JSON object per event to --events FILE, and the
 * job's history at the end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "gradsync/launch.h"

int run_elastic_parse_spec(const char *s, int *min, int *max) {
  char buf[32];
  if (!s || strlen(s) >= sizeof buf) return -1;
  snprintf(buf, sizeof buf, "%s", s);
  char *colon = strchr(buf, ':');
  if (colon) *colon = '\0';
  if (cli_parse_int(buf, 1, RUN_ELASTIC_MAX, min) != 0) return -1;
  *max = *min;
  if (colon && cli_parse_int(colon + 1, 1, RUN_ELASTIC_MAX, max) != 0) return -1;
  return *min <= *max ? 0 : -1;
}

/* Whether the program's arguments hold option NAME, read as train's
 * getopt_long reads them: "--res=auto" is --resume (until 2026-12-07 only
 * the whole name counted, and the warning below was false). */
static int prog_has(char **prog, int nprog, const char *name) {
  return cli_option_given(prog + 1, nprog - 1, name);
}

typedef struct view {
  FILE *events;
  const char *events_path;
  int events_failed;
  const char *net; /* the emulated nodes' link, or NULL */
  int per_node;
} view;

/* Where a launch of size ranks runs, for the lines and the history: its
 * hosts ("h1:2,h2:2"), or with --net the emulated nodes that its ranks fill
 * (the local world's one host is this machine, not a place to name). */
static const char *where(const view *v, int size, const char *hosts, char *buf, size_t len) {
  if (!v->net) return hosts;
  int k = v->per_node > 0 ? v->per_node : 1, nodes = (size + k - 1) / k;
  snprintf(buf, len, "%d emulated node%s", nodes, nodes == 1 ? "" : "s");
  return buf;
}


static const char *kind_name(gs_elastic_event_kind k) {
  switch (k) {
  case GS_ELASTIC_LAUNCH: return "launch";
  case GS_ELASTIC_FAILURE: return "failure";
  case GS_ELASTIC_RESIZE: return "resize";
  case GS_ELASTIC_WAIT: return "wait";
  case GS_ELASTIC_WARNING: return "warning";
  case GS_ELASTIC_FINISH: return "finish";
  }
  return "?";
}

static void event_json(view *v, const gs_elastic_event *e) {
  if (!v->events || v->events_failed) return;
  char clean[1024], nodes[48];
  const char *hosts = where(v, e->new_size, e->hosts, nodes, sizeof nodes);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "event", kind_name(e->kind));
  cli_json_add(j, "t", e->t, "%.3f");
  cli_json_add(j, "time", gs_wall_now(), "%.3f");
  cJSON_AddNumberToObject(j, "launch", e->launch);
  switch (e->kind) {
  case GS_ELASTIC_LAUNCH:
    cJSON_AddNumberToObject(j, "size", e->new_size);
    cJSON_AddStringToObject(j, "hosts", cli_clean_text(clean, sizeof clean, hosts));
    if (e->rule[0]) cJSON_AddStringToObject(j, "rule", e->rule);
    if (e->left_out && e->left_out[0])
      cJSON_AddStringToObject(j, "left_out", cli_clean_text(clean, sizeof clean, e->left_out));
    break;
  case GS_ELASTIC_RESIZE:
    cJSON_AddNumberToObject(j, "from", e->old_size);
    cJSON_AddNumberToObject(j, "to", e->new_size);
    cJSON_AddStringToObject(j, "reason", cli_clean_text(clean, sizeof clean, e->reason));
    cJSON_AddStringToObject(j, "hosts", cli_clean_text(clean, sizeof clean, hosts));
    if (e->rule[0]) cJSON_AddStringToObject(j, "rule", e->rule);
    if (e->commit_epoch >= 0) {
      cJSON_AddNumberToObject(j, "commit_epoch", (double)e->commit_epoch);
      cJSON_AddNumberToObject(j, "commit_samples_in_epoch", (double)e->commit_samples);
    } else {
      cJSON_AddNullToObject(j, "commit_epoch");
    }
    if (e->steps_redone >= 0) cJSON_AddNumberToObject(j, "steps_redone", (double)e->steps_redone);
    else cJSON_AddNullToObject(j, "steps_redone");
    cli_json_add(j, "seconds_lost", e->seconds_lost, "%.3f");
    cJSON_AddNumberToObject(j, "restarts", e->restarts);
    cJSON_AddBoolToObject(j, "node_lost", e->node_lost);
    break;
  case GS_ELASTIC_FAILURE:
    cJSON_AddNumberToObject(j, "size", e->old_size);
    cJSON_AddStringToObject(j, "reason", cli_clean_text(clean, sizeof clean, e->reason));
    cJSON_AddNumberToObject(j, "status", e->status);
    cli_json_add(j, "detect_s", e->detect_s, "%.3f");
    cJSON_AddBoolToObject(j, "node_lost", e->node_lost);
    break;
  case GS_ELASTIC_FINISH:
    cJSON_AddNumberToObject(j, "status", e->status);
    cJSON_AddNumberToObject(j, "restarts", e->restarts);
    /* fall through */
  case GS_ELASTIC_WAIT:
  case GS_ELASTIC_WARNING:
    cJSON_AddStringToObject(j, "message", cli_clean_text(clean, sizeof clean, e->reason));
    break;
  }
  cli_print_json(v->events, j);
  if (fflush(v->events) != 0 || ferror(v->events)) {
    cli_fail("run", "--events %s: cannot write: %s; no more events there", v->events_path,
             strerror(errno));
    v->events_failed = 1;
  }
}

static void on_event(const gs_elastic_event *e, void *user) {
  view *v = user;
  char reason[1024], commit[96], redone[64], sizes[64], nodes[48];
  event_json(v, e);
  cli_clean_text(reason, sizeof reason, e->reason ? e->reason : "");
  switch (e->kind) {
  case GS_ELASTIC_LAUNCH:
    if (e->launch == 1)
      fprintf(stderr, "gradsync run: elastic: %d rank%s on %s%s%s%s%s\n", e->new_size,
              e->new_size == 1 ? "" : "s", where(v, e->new_size, e->hosts, nodes, sizeof nodes),
              v->net ? " at " : "", v->net ? v->net : "", e->rule[0] ? "; " : "", e->rule);
    break;
  case GS_ELASTIC_RESIZE:
    /* commit_epoch counts from 0 (as --events gives it), the line from 1.
     * A commit at sample 0 is the end of the epoch before, as the cluster
     * manager says it: until 2026-12-07 a commit after a 2-epoch job's last
     * epoch read "at epoch 3, sample 0 of the epoch", an epoch the job has
     * not. */
    if (e->commit_epoch > 0 && e->commit_samples == 0)
      snprintf(commit, sizeof commit, "from the commit at the end of epoch %ld",
               e->commit_epoch);
    else if (e->commit_epoch >= 0)
      snprintf(commit, sizeof commit, "from the commit at epoch %ld, sample %ld of the epoch",
               e->commit_epoch + 1, e->commit_samples);
    else
      snprintf(commit, sizeof commit, "from no known commit");
    if (e->steps_redone >= 0) snprintf(redone, sizeof redone, "~%ld", e->steps_redone);
    else snprintf(redone, sizeof redone, "unknown");
    /* A relaunch at the same size says so (it read "resize 4 -> 4"). */
    if (e->old_size == e->new_size)
      snprintf(sizes, sizeof sizes, "relaunch on %d rank%s", e->new_size,
               e->new_size == 1 ? "" : "s");
    else
      snprintf(sizes, sizeof sizes, "resize %d -> %d rank%s", e->old_size, e->new_size,
               e->new_size == 1 ? "" : "s");
    fprintf(stderr, "gradsync run: %s (%s): resuming %s, steps redone %s, %.1f s lost%s%s\n",
            sizes, reason, commit, redone, e->seconds_lost, e->rule[0] ? "; " : "", e->rule);
    break;
  case GS_ELASTIC_WAIT:
    fprintf(stderr, "gradsync run: elastic: %s\n", reason);
    break;
  case GS_ELASTIC_WARNING:
    fprintf(stderr, "gradsync run: warning: %s\n", reason);
    break;
  case GS_ELASTIC_FAILURE:
  case GS_ELASTIC_FINISH:
    break; /* in the resize line, or the end's */
  }
  fflush(stderr);
}

static void print_history(const view *v, const gs_elastic_result *r) {
  fprintf(stderr, "gradsync run: elastic job history: %d launch%s, %d restart%s after "
          "failures, %d resize%s on request, %d relaunch%s after a lost host\n", r->nlaunches,
          r->nlaunches == 1 ? "" : "es", r->restarts, r->restarts == 1 ? "" : "s", r->resizes,
          r->resizes == 1 ? "" : "s", r->node_losses, r->node_losses == 1 ? "" : "es");
  fprintf(stderr, "  %-6s %5s %8s %8s %6s  %-24s %s\n", "launch", "ranks", "start_s", "end_s",
          "status", "hosts", "end");
  for (int i = 0; i < r->nlaunches; i++) {
    const gs_elastic_launch *l = &r->launches[i];
    char hosts[64], end[200], nodes[48];
    snprintf(hosts, sizeof hosts, "%.24s", where(v, l->size, l->hosts, nodes, sizeof nodes));
    cli_clean_text(end, sizeof end, l->end);
    fprintf(stderr, "  %-6d %5d %8.1f %8.1f %6d  %-24s %s\n", i + 1, l->size, l->start_t,
            l->end_t, l->status, hosts, end);
  }
}

/* The sizes from min to max that the program's --global-batch allows
 * (gs_elastic_size_runs), as words for a line: "2", "2 and 4", "2, 3 and
 * 6", or the first few and the last ("2, 3, 4, 6, 8, 12, ... and 96") when
 * there are many. Returns how many there are. */
static int list_sizes(int min, int max, int servers, long global_batch, char *out,
                      size_t len) {
  enum { SHOWN = 8 };
  int n = 0, last = 0, shown[SHOWN];
  for (int s = min; s <= max; s++)
    if (gs_elastic_size_runs(s, servers, global_batch)) {
      if (n < SHOWN) shown[n] = s;
      last = s;
      n++;
    }
  size_t w = 0;
  out[0] = '\0';
  int words = n <= SHOWN ? n : SHOWN - 1;
  for (int i = 0; i < words && w < len; i++)
    w += (size_t)snprintf(out + w, len - w, "%s%d",
                          i == 0 ? "" : i + 1 == n ? " and " : ", ", shown[i]);
  if (n > SHOWN && w < len) snprintf(out + w, len - w, ", ... and %d", last);
  return n;
}

int run_elastic(const run_elastic_opts *o, char **mpirun_argv, char **prog, int nprog) {
  /* The program's global batch restricts the sizes; its checkpoint
   * directory tells which commit a relaunch resumes from. */
  long global_batch = 0;
  const char *gb = cli_option_value(prog + 1, nprog - 1, "--global-batch");
  if (gb && cli_parse_long(gb, 1, 1L << 40, &global_batch) != 0) {
    cli_error("run", "--elastic: the program's --global-batch '%s' is not a whole number", gb);
    return 2;
  }
  /* A parameter-server job's servers (the program's --ps S, the last S
   * ranks of every launch) share no batch: the workers are the rest. */
  long servers = 0;
  const char *ps = cli_option_value(prog + 1, nprog - 1, "--ps");
  if (ps && cli_parse_long(ps, 0, 65535, &servers) != 0) {
    cli_error("run", "--elastic: the program's --ps '%s' is not a server count", ps);
    return 2;
  }
  if (servers >= o->min) {
    cli_error("run", "--elastic %d:%d: the program's --ps %ld servers leave no worker in a "
              "launch of %d ranks (the minimum must be at least %ld)", o->min, o->max, servers,
              o->min, servers + 1);
    return 2;
  }
  const char *ckpt = cli_option_value(prog + 1, nprog - 1, "--checkpoint");
  if (global_batch > 0) {
    int fits = 0;
    for (int s = o->min; s <= o->max && !fits; s++)
      fits = gs_elastic_size_runs(s, (int)servers, global_batch);
    if (!fits && servers > 0) {
      cli_error("run", "--elastic %d:%d: no size from %d to %d leaves workers (less the "
                "program's --ps %ld) that divide its --global-batch %ld", o->min, o->max,
                o->min, o->max, servers, global_batch);
      return 2;
    }
    if (!fits) {
      cli_error("run", "--elastic %d:%d: no size from %d to %d divides the program's "
                "--global-batch %ld", o->min, o->max, o->min, o->max, global_batch);
      return 2;
    }
  }
  /* gradsync train without --global-batch or --scale-lr linear keeps its
   * batch per rank and its --resume refuses a checkpoint from another rank
   * count: it runs at one size, the largest the given hosts hold
   * (gs_elastic_size_range, the cluster manager's rule). */
  int min = o->min, max = o->max;
  /* A DLRM job with --plan FILE runs on the ranks the plan was made for
   * (relaunched at another size it would exit 2, restart after restart). */
  char pwhy[600];
  int plan_ranks = cli_dlrm_plan_ranks(prog + 1, nprog - 1, pwhy, sizeof pwhy);
  if (plan_ranks < 0) {
    cli_error("run", "--elastic: the program's %s", pwhy);
    return 2;
  }
  if (plan_ranks > 0 && (plan_ranks < min || plan_ranks > max)) {
    cli_error("run", "--elastic %d:%d: the program's --plan is made for %d ranks, outside "
              "these sizes (--sharding instead plans anew at each size)", min, max, plan_ranks);
    return 2;
  }
  if (plan_ranks > 0 && min < max) {
    fprintf(stderr, "gradsync run: elastic: %d ranks only, not %d to %d: the program's --plan "
            "is made for %d ranks (--sharding instead plans anew at each size)\n", plan_ranks,
            min, max, plan_ranks);
    min = max = plan_ranks;
  }
  const char *sl = cli_option_value(prog + 1, nprog - 1, "--scale-lr");
  const char *base = strrchr(prog[0], '/');
  base = base ? base + 1 : prog[0];
  int is_train = nprog > 1 && strncmp(base, "gradsync", 8) == 0 && strcmp(prog[1], "train") == 0;
  if (min < max && is_train &&
      !gs_elastic_resizable(global_batch, sl != NULL && strcmp(sl, "linear") == 0)) {
    long slots = 0;
    for (int i = 0; i < o->nhosts; i++) slots += o->hosts[i].slots;
    int lo, hi;
    if (o->discover || slots <= 0) {
      fprintf(stderr, "gradsync run: warning: --elastic %d:%d: a relaunch at another size "
              "fails: %s\n", min, max,
              gs_elastic_one_size_why(servers > 0 ||
                                      cli_option_is(prog + 1, nprog - 1, "--model", "dlrm")));
    } else if (gs_elastic_size_range(min, max, 1, slots > max ? max : (int)slots,
                                     (int)servers, global_batch, 0, &lo, &hi) == 0) {
      fprintf(stderr, "gradsync run: elastic: %d ranks only, not %d to %d: %s\n", hi, min, max,
              gs_elastic_one_size_why(servers > 0 ||
                                      cli_option_is(prog + 1, nprog - 1, "--model", "dlrm")));
      min = lo;
      max = hi;
    }
  }
  view v = {0};
  v.net = o->net;
  v.per_node = o->per_node;
  if (o->events) {
    v.events = fopen(o->events, "w");
    if (!v.events) {
      cli_error("run", "--events %s: cannot write it: %s", o->events, strerror(errno));
      return 2;
    }
    v.events_path = o->events;
  }
  /* gradsync train resumes only when told to; another program (one
   * using gradsync.elastic's State, say) commits and resumes by itself,
   * where the supervisor cannot see. */
  if (is_train && (!ckpt || !prog_has(prog, nprog, "--resume")))
    fprintf(stderr, "gradsync run: warning: --elastic relaunches the program with the same "
            "arguments; without --checkpoint DIR and --resume=auto among them a relaunch "
            "starts from the beginning\n");
  gs_elastic_config c;
  memset(&c, 0, sizeof c);
  c.min_ranks = min;
  c.max_ranks = max;
  c.first_ranks = o->first;
  c.hosts = o->hosts;
  c.nhosts = o->nhosts;
  c.hosts_explicit = o->hosts_explicit;
  c.discover = o->discover;
  c.discover_every_s = o->discover_every;
  c.max_restarts = o->max_restarts;
  c.resize_interval_s = o->resize_interval;
  c.shrink_on_discover = o->shrink_on_discover;
  c.min_wait_s = o->min_wait;
  c.global_batch = global_batch;
  c.fixed_ranks = (int)servers;
  c.checkpoint_dir = ckpt;
  /* Another program (an --exec job of the cluster manager, whose
   * gradsync.torch.elastic State commits to $GRADSYNC_ELASTIC_DIR) may
   * report each commit there as progress.json: the resizes' events then say
   * where it resumes, and the manager measures what a resize cost. */
  const char *report_dir = getenv("GRADSYNC_ELASTIC_DIR");
  if (!is_train && !ckpt && report_dir && report_dir[0]) c.report_dir = report_dir;
  /* Steps; by time ("5s") the interval in steps is unknown (0): the widest
   * gap between two commits seen stands for it. */
  const char *ce = cli_option_value(prog + 1, nprog - 1, "--commit-every");
  if (!ce || cli_parse_long(ce, 1, 1L << 40, &c.commit_every) != 0) c.commit_every = 0;
  c.cost_cache_dir = o->cost_cache;
  c.cost_cache_desc = o->cost_cache_desc;
  c.mpirun_argv = mpirun_argv;
  c.prog_argv = prog;
  c.hosts_ok = o->hosts_ok;
  c.on_event = on_event;
  c.user = &v;
  if (global_batch > 0) {
    char sizes[256];
    int nsizes = list_sizes(min, max, (int)servers, global_batch, sizes, sizeof sizes);
    if (servers > 0)
      fprintf(stderr, "gradsync run: elastic: %s %s, those of %d to %d whose workers (all but "
              "the last %ld ranks, the servers) divide the program's --global-batch %ld\n",
              nsizes == 1 ? "size" : "sizes", sizes, min, max, servers, global_batch);
    else
      fprintf(stderr, "gradsync run: elastic: %s %s, those of %d to %d that divide the "
              "program's --global-batch %ld\n", nsizes == 1 ? "size" : "sizes", sizes, min,
              max, global_batch);
  }
  gs_elastic_result r;
  gs_status st = gs_elastic_run(&c, &r);
  if (v.events) fclose(v.events);
  if (st != GS_OK) {
    cli_fail("run", "elastic supervisor: %s", gs_last_error());
    return 1;
  }
  print_history(&v, &r);
  int rc = r.status;
  if (rc != 0) cli_fail("run", "elastic job ended: %s", r.message);
  gs_elastic_result_free(&r);
  return rc;
}
