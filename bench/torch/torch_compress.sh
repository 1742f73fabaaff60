#!/usr/bin/env bash
# Issue #12's compression target: gradsync.torch with compression="topk:0.01"
# against PyTorch DDP (gloo) on NODES emulated nodes at 100 Mbit/s, the
# Fashion-MNIST example's CNN, images/s and test accuracy after the same
# epochs (bench/torch/compress.py, one launch: both peers in the same
# processes, one after the other). Writes bench/results/torch_compress.{jsonl,md},
# stamped (bench/lib.sh). Needs root (emulated nodes).
#
# Usage: bench/torch/torch_compress.sh ["NODES..."] [EPOCHS] [TRAIN_IMAGES]
#   default: 4 nodes, 4 epochs of the whole training set (60000 images)
#   WARMUP=W: top-k's density warm-up over the first W epochs (default 1, a
#   quarter of the default run; compress_warmup_steps=, DGC's schedule from
#   25% down to 1%)
#   BENCH_QUICK=1: 2 nodes, 1 epoch of 1024 images (a smoke run)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
nodes=${1:-4} epochs=${2:-4} images=${3:-60000} warm=${WARMUP:-1}
if [ "$BENCH_QUICK" = 1 ]; then nodes=2 images=1024 epochs=1; fi
[ -n "${GS:-}" ] || bench_build gradsync_cli gradsync_python
gs=${GS:-$BENCH_BUILD/gradsync}
export PYTHONPATH=$(cd "$BENCH_BUILD" && pwd)/python${PYTHONPATH:+:$PYTHONPATH} # relative or absolute
out=$BENCH_OUT/torch_compress.jsonl
: > "$out.tmp"
cmds=()
for n in $nodes; do
  argv=("$gs" run -np "$n" --net 100mbit -- /usr/bin/python3 bench/torch/compress.py
        --epochs "$epochs" --train-images "$images" --modes topk:0.01,ddp
        --compress-warmup "$warm")
  cmds+=("$(bench_quote "${argv[@]}")")
  echo "== topk:0.01 vs DDP, $n nodes at 100mbit ($(date +%T))" >&2
  "${argv[@]}" | grep '^{' >> "$out.tmp"
done
mv "$out.tmp" "$out"
cmd=$(printf '%s; ' "${cmds[@]}")
cmd=${cmd%; }
bench_stamp "$out" "$cmd"
python3 - "$out" > "$BENCH_OUT/torch_compress.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if not l.startswith('{"stamp"')]
print("# gradsync.torch with top-k compression against PyTorch DDP at 100 Mbit/s\n")
print("N ranks on N emulated nodes at 100 Mbit/s (`gradsync run --net 100mbit`), the "
      "Fashion-MNIST example's CNN (1,663,370 parameters, 6.65 MB of gradients), batch 64 per "
      "rank, SGD momentum 0.9 with the example's schedule (warm-up, cosine), the same "
      "initialisation and data order for both peers, trained one after the other by the same "
      "processes (`bench/torch/compress.py`); gradsync with policy auto and "
      "`compression=\"topk:0.01\"` (error feedback on; `compress_warmup_steps` as the "
      "table says: the density starts at 25% and falls exponentially to 1% over those "
      "steps), DDP with gloo and its default "
      "buckets. Test accuracy on the whole 10,000-image test set after the same epochs.\n")
print("| nodes | peer | steps | train s | images/s | test accuracy | bytes sent per step (rank 0) |")
print("|---:|---|---:|---:|---:|---:|---|")
for r in rows:
    b = (f"{r['bytes_per_step'] / 1e3:.0f} kB (dense: {r['dense_bytes_per_step'] / 1e6:.2f} MB)"
         if "bytes_per_step" in r else "dense all-reduce of 6.65 MB")
    name = ("DDP (gloo)" if r["mode"] == "ddp" else
            f"gradsync.torch {r['mode']} ({r['policy']}: {r['chosen']}, {r['messages']} messages"
            + (f" in the last of {r['plans']} plans" if "plans" in r else "")
            + (f", warm-up {r['compress_warmup_steps']} steps" if r.get("compress_warmup_steps")
               else "") + ")")
    print(f"| {r['ranks']} | {name} | {r['steps']} | {r['train_s']:.1f} | "
          f"{r['images_per_s']:.1f} | {100 * r['test_accuracy']:.2f}% | {b} |")
print()
for n in sorted({r["ranks"] for r in rows}):
    by = {r["mode"]: r for r in rows if r["ranks"] == n}
    if "ddp" in by and "topk:0.01" in by:
        t, d = by["topk:0.01"], by["ddp"]
        print(f"- {n} nodes: topk:0.01 / DDP images/s **{t['images_per_s'] / d['images_per_s']:.2f}x** "
              f"(target >= 2x); test accuracy topk - DDP **{100 * (t['test_accuracy'] - d['test_accuracy']):+.2f} "
              f"points** (target within 1).")
PY
bench_stamp "$BENCH_OUT/torch_compress.md" "$cmd"
cat "$BENCH_OUT/torch_compress.md"
