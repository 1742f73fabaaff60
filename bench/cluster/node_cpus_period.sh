#!/usr/bin/env bash
# The CFS period of `gradsync run --node-cpus` (docs/EMULATED_CLUSTER.md):
# the same job on 1, 2, 3 and 6 emulated nodes (one rank a node, 1 Gbit/s,
# --node-cpus C) with the cgroups' period at 100 ms (the kernel's default and
# the launcher's) and at 10 ms, set by GRADSYNC_CPU_PERIOD_US. The job: `gradsync train --model cnn --max-steps 8
# --global-batch 1536`, the cluster traces' cnn-big at half its steps.
# Per run: the launch to exit (total), the program's own wall time and its
# steps' (train_s, from its summary); total less wall is what happens before
# the program's clock starts and after it stops (MPI's start-up, the cost
# model's exchanges, the exit). The periods alternate within a repetition.
# Writes $BENCH_OUT/cluster_node_cpus_period.jsonl and .md. Needs root.
# Usage: bench/cluster/node_cpus_period.sh [REPS] (default 2; C from
# CLUSTER_NODE_CPUS, default 0.22). BENCH_QUICK=1: 1 rep, 1 and 3 nodes.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
reps=${1:-2}
cpus=${CLUSTER_NODE_CPUS:-0.22}
sizes=(1 2 3 6)
[ "$BENCH_QUICK" = 1 ] && reps=1 sizes=(1 3)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=(--model cnn --max-steps 8 --global-batch 1536 --epochs 1 --seed 1 --json
       --data-cache "$tmp/cache")
"$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
out=$BENCH_OUT/cluster_node_cpus_period.jsonl
: >"$out"
for r in $(seq 1 "$reps"); do
  for k in "${sizes[@]}"; do
    for p in 100000 10000; do
      t0=$(date +%s.%N)
      GRADSYNC_CPU_PERIOD_US=$p "$gs" run -np "$k" --net 1gbit --node-cpus "$cpus" -- \
        "$gs" train "${train[@]}" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
      t1=$(date +%s.%N)
      python3 - "$tmp/out" "$r" "$k" "$p" "$t0" "$t1" >>"$out" <<'PY'
import json, sys
s = [json.loads(l)["summary"] for l in open(sys.argv[1]) if l.startswith('{"summary"')][-1]
print(json.dumps({"rep": int(sys.argv[2]), "nodes": int(sys.argv[3]),
                  "period_us": int(sys.argv[4]),
                  "total_s": round(float(sys.argv[6]) - float(sys.argv[5]), 3),
                  "wall_s": s["wall_s"], "train_s": s["train_s"],
                  "images_per_s": s["images_per_s"]}))
PY
    done
  done
done
bench_stamp "$out" "$(bench_quote "$gs" run -np K --net 1gbit --node-cpus "$cpus" -- "$gs" \
  train "${train[@]}") for K in ${sizes[*]}, GRADSYNC_CPU_PERIOD_US=100000 and 10000"
python3 - "$out" "$cpus" "$reps" >"$BENCH_OUT/cluster_node_cpus_period.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"rep"')]
print("# The CPU cap's period on the emulated nodes\n")
print(f"`gradsync run -np K --net 1gbit --node-cpus {sys.argv[2]} -- gradsync train --model cnn "
      "--max-steps 8 --global-batch 1536` (one rank a node), with the nodes' CFS period at 100 ms "
      "and at 10 ms (GRADSYNC_CPU_PERIOD_US), alternating; the median of "
      f"{sys.argv[3]} repetition(s) (range). total: launch to exit; outside: total less the "
      "program's own wall time (MPI's start-up, the cost model's exchanges, the exit); steps: "
      "the summary's train_s. Absolute times vary on this shared 2-core host.\n")
print("| nodes | total 100 ms (s) | total 10 ms (s) | 10 ms / 100 ms | outside 100 ms (s) "
      "| outside 10 ms (s) | steps 100 ms (s) | steps 10 ms (s) |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
def cell(v):
    m = statistics.median(v)
    return f"{m:.1f} ({min(v):.1f}-{max(v):.1f})" if len(v) > 1 else f"{m:.1f}"
for k in sorted({r["nodes"] for r in rows}):
    a = [r for r in rows if r["nodes"] == k and r["period_us"] == 100000]
    b = [r for r in rows if r["nodes"] == k and r["period_us"] == 10000]
    ta = [r["total_s"] for r in a]; tb = [r["total_s"] for r in b]
    oa = [r["total_s"] - r["wall_s"] for r in a]; ob = [r["total_s"] - r["wall_s"] for r in b]
    sa = [r["train_s"] for r in a]; sb = [r["train_s"] for r in b]
    print(f"| {k} | {cell(ta)} | {cell(tb)} | {statistics.median(tb) / statistics.median(ta):.2f} "
          f"| {cell(oa)} | {cell(ob)} | {cell(sa)} | {cell(sb)} |")
PY
bench_stamp "$BENCH_OUT/cluster_node_cpus_period.md" \
  "CLUSTER_NODE_CPUS=$cpus bench/cluster/node_cpus_period.sh $*"
cat "$BENCH_OUT/cluster_node_cpus_period.md"
