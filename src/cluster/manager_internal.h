/* The manager's inside, for its tests (not installed). */
#ifndef GS_CLUSTER_MANAGER_INTERNAL_H
#define GS_CLUSTER_MANAGER_INTERNAL_H

#include <stddef.h>

#include "gradsync/cluster_manager.h"

/* Replays a journal as a starting manager does (its torn tail cut off) and
 * returns the jobs' snapshot, the JSON `gradsync jobs` reads (malloc'ed; the
 * caller frees it), or NULL with err. *records: good records; *dropped:
 * bytes cut off. */
char *cluster_replay_snapshot(const char *journal, const gs_cluster_node *nodes, int nnodes,
                              long *records, long *dropped, char *err, size_t errlen);

#endif
