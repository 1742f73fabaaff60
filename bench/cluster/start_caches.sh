#!/usr/bin/env bash
# A job's start on CPU-capped emulated nodes, and the two caches that
# shorten it: the data cache mapped rather than read (train --data-cache,
# format 2), and the calibration kept per node set (run --cost-cache, which
# the cluster manager passes its jobs). The job: `gradsync train --model cnn
# --max-steps 2 --global-batch 1536 --checkpoint DIR` (the cluster traces'
# cnn-big, 2 steps; a fresh DIR each launch), on K emulated nodes (one rank
# a node, 1 Gbit/s, --node-cpus C). Variants, alternating in each
# repetition, every cache warm:
#   read      BASE_GRADSYNC (a build before the mapping: reads its data
#             cache into memory), no calibration cache;
#   map       this build, no calibration cache;
#   map+cost  this build, --cost-cache.
# Per launch: launch to exit (total) and the program's steps (train_s).
# Writes $BENCH_OUT/cluster_start_caches.jsonl and .md. Needs root.
# Usage: BASE_GRADSYNC=PATH bench/cluster/start_caches.sh [REPS] (default 2;
# without BASE_GRADSYNC the read variant is left out). BENCH_QUICK=1: 1 rep.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
base=${BASE_GRADSYNC:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
reps=${1:-2}
cpus=${CLUSTER_NODE_CPUS:-0.22}
sizes=(1 3)
[ "$BENCH_QUICK" = 1 ] && reps=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variants=(map map+cost)
[ -n "$base" ] && variants=(read map map+cost)
train=(train --model cnn --max-steps 2 --global-batch 1536 --epochs 1 --seed 1 --json)
# Warm every cache: each build's data cache, and the calibration of each size.
"$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
[ -n "$base" ] &&
  "$base" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache1" >/dev/null 2>&1
for k in "${sizes[@]}"; do
  "$gs" run -np "$k" --net 1gbit --node-cpus "$cpus" --cost-cache "$tmp/cost" -- \
    "$gs" "${train[@]}" --data-cache "$tmp/cache" >/dev/null 2>&1
done
out=$BENCH_OUT/cluster_start_caches.jsonl
: >"$out"
n=0
for r in $(seq 1 "$reps"); do
  for k in "${sizes[@]}"; do
    for v in "${variants[@]}"; do
      n=$((n + 1))
      case $v in
        read) cmd=("$base" run -np "$k" --net 1gbit --node-cpus "$cpus" -- "$base" "${train[@]}"
                   --data-cache "$tmp/cache1") ;;
        map) cmd=("$gs" run -np "$k" --net 1gbit --node-cpus "$cpus" -- "$gs" "${train[@]}"
                  --data-cache "$tmp/cache") ;;
        map+cost) cmd=("$gs" run -np "$k" --net 1gbit --node-cpus "$cpus" --cost-cache
                       "$tmp/cost" -- "$gs" "${train[@]}" --data-cache "$tmp/cache") ;;
      esac
      t0=$(date +%s.%N)
      "${cmd[@]}" --checkpoint "$tmp/ckpt$n" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
      t1=$(date +%s.%N)
      python3 - "$tmp/out" "$r" "$k" "$v" "$t0" "$t1" >>"$out" <<'PY'
import json, sys
s = [json.loads(l)["summary"] for l in open(sys.argv[1]) if l.startswith('{"summary"')][-1]
print(json.dumps({"rep": int(sys.argv[2]), "nodes": int(sys.argv[3]), "variant": sys.argv[4],
                  "total_s": round(float(sys.argv[6]) - float(sys.argv[5]), 3),
                  "wall_s": s["wall_s"], "train_s": s["train_s"], "data": s["data"]}))
PY
    done
  done
done
bench_stamp "$out" "$(bench_quote "$gs" run -np K --net 1gbit --node-cpus "$cpus" \
  [--cost-cache DIR] -- "$gs" "${train[@]}" --data-cache DIR --checkpoint DIR) for K in \
  ${sizes[*]}; read: BASE_GRADSYNC=$base"
python3 - "$out" "$cpus" "$reps" >"$BENCH_OUT/cluster_start_caches.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"rep"')]
variants = [v for v in ("read", "map", "map+cost") if any(r["variant"] == v for r in rows)]
print("# A job's start on CPU-capped nodes: the data cache mapped, the calibration kept\n")
print(f"`gradsync run -np K --net 1gbit --node-cpus {sys.argv[2]} [--cost-cache DIR] -- gradsync "
      "train --model cnn --max-steps 2 --global-batch 1536 --data-cache DIR --checkpoint DIR` "
      "(one rank a node, a fresh checkpoint directory each launch, every cache warm). read: a "
      "build before the data cache was mapped (it reads the file into memory), no calibration "
      "cache; map: this build; map+cost: this build with --cost-cache. Launch to exit, the "
      f"median of {sys.argv[3]} repetition(s) (range), the variants alternating; steps: the "
      "summary's train_s. Absolute times vary on this shared 2-core host.\n")
print("| nodes | " + " | ".join(f"{v} total (s)" for v in variants) + " | " +
      " | ".join(f"{v} / {variants[0]}" for v in variants[1:]) + " | " +
      " | ".join(f"{v} steps (s)" for v in variants) + " |")
print("|---:|" + "---:|" * (3 * len(variants) - 1))
def cell(v):
    m = statistics.median(v)
    return f"{m:.1f} ({min(v):.1f}-{max(v):.1f})" if len(v) > 1 else f"{m:.1f}"
for k in sorted({r["nodes"] for r in rows}):
    tot = {v: [r["total_s"] for r in rows if r["nodes"] == k and r["variant"] == v] for v in variants}
    st = {v: [r["train_s"] for r in rows if r["nodes"] == k and r["variant"] == v] for v in variants}
    first = statistics.median(tot[variants[0]])
    print(f"| {k} | " + " | ".join(cell(tot[v]) for v in variants) + " | " +
          " | ".join(f"{statistics.median(tot[v]) / first:.2f}x" for v in variants[1:]) + " | " +
          " | ".join(cell(st[v]) for v in variants) + " |")
PY
bench_stamp "$BENCH_OUT/cluster_start_caches.md" \
  "BASE_GRADSYNC=$base CLUSTER_NODE_CPUS=$cpus bench/cluster/start_caches.sh $*"
cat "$BENCH_OUT/cluster_start_caches.md"
