#!/usr/bin/env bash
# The all-reduce's share of the link it runs on (issue 36, item 3): on
# emulated clusters of 4 and 8 nodes at 1 Gbit/s, `gradsync bench --link`
# measures in one run the link's own ceiling (every rank sends the
# all-reduce's bus bytes to the next with plain MPI_Sendrecv, at once; on
# this host the ceiling is the kernel carrying 4 or 8 nodes' traffic on 2
# cores as much as the 1 Gbit/s shaper), MPI's all-reduce (the peer) and
# each of gradsync's (auto, ring, rd, rabenseifner), 1 MB to 64 MB.
# ROUNDS rounds alternate the clusters, so a busy moment of the host lands
# on both; bench/summarize_link_share.py reports each cell's median share of
# the ceiling over the rounds with its range.
# Writes $BENCH_OUT/link_share_{4,8}nodes.jsonl and link_share.md. Needs root.
#
# Usage: bench/link_share.sh [ROUNDS]   (default 3)
#   BENCH_QUICK=1: one round, 1 MB to 4 MB, 4 nodes only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
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
  : >"$BENCH_OUT/link_share_${n}nodes.jsonl"
  files+=("$BENCH_OUT/link_share_${n}nodes.jsonl")
done
for ((round = 1; round <= rounds; round++)); do
  for n in "${nodes[@]}"; do
    echo "== round $round of $rounds, $n nodes ($(date +%T))" >&2
    argv=("$gs" run -np "$n" --net 1gbit -- "$gs" bench --op allreduce --link
          --min-bytes 1M --max-bytes "$max" --iters 5 --budget 2 --json)
    "${argv[@]}" | bench_tag_json round "$round" >>"$BENCH_OUT/link_share_${n}nodes.jsonl"
  done
done
cmd=$(bench_quote "${argv[@]}")
for f in "${files[@]}"; do
  bench_stamp "$f" "$cmd (ROUNDS=$rounds rounds, -np and the file's nodes)"
done
md=$BENCH_OUT/link_share.md
python3 bench/summarize_link_share.py "${files[@]}" >"$md"
bench_stamp "$md" "bench/link_share.sh $*"
cat "$md"
