/*
 * --user-share, --user-limit, --account-share and --account-limit, for
 * `gradsync cluster serve` and `gradsync cluster simulate`, and the accounts'
 * usage report of `cluster simulate` and `gradsync jobs --accounts`
 * (cli_shares.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_shares.h"

/* A repeatable USER:VALUE option (--user-share, --user-limit, ...). */
enum { USER_OPT_MAX = 1024 };
typedef struct user_opt {
  const char *option, *meta, *what; /* "--user-share", "SHARE", "a share" */
  const char *who;                  /* what the name is (NULL: "a user") */
  double lo, hi;                    /* the value's range */
  int whole;                        /* the value is a whole number */
  int star;                         /* "*" may stand for every user not named */
  const char *user[USER_OPT_MAX];
  double value[USER_OPT_MAX];
  int n;
  char names[USER_OPT_MAX][GS_CLUSTER_ACCOUNT_MAX]; /* a user's, or an account's path */
} user_opt;

/* Adds v ("USER:VALUE") to o; 2 with the message printed when it is not one,
 * names a user twice or one too many. */
static int user_opt_add(user_opt *o, const char *verb, const char *v) {
  const char *colon = strrchr(v, ':');
  char who[GS_CLUSTER_ACCOUNT_MAX + 1] = "", why[160] = "";
  double x = 0;
  int ix = 0;
  if (colon && (size_t)(colon - v) < sizeof who)
    snprintf(who, sizeof who, "%.*s", (int)(colon - v), v);
  int star = o->star && strcmp(who, "*") == 0;
  if (colon && (size_t)(colon - v) >= sizeof who) {
    snprintf(why, sizeof why, "longer than %d characters", (int)sizeof who - 2);
    snprintf(who, sizeof who, "%.40s...", v);
  }
  if (o->who && colon && !star && (why[0] || !gs_cluster_account_path_ok(who, why, sizeof why))) {
    /* an account's path: which level is wrong */
    cli_error(verb, "%s %s: account '%s': %s (an account is a path of 1 to "
              "%d names of 1 to %d letters, digits or ._@-, '/'-separated, as "
              "science/physics/hep)", o->option, v, who, why, GS_CLUSTER_ACCOUNT_LEVELS,
              GS_CLUSTER_NAME_MAX - 1);
    return 2;
  }
  int ok = colon && (o->who || gs_cluster_name_ok(who) || star) &&
           (o->whole ? cli_parse_int(colon + 1, (int)o->lo, (int)o->hi, &ix) == 0
                     : cli_parse_double(colon + 1, o->lo, o->hi, &x) == 0);
  if (!ok) {
    cli_error(verb, "%s needs %s:%s, %s of 1 to %d letters, digits or ._@-%s%s "
              "and %s from %g to %g (got '%s')", o->option, o->who ? "ACCOUNT" : "USER",
              o->meta, o->who ? o->who : "a user", GS_CLUSTER_NAME_MAX - 1,
              o->who ? " ('/' between the levels of a sub-account, as science/physics)" : "",
              !o->star ? "" : o->who ? " (or * for every other top-level account)"
                                     : " (or * for every other user)",
              o->what, o->lo, o->hi, v);
    return 2;
  }
  for (int k = 0; k < o->n; k++)
    if (strcmp(o->user[k], who) == 0) {
      cli_error(verb, "%s: %s '%s' given twice", o->option,
                o->who ? "account" : "user", who);
      return 2;
    }
  if (o->n == USER_OPT_MAX) {
    cli_error(verb, "%s: at most %d names", o->option, USER_OPT_MAX);
    return 2;
  }
  snprintf(o->names[o->n], sizeof o->names[o->n], "%.*s", (int)sizeof o->names[o->n] - 1,
           who); /* (its length was checked above) */
  o->user[o->n] = o->names[o->n];
  o->value[o->n++] = o->whole ? ix : x;
  return 0;
}

