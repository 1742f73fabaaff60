#!/bin/sh
# Sets environment variables on one rank only:
#   mpirun -n P rank_env.sh R VAR=VALUE [VAR=VALUE...] -- program args...
# exports each VAR=VALUE on world rank R and runs the program on every rank.
set -e
target=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:?rank_env.sh: no MPI rank in the environment}}}
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  if [ "$rank" = "$target" ]; then export "$1"; fi
  shift
done
shift
exec "$@"
