#!/usr/bin/env bash
# The fused parallel SGD update against the per-tensor loop, 1 to 4 threads,
# on the resnet, mlp and cnn models; result in bench/results/fused_update.md,
# stamped with the commit, command and machine (bench/lib.sh).
#
# Usage: bench/nn/fused_update.sh [BUILD_DIR] [ROUNDS] [STEPS_PER_ROUND]
#   BENCH_QUICK=1: 3 rounds of 10 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
rounds=${2:-15}
steps=${3:-50}
if [ "$BENCH_QUICK" = 1 ]; then rounds=${2:-3} steps=${3:-10}; fi
bench_build fused_update
bin="$build/src/nn/fused_update"
out="$BENCH_OUT/fused_update.md"
argv=("$bin" "$rounds" "$steps" 4)
load=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "# Fused parallel SGD update vs the per-tensor loop"
  echo
  echo "One SGD step (momentum 0.9, weight decay) over all parameters: the per-tensor"
  echo "loop (gs_nn_sgd_step_param per tensor) against the fused pass"
  echo "(gs_nn_sgd_step over 1-4 threads, chunks of the flat array), interleaved in"
  echo "each of $rounds rounds of $steps steps; median over rounds. Results are bitwise"
  echo "identical (tests/nn/test_nn_optim.c)."
  echo
  echo "The machine has $(nproc) cores (load average $load when this started; the"
  echo "stamp has it at the end): thread counts above the free cores only add"
  echo "hand-off cost, and steps of tens of microseconds are noisy."
  echo
  "${argv[@]}"
} > "$out"
bench_stamp "$out" "$(bench_quote "${argv[@]}")"
cat "$out"
