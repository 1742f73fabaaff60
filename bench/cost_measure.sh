#!/usr/bin/env bash
# Measures the all-reduce cost of emulated clusters at 1 Gbit/s and saves it
# as the cost files `gradsync plan --cost` and `gradsync simulate --cost` read:
# `gradsync bench --cost-out` times every all-reduce algorithm at eight sizes
# from 4 KB to 64 MB (the median over up to 20 calls or 3 s of them, on the
# slowest rank) and keeps the times as points. bench/sim_validate.sh prices
# the replayed plans' messages with them. For each cluster of N nodes (one
# rank per node):
#   bench/results/cost_<N>nodes_1gbit.json   the cost file, stamped
#   bench/results/cost_<N>nodes_1gbit.jsonl  bench's rows, stamped
# Needs root (gradsync run --net).
#
# Usage: bench/cost_measure.sh [NODES...]   (default 4 8)
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
nodes=("$@")
[ ${#nodes[@]} -gt 0 ] || nodes=(4 8)
bench_build gradsync_cli
gs="$BENCH_BUILD/gradsync"
out=$BENCH_OUT
for n in "${nodes[@]}"; do
  case $n in
    '' | *[!0-9]*) echo "cost_measure: '$n' is not a number of nodes" >&2; exit 2 ;;
  esac
  name="cost_${n}nodes_1gbit"
  echo "== $name ($(date +%T))" >&2
  argv=("$gs" run -np "$n" --net 1gbit -- "$gs" bench --op allreduce --min-bytes 4K
        --max-bytes 64M --iters 20 --budget 3 --json --cost-out "$out/$name.json")
  "${argv[@]}" > "$out/$name.jsonl"
  cmd=$(bench_quote "${argv[@]}")
  bench_stamp "$out/$name.jsonl" "$cmd"
  bench_stamp "$out/$name.json" "$cmd"
done
