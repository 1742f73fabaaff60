/*
 * --user-share, --user-limit, --account-share and --account-limit, for
 * `gradsync cluster serve` and `gradsync cluster simulate` (cli_shares.h).
 */
#include <stdio.h>
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
    "                   as Slurm's GrpTRES=node=N: kept with the users' limits\n";

static user_opt *which(const char *a) {
  return strcmp(a, "--user-share") == 0      ? &shares
         : strcmp(a, "--user-limit") == 0    ? &limits
         : strcmp(a, "--account-share") == 0 ? &accounts
         : strcmp(a, "--account-limit") == 0 ? &alimits
                                             : NULL;
}

int cli_shares_option(const char *a) { return which(a) != NULL; }

int cli_shares_add(const char *verb, const char *a, const char *v) {
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
  return (gs_cluster_shares){shares.user,   shares.value,  shares.n,     limits.user,
                             limit_nodes,   limits.n,      accounts.user, accounts.value,
                             accounts.n,    alimits.user,  alimit_nodes, alimits.n};
}
