#!/usr/bin/env bash
# The all-to-all's share of the link and its speed against MPI's (issue 37's
# exchange target: bus bandwidth >= 90% of the link from 1 MB, >= 1x
# MPI_Alltoallv in the same run), on emulated clusters of 4 and 8 nodes at
# 1 Gbit/s, one rank a node. `gradsync bench --link` measures in one run the
# link's own ceiling (every rank sends the all-to-all's bus bytes, (p-1)/p of
# its buffer, to the next with plain MPI_Sendrecv, at once), MPI's collective
# (the peer: MPI_Alltoall for --op alltoall, MPI_Alltoallv for --op
# alltoallv, the call a DLRM step makes) and gradsync's pairwise exchange,
# 1 MB to 64 MB per rank's buffer. ROUNDS rounds alternate the clusters.
# Writes $BENCH_OUT/alltoall_link_{4,8}nodes.jsonl and alltoall_link.md.
# Needs root (network namespaces).
#
# Usage: bench/embed/alltoall_link.sh [ROUNDS]   (default 3)
#   BENCH_QUICK=1: one round, 1 MB to 4 MB, 4 nodes only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
rounds=${1:-3}
max=64M nodes=(4 8)
if [ "$BENCH_QUICK" = 1 ]; then
  rounds=1 max=4M nodes=(4)
fi
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
files=()
for n in "${nodes[@]}"; do
  : >"$BENCH_OUT/alltoall_link_${n}nodes.jsonl"
  files+=("$BENCH_OUT/alltoall_link_${n}nodes.jsonl")
done
for ((round = 1; round <= rounds; round++)); do
  for n in "${nodes[@]}"; do
    for op in alltoallv alltoall; do
      echo "== round $round of $rounds, $n nodes, $op ($(date +%T))" >&2
      argv=("$gs" run -np "$n" --net 1gbit -- "$gs" bench --op "$op" --link
            --min-bytes 1M --max-bytes "$max" --iters 5 --budget 2 --json)
      "${argv[@]}" | bench_tag_json round "$round" >>"$BENCH_OUT/alltoall_link_${n}nodes.jsonl"
    done
  done
done
cmd=$(bench_quote "${argv[@]}")
for f in "${files[@]}"; do
  bench_stamp "$f" "$cmd (ROUNDS=$rounds rounds, --op alltoallv and alltoall, -np and the file's nodes)"
done
md=$BENCH_OUT/alltoall_link.md
python3 bench/embed/summarize_alltoall_link.py "${files[@]}" >"$md"
bench_stamp "$md" "bench/embed/alltoall_link.sh $*"
cat "$md"
