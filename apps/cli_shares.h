/* The fair shares and limits of users and accounts that `gradsync cluster
 * serve` and `gradsync cluster simulate` take (--user-share, --user-limit,
 * --account-share, --account-limit; gs_cluster_shares): one parser, so the
 * simulator reads them exactly as the manager does. The values live in
 * this file's static storage (one command a process). */
#ifndef GRADSYNC_CLI_SHARES_H
#define GRADSYNC_CLI_SHARES_H

#include "gradsync/cluster_manager.h"

/* The options' help lines, for a command's usage. */
extern const char cli_shares_usage[];

/* Whether a is one of the four options. */
int cli_shares_option(const char *a);

/* Adds option a's value v (USER:W, USER:N, ACCOUNT:W or ACCOUNT:N): 0, or 2
 * after a message under verb (a malformed value, a name given twice, too
 * many names). */
int cli_shares_add(const char *verb, const char *a, const char *v);

/* What was given (pointers into this file's storage; counts 0 for none). */
gs_cluster_shares cli_shares_get(void);

#endif /* GRADSYNC_CLI_SHARES_H */
