#!/usr/bin/env bash
# Damped error feedback (gradsync train --ef-decay G): test accuracy after
# EPOCHS whole epochs of the main job (cnn, Fashion-MNIST, 4 ranks, batch 64
# per rank, SGD lr 0.05 momentum 0.9, 0.3 epoch warm-up, cosine) for
# random-k 1% without error feedback and with G = 1 (undamped), 0.99, 0.9
# and 0.5 (random-k's default), and for top-k 1% undamped and at 0.9 (what
# the damping would cost a compressor that does not need it). Runs without
# link shaping: accuracy is the point, so the table gives no times (they
# would be compute and loopback only, and this run may share the machine). Writes bench/results/ef_decay.{jsonl,md}, stamped.
#
# Usage: bench/train/ef_decay.sh [EPOCHS]     (default 4; about 3 min a run)
#   BENCH_QUICK=1: 1 epoch of 20 steps per run.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
epochs=${1:-4}
limit=()
if [ "$BENCH_QUICK" = 1 ]; then epochs=1 limit=(--max-steps 20); fi
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
out=$BENCH_OUT/ef_decay.jsonl
: > "$out.tmp"
cmds=()
configs=(
  "randomk:0.01|no EF|--no-ef"
  "randomk:0.01|1|--ef-decay 1"
  "randomk:0.01|0.99|--ef-decay 0.99"
  "randomk:0.01|0.9|--ef-decay 0.9"
  "randomk:0.01|0.5 (default)|"
  "topk:0.01|1 (default)|"
  "topk:0.01|0.9|--ef-decay 0.9"
)
for c in "${configs[@]}"; do
  IFS='|' read -r spec label args <<< "$c"
  # shellcheck disable=SC2206
  extra=($args)
  argv=("$gs" run -np 4 -- "$gs" train --model cnn --epochs "$epochs" --batch 64
        --lr 0.05 --warmup-epochs 0.3 --schedule cosine --json --policy auto
        --compress "$spec" "${extra[@]}" "${limit[@]}")
  cmds+=("$(bench_quote "${argv[@]}")")
  echo "== $spec, EF $label ($(date +%T))" >&2
  res=$("${argv[@]}" 2>/dev/null || true)
  line=$(printf '%s\n' "$res" | grep '"summary"' || true)
  last=$(printf '%s\n' "$res" | grep '^{"epoch"' | tail -1)
  if [ -z "$line" ] || [ -z "$last" ]; then
    echo "{\"spec\": \"$spec\", \"ef\": \"$label\", \"failed\": true}" >> "$out.tmp"
  else
    echo "{\"spec\": \"$spec\", \"ef\": \"$label\", \"last_epoch\": $last, \"result\": $line}" >> "$out.tmp"
  fi
done
mv "$out.tmp" "$out"
all=$(IFS=';'; echo "${cmds[*]}")
bench_stamp "$out" "$all"
md=$BENCH_OUT/ef_decay.md
python3 - "$out" "$epochs" > "$md" <<'PY'
import json, sys
path, epochs = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path) if l.startswith('{"spec"')]
print("# Damped error feedback: accuracy after whole epochs\n")
print(f"The cnn on Fashion-MNIST, 4 ranks, {epochs} epoch(s) of the main job's schedule "
      "(batch 64 per rank, SGD lr 0.05 momentum 0.9, 0.3 epoch warm-up, cosine), no link "
      "shaping and no times (accuracy is the point). EF G: the residual becomes G*e + g "
      "each step (`--ef-decay G`); `no EF` is `--no-ef`. One run per row, none picked.\n")
print("| compressor | EF G | test accuracy | last epoch's train loss |")
print("|---|---|---:|---:|")
for r in rows:
    if "result" not in r:
        print(f"| {r['spec']} | {r['ef']} | failed | |")
        continue
    s = r["result"]["summary"]
    print(f"| {r['spec']} | {r['ef']} | {100 * s['test_accuracy']:.2f}% | "
          f"{r['last_epoch']['train_loss']:.4f} |")
PY
bench_stamp "$md" "$all"
cat "$md"
