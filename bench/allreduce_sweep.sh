#!/usr/bin/env bash
# Runs the allreduce sweep of issue #2 and writes its results under
# bench/results/: on emulated clusters of 2, 4 and 8 nodes at 1 Gbit/s and
# over shared memory with 2 ranks; each run measures MPI's own allreduce in
# the same run. Then bench/summarize.py turns them into a Markdown table.
# Usage: bench/allreduce_sweep.sh [BUILD_DIR] [MAX_BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
max=${2:-256M}
gs="$build/gradsync"
out=bench/results
mkdir -p "$out"
run() {
  local name=$1; shift
  echo "== $name" >&2
  "$gs" run "$@" -- "$gs" bench --op allreduce --min-bytes 4K --max-bytes "$max" \
    --iters 20 --budget 3 --json > "$out/$name.jsonl"
}
run allreduce_shm_2ranks -np 2
for n in 2 4 8; do
  run "allreduce_${n}nodes_1gbit" -np "$n" --net 1gbit
done
python3 bench/summarize.py "$out"/allreduce_*.jsonl > "$out/allreduce.md"
cat "$out/allreduce.md"
