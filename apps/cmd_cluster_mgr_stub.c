/*
 * gradsync cluster serve|submit|jobs|cancel: the cluster manager's verbs are
 * not in this build yet (issue 39, part 1). This stub stands in for
 * apps/cmd_cluster_mgr.c, which replaces it; `gradsync cluster simulate`
 * (apps/cmd_cluster.c) does not need it.
 */
#include "cli.h"

int gs_cmd_cluster_manager(int argc, char **argv) {
  (void)argc;
  cli_error("cluster", "'%s': the cluster manager is not built yet (only 'gradsync cluster "
            "simulate' is)", argv[1]);
  return 2;
}
