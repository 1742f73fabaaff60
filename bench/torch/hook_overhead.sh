#!/usr/bin/env bash
# The per-tensor cost of gradsync.torch's Python hook path (issue #12:
# <= 5 us per gradient tensor), one rank. Writes
# bench/results/torch_hook.jsonl, stamped (bench/lib.sh); torch_vs_ddp.sh's
# summary includes it.   Usage: bench/torch/hook_overhead.sh [REPS]
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
reps=${1:-300}
[ "$BENCH_QUICK" = 1 ] && reps=${1:-30}
bench_build gradsync_python
export PYTHONPATH=$(cd "$BENCH_BUILD" && pwd)/python${PYTHONPATH:+:$PYTHONPATH} # relative or absolute
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
argv=(/usr/bin/python3 bench/torch/hook_overhead.py "$reps")
"${argv[@]}" > "$BENCH_OUT/torch_hook.jsonl"
bench_stamp "$BENCH_OUT/torch_hook.jsonl" "$(bench_quote "${argv[@]}")"
cat "$BENCH_OUT/torch_hook.jsonl"
