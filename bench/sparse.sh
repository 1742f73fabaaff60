#!/usr/bin/env bash
# Runs the sparse-exchange benchmarks of issue 9 and writes their results
# under bench/results/: gTop-k (and the flat top-k all-gather) against the
# dense ring all-reduce on 8 emulated nodes at 1 Gbit/s, and HiTopKComm
# against the flat top-k all-gather on 4 nodes x 2 ranks at 1 Gbit/s (also
# with GRADSYNC_SHM=0, and at density 0.01); each run
# measures the dense ring all-reduce of the same tensor in the same run. Then
# bench/sparse_summary.py turns them into bench/results/sparse.md. Every file
# is stamped with the commit, command and machine (bench/lib.sh). Needs root
# (gradsync run --net).
#
# Usage: bench/sparse.sh [BUILD_DIR]
#   BENCH_QUICK=1: n = 1M, 2 iterations.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
n=25600000 iters=5
if [ "$BENCH_QUICK" = 1 ]; then
  n=1000000 iters=2
fi
bench_build gradsync_cli
gs="$build/gradsync"
out=$BENCH_OUT
files=()
run() {
  local name=$1 spec=$2 cmd
  shift 2
  echo "== $name ($(date +%T))" >&2
  local argv=("$gs" run "$@" -- "$gs" bench --op sparse_allreduce --compress "$spec"
              --comm all --n "$n" --iters "$iters" --json)
  cmd=$(bench_quote ${GRADSYNC_SHM:+GRADSYNC_SHM=$GRADSYNC_SHM} "${argv[@]}")
  "${argv[@]}" > "$out/$name.jsonl"
  bench_stamp "$out/$name.jsonl" "$cmd"
  files+=("$out/$name.jsonl")
}
run sparse_8nodes_1gbit gtopk:0.001 -np 8 --net 1gbit
run sparse_4x2_1gbit topk:0.001 -np 8 --per-node 2 --net 1gbit
# The same with the node-local steps over loopback TCP (what they were before
# src/comm/shm.c), and at density 0.01, where the flat all-gather's bytes
# between nodes, not the CPUs, decide.
GRADSYNC_SHM=0 run sparse_4x2_1gbit_noshm topk:0.001 -np 8 --per-node 2 --net 1gbit
run sparse_4x2_1gbit_d01 topk:0.01 -np 8 --per-node 2 --net 1gbit
cmd=$(bench_quote python3 bench/sparse_summary.py "${files[@]}")
python3 bench/sparse_summary.py "${files[@]}" > "$out/sparse.md"
bench_stamp "$out/sparse.md" "$cmd"
cat "$out/sparse.md"
