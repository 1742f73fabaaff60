#!/usr/bin/env bash
# Sync-Switch offline's BSP share F swept against BSP and ASP alone, in one
# run (issue 36, item 1): test accuracy and time of switch:offline:F for
# each F of SWEEP_F, beside --sync bsp and --sync asp, under two schedules:
#   "no warm-up":   the issue's command as given (lr 0.05, momentum 0.9,
#                   constant rate from the first step);
#   "main job's":   the main job's schedule (scripts/quickstart.sh: linear
#                   warm-up over 0.3 epochs, cosine decay).
# CNN on Fashion-MNIST, 4 workers with batch 64 and 1 server, one rank per
# emulated 1 Gbit/s node, the same seed everywhere. The budget is the
# issue's, 1 epoch cut to 120 steps per worker (SWEEP_EPOCHS=4
# SWEEP_STEPS=234 runs the main job's 4 epochs, about 8 minutes a run here).
# SWEEP_STRAGGLER=1 adds --straggler 0:2 (worker 0 computes 2x slower).
# Writes $BENCH_OUT/$SWEEP_NAME.jsonl and .md (default switch_sweep),
# stamped. Needs root.
#
# Usage: bench/sync/switch_sweep.sh [BUILD_DIR]
#   SWEEP_F="0.125 0.25 0.5 0.75"   the BSP shares
#   SWEEP_SCHEDULES="nowarmup main" the schedules
#   BENCH_QUICK=1: 10 steps, F 0.5 only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
epochs=${SWEEP_EPOCHS:-1} steps=${SWEEP_STEPS:-120}
fs=${SWEEP_F:-0.125 0.25 0.5 0.75}
schedules=${SWEEP_SCHEDULES:-nowarmup main}
if [ "$BENCH_QUICK" = 1 ]; then steps=10 fs=0.5; fi
bench_build gradsync_cli
gs="$build/gradsync"
extra=()
[ "${SWEEP_STRAGGLER:-0}" = 1 ] && extra=(--straggler 0:2)
name=${SWEEP_NAME:-switch_sweep}
out=$BENCH_OUT/$name.jsonl
: > "$out.tmp"
cmds=()
for sched in $schedules; do
  case $sched in
    nowarmup) sopts=() ;;
    main) sopts=(--warmup-epochs 0.3 --schedule cosine) ;;
    *) echo "switch_sweep: unknown schedule '$sched' (nowarmup, main)" >&2; exit 2 ;;
  esac
  for mode in bsp asp $(for f in $fs; do echo "switch:offline:$f"; done); do
    argv=("$gs" run -np 5 --net 1gbit -- "$gs" train --model cnn --epochs "$epochs"
          --max-steps "$steps" --batch 64 --lr 0.05 --momentum 0.9 "${sopts[@]}" --ps 1
          --sync "$mode" "${extra[@]}" --json)
    cmds+=("$(bench_quote "${argv[@]}")")
    echo "== $sched $mode ($(date +%T))" >&2
    line=$("${argv[@]}" 2>/dev/null | grep '"summary"' || true)
    if [ -z "$line" ]; then
      echo "{\"schedule\": \"$sched\", \"mode\": \"$mode\", \"failed\": true}" >> "$out.tmp"
    else
      echo "{\"schedule\": \"$sched\", \"mode\": \"$mode\", \"result\": $line}" >> "$out.tmp"
    fi
  done
done
mv "$out.tmp" "$out"
bench_stamp "$out" "$(IFS=';'; echo "${cmds[*]}")"
md=$BENCH_OUT/$name.md
python3 "$(dirname "$0")/summarize_sweep.py" "$out" "$epochs" "$steps" \
  "${SWEEP_STRAGGLER:-0}" > "$md"
bench_stamp "$md" "$(bench_quote python3 bench/sync/summarize_sweep.py "$out" "$epochs" \
  "$steps" "${SWEEP_STRAGGLER:-0}")"
cat "$md"
