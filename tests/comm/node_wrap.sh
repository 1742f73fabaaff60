#!/bin/sh
# Emulates nodes on one host for the hierarchical allreduce tests:
#   mpirun -n P node_wrap.sh K program args...
# gives world rank r the node index r / K through GRADSYNC_NODE, which
# gs_comm_create uses instead of shared memory to group ranks into nodes.
set -e
k=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:?node_wrap.sh: no MPI rank in the environment}}}
GRADSYNC_NODE=$((rank / k))
export GRADSYNC_NODE
exec "$@"
