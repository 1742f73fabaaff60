#!/usr/bin/env bash
# K-FAC iteration time and breakdown for dkfac, spd and dp (issue 10): cnn and
# resnet on 4 and 8 emulated nodes at 1 Gbit/s (gradsync run --net 1gbit),
# batch 32 per rank, factors every step, inverses every 5 steps. The three
# schemes of a configuration run back to back so that they see the same
# machine load. Results: bench/results/kfac_iter.jsonl (one line per run)
# and bench/results/kfac.md (tables, ratios against dkfac of the same
# configuration), stamped via bench/lib.sh. Needs root (network namespaces).
#
# Usage: bench/kfac/iter.sh [BUILD_DIR] [NODES...]
#   BENCH_QUICK=1: cnn on 4 nodes only, 2 + 5 iterations.
#   KFAC_RUNS=R: the whole sweep R times (default 1); kfac.md then gives
#   each configuration's median, each run's ratio against the dkfac run of
#   the same repetition.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
shift || true
nodes=("$@")
[ ${#nodes[@]} -gt 0 ] || nodes=(4 8)
models=(cnn resnet)
warmup=5 iters=10 inv=5 batch=32
if [ "$BENCH_QUICK" = 1 ]; then nodes=(4) models=(cnn) warmup=2 iters=5; fi
bench_build gradsync_cli kfac_iter
gs="$build/gradsync"
bin="$build/src/kfac/kfac_iter"
export OPENBLAS_NUM_THREADS=1
out="$BENCH_OUT/kfac_iter.jsonl"
: > "$out"
for rep in $(seq "${KFAC_RUNS:-1}"); do
for m in "${models[@]}"; do
  for n in "${nodes[@]}"; do
    for d in dkfac spd dp; do
      echo "== run $rep: $m, $n nodes, $d ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))" >&2
      "$gs" run -np "$n" --net 1gbit -- "$bin" "$m" "$d" "$batch" "$warmup" "$iters" "$inv" \
        | grep '^{' >> "$out"
    done
  done
done
done
cmd=$(bench_quote OPENBLAS_NUM_THREADS=1 "$gs" run -np N --net 1gbit -- "$bin" MODEL DIST \
      "$batch" "$warmup" "$iters" "$inv")
bench_stamp "$out" "$cmd"
python3 bench/kfac/summarize.py "$out" > "$BENCH_OUT/kfac.md.new"
if [ -f "$BENCH_OUT/kfac.md" ] && grep -q '^## Convergence' "$BENCH_OUT/kfac.md"; then
  sed -n '/^## Convergence/,$p' "$BENCH_OUT/kfac.md" >> "$BENCH_OUT/kfac.md.new"
fi
mv "$BENCH_OUT/kfac.md.new" "$BENCH_OUT/kfac.md"
bench_stamp "$BENCH_OUT/kfac.md" "$cmd"
cat "$BENCH_OUT/kfac.md"
