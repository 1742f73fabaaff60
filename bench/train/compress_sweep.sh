#!/usr/bin/env bash
# Issue #9's training benchmark: gradient compression inside the engine on
# the main job's model and schedule (cnn, Fashion-MNIST, batch 64 per rank,
# SGD lr 0.05 momentum 0.9, 0.3 epoch warm-up, cosine), 4 ranks on 4
# emulated nodes, every run of one table in the same invocation:
#   1. 100 Mbit/s: dense (policy auto) against top-k 1% with error feedback,
#      EPOCHS epochs each: time to 88% test accuracy, accuracy at the end;
#   2. 100 Mbit/s: every compressor with and without error feedback, for a
#      shorter run (TABLE_EPOCHS epochs of at most TABLE_STEPS steps);
#   3. 1 Gbit/s: auto with compression allowed (auto:topk:0.01) against
#      dense, EPOCHS_1G epochs each.
# Writes bench/results/compress.{jsonl,md}, stamped (bench/lib.sh). Needs
# root (--net). The runs are sequential; the machine is shared with other
# jobs, which the result file says.
#
# Usage: bench/train/compress_sweep.sh [EPOCHS] [TABLE_EPOCHS] [TABLE_STEPS] [EPOCHS_1G]
#   BENCH_QUICK=1: every run 1 epoch of at most 20 steps (a smoke run).
#   SKIP=1,3 leaves parts out.
#   MAX_STEPS=N: at most N steps per epoch in parts 1 and 3 (recorded in
#   every command; for when the full runs do not fit).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
epochs=${1:-4}
table_epochs=${2:-1}
table_steps=${3:-120}
epochs_1g=${4:-2}
limit=()
[ -n "${MAX_STEPS:-}" ] && limit=(--max-steps "$MAX_STEPS")
if [ "$BENCH_QUICK" = 1 ]; then
  epochs=1 table_epochs=1 table_steps=20 epochs_1g=1 limit=(--max-steps 20)
fi
skip=",${SKIP:-},"
[ -n "${GS:-}" ] || bench_build gradsync_cli
gs=${GS:-$BENCH_BUILD/gradsync}
out=$BENCH_OUT/compress.jsonl
tmp=$(mktemp /tmp/gradsync-compress.XXXXXX)
cmds=()
# run PART LABEL NET EPOCHS [train options...]: one training run, its JSON
# lines tagged with the part and label.
run() {
  local part=$1 label=$2 net=$3 ep=$4
  shift 4
  local argv=("$gs" run -np 4 --net "$net" -- "$gs" train --model cnn --epochs "$ep"
              --batch 64 --lr 0.05 --warmup-epochs 0.3 --schedule cosine --json "$@")
  echo "== $part $label ($net, $ep epoch(s)) ($(date +%T))" >&2
  cmds+=("$(bench_quote "${argv[@]}")")
  local rc=0
  "${argv[@]}" > "$tmp.run" 2> "$tmp.err" || rc=$?
  python3 - "$tmp.run" "$part" "$label" "$net" "$rc" "$tmp.err" >> "$tmp" <<'PY'
import json, sys
path, part, label, net, rc, err = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
for r in rows:
    r.update({"part": part, "label": label, "net": net})
    print(json.dumps(r))
if int(rc) != 0 or not any("summary" in r for r in rows):
    tail = open(err).read()[-400:]
    print(json.dumps({"part": part, "label": label, "net": net, "failed": int(rc),
                      "stderr": tail}))
PY
}
if [[ $skip != *,1,* ]]; then
  run headline dense 100mbit "$epochs" --policy auto "${limit[@]}"
  run headline topk:0.01 100mbit "$epochs" --policy auto --compress topk:0.01 "${limit[@]}"
fi
if [[ $skip != *,2,* ]]; then
  for spec in topk:0.01 mstopk:0.01 gtopk:0.01 dgc:0.01 sidco:0.01 randomk:0.01 qsgd:16 \
              terngrad efsignsgd powersgd:4 fp16 bf16; do
    run table "$spec" 100mbit "$table_epochs" --policy auto --compress "$spec" \
        --max-steps "$table_steps"
    case $spec in fp16|bf16) continue ;; esac  # lossless enough: no residual kept
    run table "$spec --no-ef" 100mbit "$table_epochs" --policy auto --compress "$spec" \
        --no-ef --max-steps "$table_steps"
  done
  run table dense 100mbit "$table_epochs" --policy auto --max-steps "$table_steps"
fi
if [[ $skip != *,3,* ]]; then
  run fast dense 1gbit "$epochs_1g" --policy auto "${limit[@]}"
  run fast auto:topk:0.01 1gbit "$epochs_1g" --policy auto --compress auto:topk:0.01 \
      "${limit[@]}"
fi
mv "$tmp" "$out"
rm -f "$tmp.run" "$tmp.err"
all_cmds=$(printf '%s; ' "${cmds[@]}")
bench_stamp "$out" "${all_cmds%; }"
python3 bench/train/compress_report.py "$out" "$epochs" "$table_epochs" "$table_steps" \
    "$epochs_1g" > "$BENCH_OUT/compress.md"
bench_stamp "$BENCH_OUT/compress.md" "${all_cmds%; }"
cat "$BENCH_OUT/compress.md"
