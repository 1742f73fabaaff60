#!/usr/bin/env bash
# Convergence on Fashion-MNIST (issue 10): test accuracy against training
# progress for SGD and K-FAC schemes on the cnn, 2 ranks (shared memory),
# batch 128 per rank (global 256, the main job's 4 x 64), lr 0.05, cosine
# decay over the run after a warm-up of 0.3 rounds; momentum 0.9 for SGD (the
# main job's) and K-FAC's own default, 0.5, for the K-FAC schemes. To see accuracy more often
# than once per pass, a run is E evaluation rounds of S steps each
# (--epochs E --max-steps S, each round a fresh shuffle): S = 59 steps x 256
# samples is 0.25 of a pass over the 60,000 training images. The runs go
# one after another (BENCH_PARALLEL=1: all at once, faster, but then each
# run's wall time includes the others').
# Results: bench/results/kfac_converge_<name>.jsonl and a section of
# bench/results/kfac.md, stamped via bench/lib.sh.
#
# Usage: bench/kfac/converge.sh [BUILD_DIR] [ROUNDS] [NAME...]
#   NAME: sgd, dkfac, spd, dp (default: sgd dkfac dp)
#   BENCH_LIMIT_S=S: stop every run after S seconds (the summary says which
#   runs were cut short and uses the rounds they finished).
#   BENCH_STOP_ACC=A: stop a run at its first evaluation at or above A
#   (e.g. 0.90: the time to 90% without the rounds after it).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
rounds=${2:-8}
shift 2 || shift $#
names=("$@")
export BENCH_PARALLEL=${BENCH_PARALLEL:-0}
[ ${#names[@]} -gt 0 ] || names=(sgd dkfac dp)
steps=59
bench_build gradsync_cli
gs="$build/gradsync"
export OPENBLAS_NUM_THREADS=1
common=(--model cnn --epochs "$rounds" --max-steps "$steps" --batch 128 --lr 0.05
        --warmup-epochs 0.3 --schedule cosine --json)
pids=()
for n in "${names[@]}"; do
  extra=(--momentum 0.9)
  [ "$n" = sgd ] || extra=(--optimizer kfac --kfac-dist "$n")
  argv=("$gs" run -np 2 -- "$gs" train "${common[@]}" "${extra[@]}")
  echo "== $n: $(bench_quote "${argv[@]}") ($(date +%T))" >&2
  ( start=$(date +%s.%N) raw="$BENCH_OUT/kfac_converge_$n.raw" stopped=0
    set +e
    timeout "${BENCH_LIMIT_S:-86400}" "${argv[@]}" > "$raw" 2> "$raw.err" &
    tp=$!
    # BENCH_STOP_ACC=A: end a run at its first evaluation at or above A.
    while [ -n "${BENCH_STOP_ACC:-}" ] && kill -0 "$tp" 2>/dev/null; do
      if grep -o '"test_accuracy":[0-9.]*' "$raw" |
         awk -F: -v a="$BENCH_STOP_ACC" '$2 >= a { f = 1 } END { exit !f }'; then
        stopped=1 && kill "$tp" && break
      fi
      sleep 1
    done
    wait "$tp"
    rc=$?
    set -e
    grep '^{' "$raw" > "$BENCH_OUT/kfac_converge_$n.jsonl" || true
    [ "$rc" = 0 ] || [ $stopped = 1 ] || { echo "== $n failed (exit $rc):" >&2; tail -5 "$raw.err" >&2; }
    rm -f "$raw" "$raw.err"
    echo "{\"wall_s\": $(echo "$(date +%s.%N) - $start" | bc), \"exit\": $rc, \"stopped_at_target\": $([ $stopped = 1 ] && echo true || echo false)}" \
      >> "$BENCH_OUT/kfac_converge_$n.jsonl"
    bench_stamp "$BENCH_OUT/kfac_converge_$n.jsonl" "$(bench_quote "${argv[@]}")"
    echo "== $n done ($(date +%T))" >&2 ) &
  pids+=($!)
  [ "${BENCH_PARALLEL:-0}" = 1 ] || wait "$!"
done
for p in "${pids[@]}"; do wait "$p"; done
python3 bench/kfac/converge_summary.py "$steps" "$BENCH_OUT" "${names[@]}" \
  > "$BENCH_OUT/kfac_converge.md"
bench_stamp "$BENCH_OUT/kfac_converge.md" "$(bench_quote "$gs" run -np 2 -- "$gs" train \
  "${common[@]}" "[--momentum 0.9 | --optimizer kfac --kfac-dist NAME]")"
cat "$BENCH_OUT/kfac_converge.md"
