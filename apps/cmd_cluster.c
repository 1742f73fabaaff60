/* gradsync cluster: BRANCH dormmgr's stand-in (the simulator's branch has
 * the real one, which sends `cluster simulate` to the simulator and every
 * other `cluster` command here). */
#include "cli.h"

int cmd_cluster(int argc, char **argv) { return gs_cmd_cluster_manager(argc, argv); }
