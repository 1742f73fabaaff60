#!/usr/bin/env bash
# One rank alone, with and without the engine: since the training library
# runs a one-rank uncompressed job without the engine (sync_engine.c's
# solo: nothing to average, no threads to hand each gradient to), against
# BASE_GRADSYNC, a build before that (the engine at world 1: every gradient
# packed, "all-reduced" over one rank and unpacked by the engine's threads).
# The jobs: the cluster traces' three kinds on one node (bench/cluster/
# trace.py's mlp-fm, 400 steps of 48; cnn-big, 4 steps of 1536; resnet, 8 of
# 384), under `gradsync run -np 1 --net 1gbit --node-cpus C` (an emulated
# node of C cores, as the cluster manager's jobs run) and uncapped (plain
# `gradsync train`). Variants alternate in each repetition; every cache is
# warm. Per launch: launch to exit (total), the program's steps (train_s),
# its exposed communication and its test accuracy (the same in both: solo
# changes no arithmetic). Writes $BENCH_OUT/cluster_one_rank.{jsonl,md}.
# Needs root (the emulated node).
# Usage: BASE_GRADSYNC=PATH bench/cluster/one_rank.sh [REPS] (default 2;
# BENCH_QUICK=1: 1). CLUSTER_NODE_CPUS=C (default 0.22).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
base=${BASE_GRADSYNC:?BASE_GRADSYNC=PATH: a gradsync built before solo (the peer)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
reps=${1:-2}
cpus=${CLUSTER_NODE_CPUS:-0.22}
[ "$BENCH_QUICK" = 1 ] && reps=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -A kinds=(
  [mlp-fm]="--model mlp --max-steps 400 --global-batch 48"
  [cnn-big]="--model cnn --max-steps 4 --global-batch 1536"
  [resnet]="--model resnet --max-steps 8 --global-batch 384")
common=(--epochs 1 --seed 1 --json)
# Each build's data cache (its own file: the formats may differ).
"$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
"$base" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache0" >/dev/null 2>&1
out=$BENCH_OUT/cluster_one_rank.jsonl
: >"$out"
n=0
for r in $(seq 1 "$reps"); do
  for kind in mlp-fm cnn-big resnet; do
    for cap in capped uncapped; do
      for v in engine solo; do
        n=$((n + 1))
        if [ $v = engine ]; then b=$base c=$tmp/cache0; else b=$gs c=$tmp/cache; fi
        # shellcheck disable=SC2206
        job=("$b" train ${kinds[$kind]} "${common[@]}" --data-cache "$c")
        if [ $cap = capped ]; then
          cmd=("$b" run -np 1 --net 1gbit --node-cpus "$cpus" -- "${job[@]}")
        else
          cmd=("${job[@]}")
        fi
        t0=$(date +%s.%N)
        "${cmd[@]}" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
        t1=$(date +%s.%N)
        python3 - "$tmp/out" "$r" "$kind" "$cap" "$v" "$t0" "$t1" >>"$out" <<'PY'
import json, sys
s = [json.loads(l)["summary"] for l in open(sys.argv[1]) if l.startswith('{"summary"')][-1]
print(json.dumps({"rep": int(sys.argv[2]), "kind": sys.argv[3], "cap": sys.argv[4],
                  "variant": sys.argv[5],
                  "total_s": round(float(sys.argv[7]) - float(sys.argv[6]), 3),
                  "train_s": s["train_s"], "chosen": s["chosen"],
                  "exposed_comm_s": s["breakdown"]["exposed_comm_s"],
                  "test_accuracy": s["test_accuracy"]}))
PY
      done
    done
  done
done
bench_stamp "$out" "$(bench_quote "$gs" run -np 1 --net 1gbit --node-cpus "$cpus" -- \
  "$gs" train KIND "${common[@]}" --data-cache FILE), and uncapped; engine: BASE_GRADSYNC=$base"
python3 - "$out" "$cpus" "$reps" >"$BENCH_OUT/cluster_one_rank.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"rep"')]
print("# One rank alone: without the engine (solo) against the engine\n")
print(f"The cluster traces' three kinds on one rank, under `gradsync run -np 1 --net 1gbit "
      f"--node-cpus {sys.argv[2]}` (capped) and as plain `gradsync train` (uncapped). engine: "
      "BASE_GRADSYNC, a build before solo (the engine at world 1); solo: this build (no engine "
      "for one uncompressed rank). total: launch to exit; steps: the summary's train_s; "
      "exposed: its exposed communication. The median of "
      f"{sys.argv[3]} repetition(s) (range), the variants alternating. Absolute times vary on "
      "this shared 2-core host.\n")
print("| kind | cpu | engine total (s) | solo total (s) | solo / engine | engine steps (s) | "
      "solo steps (s) | solo / engine | engine exposed (s) | accuracy: engine, solo |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
def cell(v):
    m = statistics.median(v)
    return f"{m:.2f} ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else f"{m:.2f}"
for kind in ("mlp-fm", "cnn-big", "resnet"):
    for cap in ("capped", "uncapped"):
        g = lambda v, f: [r[f] for r in rows if r["kind"] == kind and r["cap"] == cap
                          and r["variant"] == v]
        if not g("solo", "total_s"):
            continue
        te, ts = g("engine", "total_s"), g("solo", "total_s")
        se, ss = g("engine", "train_s"), g("solo", "train_s")
        acc = f"{statistics.median(g('engine', 'test_accuracy')):.4f}, " \
              f"{statistics.median(g('solo', 'test_accuracy')):.4f}"
        print(f"| {kind} | {sys.argv[2] + ' cores' if cap == 'capped' else 'uncapped'} | "
              f"{cell(te)} | {cell(ts)} | "
              f"{statistics.median(ts) / statistics.median(te):.2f}x | {cell(se)} | {cell(ss)} | "
              f"{statistics.median(ss) / statistics.median(se):.2f}x | "
              f"{cell(g('engine', 'exposed_comm_s'))} | {acc} |")
PY
bench_stamp "$BENCH_OUT/cluster_one_rank.md" \
  "BASE_GRADSYNC=$base CLUSTER_NODE_CPUS=$cpus bench/cluster/one_rank.sh $*"
cat "$BENCH_OUT/cluster_one_rank.md"
