#!/usr/bin/env bash
# Issue #9's training benchmark: gradient compression inside the engine on
# the main job's model and schedule (cnn, Fashion-MNIST, batch 64 per rank,
# SGD lr 0.05 momentum 0.9, 0.3 epoch warm-up, cosine), 4 ranks on 4
# emulated nodes, every run of one table in the same invocation:
#   1. 100 Mbit/s: dense (policy auto) against top-k 1% with error feedback,
#      with and without density warm-up, plain and DGC's (momentum
#      correction), EPOCHS epochs each: time to 88% test accuracy, accuracy
#      at the end;
#   2. 100 Mbit/s: every compressor with and without error feedback, for a
#      shorter run (TABLE_EPOCHS epochs of at most TABLE_STEPS steps; 0: whole
#      epochs); TABLE_NET=none runs it without link shaping (for accuracy
#      after whole epochs on a machine where the shaped runs take too long:
#      its times are then compute and loopback only);
#   3. 1 Gbit/s: auto with compression allowed (auto:topk:0.01) against
#      dense, EPOCHS_1G epochs each.
# Writes bench/results/compress.{jsonl,md}, stamped (bench/lib.sh). Needs
# root (--net). The runs are sequential; the stamp records the machine's load.
#
# Usage: bench/train/compress_sweep.sh [EPOCHS] [TABLE_EPOCHS] [TABLE_STEPS] [EPOCHS_1G]
#   BENCH_QUICK=1: every run 1 epoch of at most 20 steps (a smoke run).
#   SKIP=1,3 leaves parts out.
#   MAX_STEPS=N: at most N steps per epoch in parts 1 and 3 (recorded in
#   every command; for when the full runs do not fit).
#   WARMUP=N: part 1's first top-k run warms its density up over N steps
#   (default 117, half an epoch).
#   DGC=0 leaves out part 1's two DGC runs (top-k 1% with momentum
#   correction, with and without the warm-up).
#   TABLE_SPECS="gtopk:0.01 ..." runs part 2 for those compressors only
#   (each with and without error feedback), beside its dense run.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
epochs=${1:-4}
table_epochs=${2:-1}
table_steps=${3:-120}
epochs_1g=${4:-2}
warmup=${WARMUP:-117}
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
  local shaping=(--net "$net")
  [ "$net" = none ] && shaping=()
  local argv=("$gs" run -np 4 "${shaping[@]}" -- "$gs" train --model cnn --epochs "$ep"
              --batch 64 --lr 0.05 --warmup-epochs "$lr_warmup" --schedule cosine --json "$@")
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
# Part 1 evaluates every quarter pass: an epoch of 4 x 64 samples per step is
# 234 steps, so each of the 4 x EPOCHS rounds is 59 steps of a fresh shuffle
# (4 rounds: 1.008 passes), the learning-rate warm-up 1.2 rounds (0.3 epoch),
# and the cosine decay spans all rounds.
lr_warmup=0.3
rounds=()
if [ ${#limit[@]} -eq 0 ]; then
  rounds=(--max-steps 59)
  head_epochs=$((epochs * 4)) head_warm=1.2
else
  head_epochs=$epochs head_warm=0.3
fi
if [[ $skip != *,1,* ]]; then
  lr_warmup=$head_warm
  run headline dense 100mbit "$head_epochs" --policy auto "${limit[@]}" "${rounds[@]}"
  # Top-k's density warms up as DGC's does (25% falling exponentially to 1%)
  # over the first WARMUP steps (default: one epoch of 4 x 64 samples).
  run headline "topk:0.01 warm-up $warmup" 100mbit "$head_epochs" --policy auto \
      --compress topk:0.01 --compress-warmup-steps "$warmup" "${limit[@]}" "${rounds[@]}"
  run headline "topk:0.01" 100mbit "$head_epochs" --policy auto --compress topk:0.01 \
      "${limit[@]}" "${rounds[@]}"
  # DGC: top-k 1% of the momentum-corrected residual (the optimizer's
  # momentum moves into the compressor), with and without the warm-up.
  if [ "${DGC:-1}" = 1 ]; then
    run headline "dgc:0.01 warm-up $warmup" 100mbit "$head_epochs" --policy auto \
        --compress dgc:0.01 --compress-warmup-steps "$warmup" "${limit[@]}" "${rounds[@]}"
    run headline "dgc:0.01" 100mbit "$head_epochs" --policy auto --compress dgc:0.01 \
        "${limit[@]}" "${rounds[@]}"
  fi
  lr_warmup=0.3
fi
table_net=${TABLE_NET:-100mbit}
cap=(--max-steps "$table_steps")
[ "$table_steps" = 0 ] && cap=()
if [[ $skip != *,2,* ]]; then
  specs=(topk:0.01 mstopk:0.01 gtopk:0.01 dgc:0.01 sidco:0.01 randomk:0.01 qsgd:16
         terngrad efsignsgd powersgd:4 fp16 bf16)
  [ -n "${TABLE_SPECS:-}" ] && read -r -a specs <<< "$TABLE_SPECS"
  for spec in "${specs[@]}"; do
    run table "$spec" "$table_net" "$table_epochs" --policy auto --compress "$spec" \
        "${cap[@]}"
    case $spec in fp16|bf16) continue ;; esac  # lossless enough: no residual kept
    run table "$spec --no-ef" "$table_net" "$table_epochs" --policy auto --compress "$spec" \
        --no-ef "${cap[@]}"
  done
  run table dense "$table_net" "$table_epochs" --policy auto "${cap[@]}"
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
    "$epochs_1g" "$head_epochs" > "$BENCH_OUT/compress.md"
bench_stamp "$BENCH_OUT/compress.md" "${all_cmds%; }"
cat "$BENCH_OUT/compress.md"
