#!/usr/bin/env bash
# The cluster simulator on gradsync's own jobs: a speed table made by
# `gradsync simulate` (iteration time of 4 model profiles on 1 to 8 workers,
# one per node, at 1 Gbit/s, the auto schedule; samples per step = the
# profile's batch times the workers) and a trace of 20 jobs arriving over 20
# minutes on 8 nodes (bench/cluster/gen_gradsync_trace.py, seed 1), under
# every policy. The shape of issue 39's real runs (20 jobs, 8 emulated
# nodes), so that they can be set beside it. Writes
# $BENCH_OUT/cluster_gradsync_speeds.csv and cluster_gradsync_workload.csv
# (inputs, for reuse), cluster_gradsync.jsonl and cluster_gradsync.md.
#
# Usage: bench/cluster/gradsync_jobs.sh [RESTART_PENALTY_S]   (default 10)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
penalty=${1:-10}
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
speeds=$BENCH_OUT/cluster_gradsync_speeds.csv
work=$BENCH_OUT/cluster_gradsync_workload.csv
echo "model,nodes,step_time_s,samples_per_step" >"$speeds"
for m in resnet50 vgg16 bert_base googlenet; do
  batch=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["batch_size"])' "profiles/$m.json")
  for n in 1 2 3 4 5 6 7 8; do
    t=$("$gs" simulate --profile "profiles/$m.json" --workers "$n" --net 1gbit --policy auto --json |
        python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["iter_s"])')
    echo "$m,$n,$t,$((batch * n))" >>"$speeds"
  done
done
python3 bench/cluster/gen_gradsync_trace.py "$speeds" "$work" 1
out=$BENCH_OUT/cluster_gradsync.jsonl
args=(--nodes 8 --policy all --restart-penalty "$penalty" --interval 60 --json)
"$gs" cluster simulate --workload "$work" --tables "$speeds" "${args[@]}" >"$out"
python3 - "$out" "$BENCH_OUT/cluster_gradsync.md" "$penalty" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"workload"')]
out = ["# The cluster simulator on gradsync's own jobs", "",
       "20 jobs of 4 model profiles (resnet50, vgg16, bert_base, googlenet) arriving over",
       "20 minutes on 8 nodes (`cluster_gradsync_workload.csv`), their speed on 1 to 8",
       "nodes as `gradsync simulate` predicts it at 1 Gbit/s with the auto schedule",
       "(`cluster_gradsync_speeds.csv`), a round every 60 s and on every arrival and",
       f"completion, {sys.argv[3]} s per restart. The shape of issue 39's real runs",
       "(20 jobs on 8 emulated nodes), to set them beside.", "",
       "| policy | mean JCT (s) | p99 JCT (s) | makespan (s) | utilisation | busy | fairness loss | rho max | restarts |",
       "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for r in rows:
    out.append(f"| {r['policy']} | {r['jct_mean_s']:.0f} | {r['jct_p99_s']:.0f} | {r['makespan_s']:.0f} | "
               f"{r['util']:.3f} | {r['util_busy']:.3f} | {r['fairness_loss']:.3f} | {r['ftf_max']:.2f} | "
               f"{r['resizes']} |")
by = {r["policy"]: r for r in rows}
if "static" in by:
    out += ["", "Against static: " + ", ".join(
        f"{p} {by[p]['util'] / by['static']['util']:.2f}x the utilisation and "
        f"{100 * (1 - by[p]['jct_mean_s'] / by['static']['jct_mean_s']):.0f}% lower mean JCT"
        for p in ("dorm", "goodput") if p in by) + "."]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
cmd=$(bench_quote "$gs" cluster simulate --workload "$work" --tables "$speeds" "${args[@]}")
for f in "$out" "$BENCH_OUT/cluster_gradsync.md"; do bench_stamp "$f" "$cmd"; done
cat "$BENCH_OUT/cluster_gradsync.md"
