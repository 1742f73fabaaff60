/*
 * The layering that docs/ARCHITECTURE.md states, checked by the compiler:
 * the internal header pulls in only core, and the cost model's header
 * neither the communicator's nor MPI's, and the compressors' header neither
 * either; the planner's and the simulator's headers neither MPI nor the
 * communicator, nor the configuration search's, nor the DLRM model's; the
 * cluster library's (policies, simulator) neither MPI nor the communicator.
 * gs_algo and its names are core's.
 */
#include "gs_internal.h"

#if defined(GRADSYNC_COMM_H) || defined(GRADSYNC_COST_H) || defined(MPI_VERSION)
#error "gs_internal.h must include only gradsync/core.h"
#endif

#include "gradsync/cost.h"

#if defined(GRADSYNC_COMM_H) || defined(MPI_VERSION)
#error "gradsync/cost.h must not include gradsync/comm.h or mpi.h"
#endif

/* The compressors are pure computation below the communicator; the
 * exchange layer that moves their payloads (gradsync/compress_comm.h) is
 * the one above it. */
#include "gradsync/compress.h"

#if defined(GRADSYNC_COMM_H) || defined(MPI_VERSION)
#error "gradsync/compress.h must not include gradsync/comm.h or mpi.h"
#endif

/* The planner and the simulator are arithmetic on profiles and the cost
 * model: a tool can plan or simulate a cluster without MPI. */
#include "gradsync/plan.h"
#include "gradsync/sim.h"
#include "gradsync/search.h"

#if defined(GRADSYNC_COMM_H) || defined(GRADSYNC_COMPRESS_COMM_H) || defined(MPI_VERSION)
#error "gradsync/plan.h, sim.h and search.h must not include comm.h, compress_comm.h or mpi.h"
#endif

/* The DLRM model, its data and metrics run on one process: the
 * distributed step will call the communicator, not the other way round. */
#include "gradsync/dlrm.h"

#if defined(GRADSYNC_COMM_H) || defined(MPI_VERSION)
#error "gradsync/dlrm.h must not include gradsync/comm.h or mpi.h"
#endif

/* The cluster manager's policies and the cluster simulator (src/cluster)
 * are arithmetic on job descriptions: neither MPI nor the communicator, so
 * that a manager or a simulation runs where no MPI does. */
#include "gradsync/cluster_sim.h"
#include "policy.h"

#if defined(GRADSYNC_COMM_H) || defined(GRADSYNC_COMPRESS_COMM_H) || defined(MPI_VERSION) || \
    defined(GRADSYNC_ENGINE_H) || defined(GRADSYNC_TRAIN_PUBLIC_H)
#error "gradsync/cluster_sim.h and src/cluster/policy.h must not include comm.h, engine.h, train.h or mpi.h"
#endif

/* The cluster manager starts jobs as programs (`gradsync run`): it needs
 * neither MPI nor the communicator, so a manager host needs no MPI. */
#include "gradsync/cluster_manager.h"

#if defined(GRADSYNC_COMM_H) || defined(MPI_VERSION)
#error "gradsync/cluster_manager.h must not include gradsync/comm.h or mpi.h"
#endif

#include <stdio.h>
#include <string.h>

int main(void) {
  gs_algo a = GS_ALGO_AUTO;
  if (gs_algo_parse("rabenseifner", &a) != GS_OK || a != GS_ALGO_RABENSEIFNER ||
      strcmp(gs_algo_name(GS_ALGO_HIER), "hier") != 0) {
    fprintf(stderr, "FAIL gs_algo names\n");
    return 1;
  }
  printf("ok layering\n");
  return 0;
}