static user_opt shares = {.option = "--user-share", .meta = "SHARE", .what = "a share",
                          .lo = GS_CLUSTER_WEIGHT_MIN, .hi = GS_CLUSTER_WEIGHT_MAX},
                limits = {.option = "--user-limit", .meta = "NODES", .what = "nodes", .lo = 1,
                          .hi = 1e6, .whole = 1, .star = 1},
                accounts = {.option = "--account-share", .meta = "SHARE", .what = "a share",
                            .lo = GS_CLUSTER_WEIGHT_MIN, .hi = GS_CLUSTER_WEIGHT_MAX,
                            .who = "an account"},
                alimits = {.option = "--account-limit", .meta = "NODES", .what = "nodes",
                           .lo = 1, .hi = 1e6, .whole = 1, .star = 1, .who = "an account"};
static int limit_nodes[USER_OPT_MAX], alimit_nodes[USER_OPT_MAX];
static double usage_halflife; /* --usage-halflife (0: none) */
static int usage_halflife_given;

const char cli_shares_usage[] =
    "  --user-share USER:W  user USER's share of the pool (default 1 a user;\n"
    "                   repeatable): the pool is shared among the users with\n"
    "                   jobs by their shares, a user's part among its jobs by\n"
    "                   their weight\n"
    "  --account-share ACCOUNT:W  account ACCOUNT's share of the pool (default\n"
    "                   1; repeatable): with jobs charged to accounts, the pool\n"
    "                   is shared among the accounts and the users without one\n"
    "                   by their shares, an account's part among its users\n"
    "                   and its sub-accounts (ACCOUNT a path, science/physics:\n"
    "                   physics's share of science's part)\n"
    "  --user-limit USER:N  user USER's jobs hold at most N nodes together\n"
    "                   (repeatable; USER * for every user not named; default\n"
    "                   none), as Slurm's MaxNodesPerUser: every policy keeps\n"
    "                   it\n"
    "  --account-limit ACCOUNT:N  the jobs charged to ACCOUNT or to an account\n"
    "                   under it (ACCOUNT/...) hold at most N nodes together\n"
    "                   (repeatable; * for every top-level account not named),\n"
    "                   as Slurm's GrpTRES=node=N: kept with the users' limits\n"
    "  --usage-halflife S  the fair share counts usage (default: it does not):\n"
    "                   the node-hours each user and account used, each worth\n"
    "                   2^(-age/S), lower its share by 2^(-used/share) (used\n"
    "                   and share: its parts of its parent's usage and shares),\n"
    "                   as Slurm's PriorityDecayHalfLife and classic fair-share\n"
    "                   factor: who used more than its share gets less until\n"
    "                   its usage decays\n";

static user_opt *which(const char *a) {
  return strcmp(a, "--user-share") == 0      ? &shares
         : strcmp(a, "--user-limit") == 0    ? &limits
         : strcmp(a, "--account-share") == 0 ? &accounts
         : strcmp(a, "--account-limit") == 0 ? &alimits
                                             : NULL;
}

int cli_shares_option(const char *a) {
  return which(a) != NULL || strcmp(a, "--usage-halflife") == 0;
}

int cli_shares_add(const char *verb, const char *a, const char *v) {
  if (strcmp(a, "--usage-halflife") == 0) {
    if (usage_halflife_given) {
      cli_error(verb, "--usage-halflife given twice");
      return 2;
    }
    if (cli_parse_double(v, 1, 1e9, &usage_halflife) != 0) {
      cli_error(verb, "--usage-halflife needs seconds from 1 to 1e9 (got '%s')", v);
      return 2;
    }
    usage_halflife_given = 1;
    return 0;
  }
  user_opt *o = which(a);
  if (o == NULL) {
    cli_error(verb, "unknown option '%s'", a);
    return 2;
  }
  if (user_opt_add(o, verb, v) != 0) return 2;
  if (o == &limits) limit_nodes[o->n - 1] = (int)o->value[o->n - 1];
  if (o == &alimits) alimit_nodes[o->n - 1] = (int)o->value[o->n - 1];
  return 0;
}

gs_cluster_shares cli_shares_get(void) {
  return (gs_cluster_shares){.share_user = shares.user,
                             .share_w = shares.value,
                             .nshare = shares.n,
                             .limit_user = limits.user,
                             .limit_nodes = limit_nodes,
                             .nlimit = limits.n,
                             .account_name = accounts.user,
                             .account_w = accounts.value,
                             .naccount = accounts.n,
                             .account_limit_name = alimits.user,
                             .account_limit_nodes = alimit_nodes,
                             .naccount_limit = alimits.n,
                             .usage_halflife_s = usage_halflife};
}

