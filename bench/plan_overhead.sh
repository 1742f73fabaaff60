#!/usr/bin/env bash
# Planning overhead: runs bench/plan_overhead.c (gs_plan_make per policy on a
# synthetic profile of 1,000 tensors, the median of 21 runs) and writes
# bench/results/plan_overhead.txt, stamped with the commit, command and
# machine (bench/lib.sh).
#
# Usage: bench/plan_overhead.sh [TENSORS] [REPEATS]
#   BENCH_QUICK=1: 3 repeats.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
n=${1:-1000}
reps=${2:-21}
[ "$BENCH_QUICK" = 1 ] && reps=${2:-3}
bench_build plan_overhead
bin=$(find "$BENCH_BUILD" -name plan_overhead -type f -perm -u+x | head -1)
if [ -z "$bin" ]; then
  echo "bench: no plan_overhead binary under $BENCH_BUILD" >&2
  exit 2
fi
echo "== plan overhead, $n tensors, $reps runs ($(date +%T))" >&2
cmd=$(bench_quote "$bin" "$n" "$reps")
"$bin" "$n" "$reps" > "$BENCH_OUT/plan_overhead.txt"
bench_stamp "$BENCH_OUT/plan_overhead.txt" "$cmd"
cat "$BENCH_OUT/plan_overhead.txt"
