#!/usr/bin/env bash
# Convergence on Fashion-MNIST (issue 10): test accuracy against training
# progress for SGD and K-FAC schemes on the cnn, 2 ranks (shared memory),
# batch 128 per rank (global 256, the main job's 4 x 64), lr 0.05, momentum
# 0.9, cosine decay over the run after a warm-up of 0.3 rounds. To see accuracy more often
# than once per pass, a run is E evaluation rounds of S steps each
# (--epochs E --max-steps S, each round a fresh shuffle): S = 59 steps x 256
# samples is 0.25 of a pass over the 60,000 training images. The runs go
# concurrently (the machine has 2 cores, shared with other work: wall times
# are inflated and only comparable within one invocation).
# Results: bench/results/kfac_converge_<name>.jsonl and a section of
# bench/results/kfac.md, stamped via bench/lib.sh.
#
# Usage: bench/kfac/converge.sh [BUILD_DIR] [ROUNDS] [NAME...]
#   NAME: sgd, dkfac, spd, dp (default: sgd dkfac dp)
#   BENCH_LIMIT_S=S: stop every run after S seconds (the summary says which
#   runs were cut short and uses the rounds they finished).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
rounds=${2:-8}
shift 2 || shift $#
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(sgd dkfac dp)
steps=59
bench_build gradsync_cli
gs="$build/gradsync"
export OPENBLAS_NUM_THREADS=1
common=(--model cnn --epochs "$rounds" --max-steps "$steps" --batch 128 --lr 0.05
        --momentum 0.9 --warmup-epochs 0.3 --schedule cosine --json)
pids=()
for n in "${names[@]}"; do
  extra=()
  [ "$n" = sgd ] || extra=(--optimizer kfac --kfac-dist "$n")
  argv=("$gs" run -np 2 -- "$gs" train "${common[@]}" "${extra[@]}")
  echo "== $n: $(bench_quote "${argv[@]}") ($(date +%T))" >&2
  ( start=$(date +%s.%N)
    set +e
    timeout "${BENCH_LIMIT_S:-86400}" "${argv[@]}" | grep --line-buffered '^{' \
      > "$BENCH_OUT/kfac_converge_$n.jsonl"
    rc=${PIPESTATUS[0]}
    set -e
    echo "{\"wall_s\": $(echo "$(date +%s.%N) - $start" | bc), \"exit\": $rc}" \
      >> "$BENCH_OUT/kfac_converge_$n.jsonl"
    bench_stamp "$BENCH_OUT/kfac_converge_$n.jsonl" "$(bench_quote "${argv[@]}")"
    echo "== $n done ($(date +%T))" >&2 ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
python3 bench/kfac/converge_summary.py "$steps" "$BENCH_OUT" "${names[@]}" \
  > "$BENCH_OUT/kfac_converge.md"
bench_stamp "$BENCH_OUT/kfac_converge.md" "$(bench_quote "$gs" run -np 2 -- "$gs" train \
  "${common[@]}" "[--optimizer kfac --kfac-dist NAME]")"
cat "$BENCH_OUT/kfac_converge.md"