/* A job's row of the accounts' report. */
typedef struct owner_row {
  char key[GS_CLUSTER_ACCOUNT_MAX + GS_CLUSTER_NAME_MAX + 8];
  int job;
} owner_row;

static int cmp_owner(const void *a, const void *b) {
  const owner_row *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : x->job - y->job;
}

int cli_owner_table(const cli_owner_jobs *j, cJSON *json, const char *title) {
  int n = j->n;
  owner_row *row = malloc((size_t)n * sizeof *row + 1);
  if (row == NULL) return -1;
  double used = 0, fair = 0;
  for (int q = 0; q < n; q++) {
    row[q].job = q;
    if (j->account[q][0]) snprintf(row[q].key, sizeof row[q].key, "%s", j->account[q]);
    else if (j->user[q][0]) snprintf(row[q].key, sizeof row[q].key, "user %s", j->user[q]);
    else snprintf(row[q].key, sizeof row[q].key, "-");
    used += j->node_s[q];
    fair += j->fair_s[q];
  }
  qsort(row, (size_t)n, sizeof *row, cmp_owner);
  int live = j->nodes_now != NULL;
  cJSON *arr = json ? cJSON_AddArrayToObject(json, "accounts") : NULL;
  if (json && arr == NULL) {
    free(row);
    return -1;
  }
  if (!json) {
    printf("  %-28s %5s", "account (or user)", "jobs");
    if (live) printf(" %7s %5s", "running", "nodes");
    printf(" %10s %6s %10s %6s", "node_h", "used", "fair_h", "fair");
    if (j->usage_s) printf(" %9s", "decayed_h");
    printf(" %9s   (%s)\n", "jct_mean", title);
  }
  for (int a = 0; a < n;) {
    const char *key = row[a].key;
    int jobs = 0, done = 0, running = 0, nodes = 0;
    double u = 0, f = 0, jsum = 0, dec = 0;
    for (; a < n && strcmp(row[a].key, key) == 0; a++) {
      int q = row[a].job;
      jobs++;
      u += j->node_s[q];
      if (j->usage_s) dec += j->usage_s[q];
      f += j->fair_s[q];
      if (j->jct_s[q] >= 0) jsum += j->jct_s[q], done++;
      if (live && j->nodes_now[q] >= 0) running++, nodes += j->nodes_now[q];
    }
    double us = used > 0 ? u / used : 0, fs = fair > 0 ? f / fair : 0;
    double jm = done ? jsum / done : 0;
    char clean[sizeof row->key + 16];
    cli_clean_text(clean, sizeof clean, key);
    if (arr) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "account", clean);
      cJSON_AddNumberToObject(o, "jobs", jobs);
      cJSON_AddNumberToObject(o, "done", done);
      if (live) {
        cJSON_AddNumberToObject(o, "running", running);
        cJSON_AddNumberToObject(o, "nodes", nodes);
      }
      cli_json_add(o, "node_s", u, "%.1f");
      cli_json_add(o, "used_share", us, "%.4f");
      cli_json_add(o, "fair_node_s", f, "%.1f");
      cli_json_add(o, "fair_share", fs, "%.4f");
      if (j->usage_s) cli_json_add(o, "usage_node_s", dec, "%.1f");
      if (done) cli_json_add(o, "jct_mean_s", jm, "%.2f");
      cJSON_AddItemToArray(arr, o);
    } else {
      char cell[4 * 28 + 1];
      printf("  %s %5d", cli_cell(cell, sizeof cell, clean, 28), jobs);
      if (live) printf(" %7d %5d", running, nodes);
      printf(" %10.3f %6.3f %10.3f %6.3f", u / 3600, us, f / 3600, fs);
      if (j->usage_s) printf(" %9.3f", dec / 3600);
      char jms[32];
      if (done) printf(" %9s\n", cli_secs(jms, sizeof jms, jm));
      else printf(" %9s\n", "-");
    }
  }
  free(row);
  return 0;
}
