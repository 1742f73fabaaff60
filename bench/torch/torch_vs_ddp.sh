#!/usr/bin/env bash
# Issue #12's speed targets: the two gradsync.torch examples (the C
# trainer's CNN on Fashion-MNIST; torchvision's ResNet-18 on synthetic 32x32
# images) on 4 emulated nodes at 1 Gbit/s and at 100 Mbit/s, three ways,
# one after the other in the same run on the same emulated cluster:
#   gradsync.torch, policy auto         (examples/*.py --policy auto)
#   gradsync.torch, policy single       (Horovod-style: one fused message)
#   PyTorch DDP, gloo, default buckets  (bench/torch/ddp_peer.py)
# Each run trains 2 epochs of a fixed number of steps and reports the last
# (the profiled policies plan after --warmup-iters 2 iterations, in epoch 1).
# Writes bench/results/torch.{jsonl,md}, stamped (bench/lib.sh). Needs root.
#
# Usage: bench/torch/torch_vs_ddp.sh [NODES]
#   BENCH_QUICK=1: 2 nodes, 1 Gbit/s only, 3 steps (a smoke run)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
n=${1:-4}
nets=(1gbit 100mbit)
# Few steps: the machine these run on is shared and slow (see the result).
cnn_steps=8 resnet_steps=2
if [ "$BENCH_QUICK" = 1 ]; then
  n=${1:-2} nets=(1gbit) cnn_steps=3 resnet_steps=1
fi
[ -n "${GS:-}" ] || bench_build gradsync_cli gradsync_python
gs=${GS:-$BENCH_BUILD/gradsync}
export PYTHONPATH=$PWD/$BENCH_BUILD/python${PYTHONPATH:+:$PYTHONPATH}
out=$BENCH_OUT/torch.jsonl
tmp=$(mktemp)
store=$(mktemp -u /tmp/gradsync-torch-ddp-store.XXXXXX)
trap 'rm -f "$tmp" "$store"' EXIT
cmds=()
for net in "${nets[@]}"; do
  for ex in fashion_mnist resnet18; do
    if [ $ex = fashion_mnist ]; then
      script=examples/torch_fashion_mnist.py args=(--epochs 2 --max-steps "$cnn_steps" --no-eval)
    else
      script=examples/torch_resnet18.py args=(--epochs 2 --steps "$resnet_steps" --batch 16)
    fi
    for mode in auto single ddp; do
      echo "== $ex, $mode, $n nodes at $net ($(date +%T))" >&2
      if [ $mode = ddp ]; then
        argv=("$gs" run -np "$n" --net "$net" -- /usr/bin/python3 bench/torch/ddp_peer.py
              "$ex" --store "$store" "${args[@]}")
      else
        argv=("$gs" run -np "$n" --net "$net" -- /usr/bin/python3 "$script" --json
              --policy "$mode" --warmup-iters 2 "${args[@]}")
      fi
      cmds+=("$(bench_quote "${argv[@]}")")
      "${argv[@]}" | python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        row = json.loads(line)
        row["net"], row["label"] = sys.argv[1], sys.argv[2]
        print(json.dumps(row), flush=True)' "$net" "$mode" >> "$tmp"
      rm -f "$store"
    done
  done
done
mv "$tmp" "$out"
all_cmds=$(printf '%s; ' "${cmds[@]}")
bench_stamp "$out" "${all_cmds%; }"
python3 bench/torch/summarize.py "$out" "$n" > "$BENCH_OUT/torch.md"
bench_stamp "$BENCH_OUT/torch.md" "${all_cmds%; }"
cat "$BENCH_OUT/torch.md"
