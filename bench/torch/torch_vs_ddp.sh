#!/usr/bin/env bash
# Issue #12's speed targets: the two gradsync.torch examples (the C
# trainer's CNN on Fashion-MNIST; torchvision's ResNet-18 on synthetic 32x32
# images) on 4 emulated nodes at 1 Gbit/s and at 100 Mbit/s, four ways,
# one after the other by the same processes on the same emulated cluster
# (bench/torch/compare.py, one launch per link rate):
#   gradsync.torch, policy auto
#   gradsync.torch, policy auto with model= (DeAR's forward overlap allowed)
#   gradsync.torch, policy single       (Horovod-style: one fused message)
#   PyTorch DDP, gloo, default buckets
# Each trains 2 epochs of a fixed number of steps; a run's figure is the
# last (the profiled policies plan after 2 warm-up iterations, in epoch 1).
# ROUNDS rounds (order reversed on odd rounds); the summary gives medians
# over the rounds and the range, and each ratio as the median of the
# per-round ratios.
# Writes bench/results/torch.{jsonl,md}, stamped (bench/lib.sh). Needs root.
#
# Usage: bench/torch/torch_vs_ddp.sh [NODES]
#   CNN_STEPS=S, RESNET_STEPS=S: steps per epoch (default 30 and 4)
#   ROUNDS=R: rounds of every peer (default 3)
#   BENCH_QUICK=1: 2 nodes, 1 Gbit/s only, 3 steps (a smoke run)
#   INTERLEAVE=1: every peer alive at once, trained in turns of a few steps
#     (compare.py --interleave; CHUNKS turns each, default 24), so that the
#     host's drift over minutes cannot favour a peer; writes
#     bench/results/torch_interleaved.{jsonl,md} instead
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
n=${1:-4}
nets=(1gbit 100mbit)
# Few steps: the machine these run on is shared and slow (see the result).
cnn_steps=${CNN_STEPS:-30} resnet_steps=${RESNET_STEPS:-4} rounds=${ROUNDS:-3}
if [ "$BENCH_QUICK" = 1 ]; then
  n=${1:-2} nets=(1gbit) cnn_steps=3 resnet_steps=1 rounds=1
fi
[ -n "${GS:-}" ] || bench_build gradsync_cli gradsync_python
gs=${GS:-$BENCH_BUILD/gradsync}
export PYTHONPATH=$(cd "$BENCH_BUILD" && pwd)/python${PYTHONPATH:+:$PYTHONPATH} # relative or absolute
name=torch
[ "${INTERLEAVE:-0}" = 1 ] && name=torch_interleaved
out=$BENCH_OUT/$name.jsonl
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cmds=()
for net in "${nets[@]}"; do
  echo "== both examples x (auto, auto-overlap, single, DDP) x $rounds rounds, $n nodes" \
       "at $net ($(date +%T))" >&2
  argv=("$gs" run -np "$n" --net "$net" -- /usr/bin/python3 bench/torch/compare.py
        --epochs 2 --cnn-steps "$cnn_steps" --resnet-steps "$resnet_steps" --resnet-batch 16
        --rounds "$rounds")
  if [ "${INTERLEAVE:-0}" = 1 ]; then
    # A turn of about 2-6 s: a few steps of each example at this rate.
    case $net in
      1gbit) turn=(--interleave 8 --resnet-interleave 2) ;;
      # Two ResNet-18 steps: a DeAR peer finishes its updates at the end of
      # its turn, so with one step per turn its all-gathers never overlap.
      *) turn=(--interleave 3 --resnet-interleave 2) ;;
    esac
    chunks=${CHUNKS:-24}
    if [ "$BENCH_QUICK" = 1 ]; then
      turn=(--interleave 2 --resnet-interleave 1) chunks=2
    fi
    argv+=("${turn[@]}" --chunks "$chunks")
  fi
  cmds+=("$(bench_quote "${argv[@]}")")
  "${argv[@]}" | bench_tag_json net "$net" >> "$tmp"
done
mv "$tmp" "$out"
all_cmds=$(printf '%s; ' "${cmds[@]}")
bench_stamp "$out" "${all_cmds%; }"
summary=bench/torch/summarize.py
[ "$name" = torch_interleaved ] && summary=bench/torch/summarize_interleaved.py
python3 "$summary" "$out" "$n" > "$BENCH_OUT/$name.md"
bench_stamp "$BENCH_OUT/$name.md" "${all_cmds%; }"
cat "$BENCH_OUT/$name.md"
