#!/usr/bin/env bash
# Issue #4's data-parallel benchmark: gradsync train (policy auto) against
# PyTorch DistributedDataParallel (gloo, default buckets) on the same CNN,
# batch 64 per rank, Fashion-MNIST, 4 emulated nodes at 1 Gbit/s, measured
# in the same run. Writes bench/results/train_vs_ddp.{jsonl,md}, stamped with
# the commit, commands and machine (bench/lib.sh). Needs root (--net).
#
# Usage: bench/train/train_vs_ddp.sh [EPOCHS] [NODES]
#   BENCH_QUICK=1: 1 epoch of at most 20 steps on 2 nodes (a smoke run: the
#   step limit skews both sides' epoch times).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
epochs=${1:-2}
n=${2:-4}
limit=()
if [ "$BENCH_QUICK" = 1 ]; then
  epochs=${1:-1} n=${2:-2} limit=(--max-steps 20)
fi
[ -n "${GS:-}" ] || bench_build gradsync_cli
gs=${GS:-$BENCH_BUILD/gradsync}
out=$BENCH_OUT/train_vs_ddp.jsonl
store=$(mktemp -u /tmp/gradsync-ddp-store.XXXXXX)
echo "== gradsync train: cnn, $n ranks, $epochs epoch(s) ($(date +%T))" >&2
gs_argv=("$gs" run -np "$n" --net 1gbit -- "$gs" train --model cnn --epochs "$epochs"
         --batch 64 --lr 0.05 --warmup-epochs 0.3 --schedule cosine --policy auto
         "${limit[@]}" --json)
"${gs_argv[@]}" > "$out.gradsync"
echo "== PyTorch DDP (gloo): cnn, $n ranks, $epochs epoch(s) ($(date +%T))" >&2
ddp_argv=("$gs" run -np "$n" --net 1gbit -- /usr/bin/python3 bench/train/ddp_cnn.py
          --epochs "$epochs" --batch 64 --lr 0.05 --warmup-epochs 0.3 --cosine
          "${limit[@]}" --store "$store")
"${ddp_argv[@]}" > "$out.ddp"
rm -f "$store"
cat "$out.gradsync" "$out.ddp" > "$out"
rm -f "$out.gradsync" "$out.ddp"
gs_cmd=$(bench_quote "${gs_argv[@]}")
ddp_cmd=$(bench_quote "${ddp_argv[@]}")
bench_stamp "$out" "$gs_cmd; $ddp_cmd"
python3 - "$out" "$n" <<'PY' > "$BENCH_OUT/train_vs_ddp.md"
import json, sys, platform, subprocess
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
gs_epochs = [r for r in rows if "epoch" in r]
summary = next(r["summary"] for r in rows if "summary" in r)
ddp = next(r for r in rows if r.get("peer"))
g = [r["epoch_s"] for r in gs_epochs]
d = ddp["epoch_s"]
print(f"# Data-parallel training: gradsync vs PyTorch DDP\n")
print(f"CNN (1.66 M parameters), Fashion-MNIST, batch 64 per rank, {sys.argv[2]} ranks on "
      f"{sys.argv[2]} emulated nodes at 1 Gbit/s (`gradsync run --net 1gbit`), one thread per "
      f"rank, SGD lr 0.05 momentum 0.9 with 0.3 epoch of warm-up and cosine decay, the "
      f"same initialisation (Kaiming normal, zero biases), both measured in the same run by "
      f"`bench/train/train_vs_ddp.sh`.\n")
print("| epoch | gradsync s | DDP (gloo) s | DDP / gradsync |")
print("|---:|---:|---:|---:|")
for i, (a, b) in enumerate(zip(g, d)):
    print(f"| {i + 1} | {a:.1f} | {b:.1f} | {b / a:.2f}x |")
print(f"\n| | gradsync | PyTorch DDP |\n|---|---:|---:|")
print(f"| mean epoch time (s) | {sum(g) / len(g):.1f} | {sum(d) / len(d):.1f} |")
print(f"| test accuracy after {len(g)} epoch(s) | {100 * gs_epochs[-1]['test_accuracy']:.2f}% | "
      f"{100 * ddp['test_accuracy']:.2f}% |")
print(f"| policy | auto, chose {summary['chosen']} ({summary['groups']} messages per step) | "
      f"default 25 MB buckets |")
print(f"| communication hidden behind compute | {100 * summary['comm_hidden']:.0f}% | - |")
print(f"\nEnvironment: {platform.processor() or platform.machine()}, "
      f"{subprocess.getoutput('nproc')} cores, torch {ddp['torch']}, "
      f"{subprocess.getoutput('mpirun --version | head -1')}.")
PY
bench_stamp "$BENCH_OUT/train_vs_ddp.md" "$gs_cmd; $ddp_cmd"
cat "$BENCH_OUT/train_vs_ddp.md"
