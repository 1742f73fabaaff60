/* The fair shares and limits of users and accounts that `gradsync cluster
 * serve` and `gradsync cluster simulate` take (--user-share, --user-limit,
 * --account-share, --account-limit, --usage-halflife; gs_cluster_shares): one parser, so the
 * simulator reads them exactly as the manager does. The values live in
 * this file's static storage (one command a process). */
#ifndef GRADSYNC_CLI_SHARES_H
#define GRADSYNC_CLI_SHARES_H

#include <cjson/cJSON.h>

#include "gradsync/cluster_manager.h"

/* The options' help lines, for a command's usage. */
extern const char cli_shares_usage[];

/* Whether a is one of the five options (the four and --usage-halflife S). */
int cli_shares_option(const char *a);

/* Adds option a's value v (USER:W, USER:N, ACCOUNT:W or ACCOUNT:N): 0, or 2
 * after a message under verb (a malformed value, a name given twice, too
 * many names). */
int cli_shares_add(const char *verb, const char *a, const char *v);

/* What was given (pointers into this file's storage; counts 0 for none). */
gs_cluster_shares cli_shares_get(void);

/* The accounts' usage report of `cluster simulate` and `gradsync jobs
 * --accounts` (Slurm's sshare and sreport): one row per account (a job's
 * account path, or "user NAME" for a job that names none, "-" for
 * neither), with its jobs, the node-hours its jobs' partitions held and
 * their part of all held, the node-hours of its fair share and their part,
 * and its done jobs' mean completion time; with nodes_now (a live view)
 * also its jobs running and the nodes they hold, with usage_s its decayed
 * usage (what lowers its fair share). */
typedef struct cli_owner_jobs {
  int n;                          /* jobs */
  const char *const *user;        /* [n]: each job's user ("" none) */
  const char *const *account;     /* [n]: its account's path ("" none) */
  const double *node_s, *fair_s;  /* [n]: node-seconds held, of its fair share */
  const double *jct_s;            /* [n]: its completion time (< 0: not done) */
  const int *nodes_now;           /* [n]: nodes it holds now (-1: not running);
                                   * NULL: no such columns */
  const double *usage_s;          /* [n]: its usage decayed by --usage-halflife
                                   * (node-seconds); NULL: no such column */
} cli_owner_jobs;

/* Prints the report as a table under title (e.g. "policy dorm"), or adds
 * it to json as an "accounts" array when json is not NULL. 0, or -1 out of
 * memory (nothing printed). */
int cli_owner_table(const cli_owner_jobs *jobs, cJSON *json, const char *title);

#endif /* GRADSYNC_CLI_SHARES_H */
