#!/usr/bin/env bash
# Runs the allreduce sweep of issue #2 and writes its results under
# bench/results/: on emulated clusters of 2, 4 and 8 nodes at 1 Gbit/s and
# over shared memory with 2 ranks; each run measures MPI's own allreduce in
# the same run. Then bench/summarize.py turns them into a Markdown table.
# Every file is stamped with the commit, command and machine (bench/lib.sh).
# Needs root (gradsync run --net).
#
# Usage: bench/allreduce_sweep.sh [BUILD_DIR] [MAX_BYTES]
#   BENCH_QUICK=1: up to 64K, 3 calls per size, 2 nodes and shared memory only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
max=${2:-256M}
iters=20 budget=3 nodes=(2 4 8)
if [ "$BENCH_QUICK" = 1 ]; then
  max=${2:-64K} iters=3 budget=0.5 nodes=(2)
fi
bench_build gradsync_cli
gs="$build/gradsync"
out=$BENCH_OUT
run() {
  local name=$1 cmd
  shift
  echo "== $name ($(date +%T))" >&2
  local argv=("$gs" run "$@" -- "$gs" bench --op allreduce --min-bytes 4K --max-bytes "$max"
              --iters "$iters" --budget "$budget" --json)
  cmd=$(bench_quote "${argv[@]}")
  "${argv[@]}" > "$out/$name.jsonl"
  bench_stamp "$out/$name.jsonl" "$cmd"
  files+=("$out/$name.jsonl")
}
files=()
run allreduce_shm_2ranks -np 2
for n in "${nodes[@]}"; do
  run "allreduce_${n}nodes_1gbit" -np "$n" --net 1gbit
done
cmd=$(bench_quote python3 bench/summarize.py "${files[@]}")
python3 bench/summarize.py "${files[@]}" > "$out/allreduce.md"
bench_stamp "$out/allreduce.md" "$cmd"
cat "$out/allreduce.md"
