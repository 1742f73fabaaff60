#!/usr/bin/env bash
# The cluster simulator against the manager's real runs (issue 39: mean JCT
# within 10% per policy). Measures what the simulator needs of the real
# trace's three job kinds (bench/cluster/trace.py: mlp on synthetic data,
# mlp and the CNN on Fashion-MNIST) under the manager itself, as the real
# runs had them (`cluster serve --emulated 4 --rate 1gbit --node-cpus 0.25`,
# --interval 5, --commit-every 20): each kind alone at 1, 2, 3 and 4 nodes
# (--min N --max N), its time inside the program (the summary's wall_s) and
# its completion time; a step's time is wall_s over the job's steps, and the
# rest of the completion time (submission to launch, mpirun over ssh, data,
# exit) is the start-up, the table's start_s for that kind and size, charged
# by the simulator at every start and resize (a resize relaunches the same
# way; the mean is --start-penalty and --restart-penalty, unused while the
# table covers every size). Then it simulates the
# real trace (the same seed) on 8 nodes under each policy and sets the mean
# JCTs beside those of the committed real runs (bench/results/
# cluster_real*.jsonl). Writes $BENCH_OUT/cluster_sim_vs_real.{md,jsonl} and
# the tables it made (cluster_real_speeds.csv, cluster_real_workload.csv).
# Needs root (the emulated nodes).
#
# Usage: bench/cluster/sim_vs_real.sh [REPS]   (each kind and size REPS
#        times, their mean taken; default 2: one run each moved the means
#        by up to 17%)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
here=bench/cluster
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GRADSYNC_SPOOL
reps=${1:-2}
cpus=${CLUSTER_NODE_CPUS:-0.25}
seed=${CLUSTER_SEED:-1}
tmp=$(mktemp -d)
spool=$tmp/spool
# shellcheck source=bench/cluster/manager_lib.sh
. "$here/manager_lib.sh"
trap manager_cleanup EXIT
python3 "$here/trace.py" --jobs 20 --seed "$seed" --cache "$tmp/cache" >"$tmp/trace.jsonl"
"$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
manager_start "$spool" "$tmp/serve.log" --emulated 4 --rate 1gbit --node-cpus "$cpus" \
  --policy static --interval 5 --commit-every 20
# One job of each kind (the trace's arguments, its first job of the kind)
# at each size, one at a time.
python3 - "$tmp/trace.jsonl" >"$tmp/kinds.jsonl" <<'PY'
import json, sys
seen = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    kind = j["name"].rsplit("-", 1)[0]
    seen.setdefault(kind, j["args"])
for kind, args in seen.items():
    print(json.dumps({"kind": kind, "args": args}))
PY
: >"$tmp/solo.txt"
while read -r line; do
  kind=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["kind"])' "$line")
  mapfile -t args < <(python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])["args"]))' "$line")
  for n in 1 2 3 4; do
    for ((k = 1; k <= reps; k++)); do
      echo "== $kind alone on $n node(s), $k/$reps ($(date +%T))" >&2
      id=$("$gs" submit --spool "$spool" --min "$n" --max "$n" --name "$kind-solo-$n" -- "${args[@]}")
      for _ in $(seq 1 1200); do
        "$gs" jobs --spool "$spool" --json | grep "\"id\":$id," | grep -qE '"state":"(done|failed|cancelled)"' && break
        sleep 0.5
      done
      echo "$kind $n $id" >>"$tmp/solo.txt"
    done
  done
done <"$tmp/kinds.jsonl"
sleep 2 # jobs.json, the manager's snapshot, catches up
python3 "$here/sim_vs_real.py" measure --spool "$spool" --solo "$tmp/solo.txt" \
  --trace "$tmp/trace.jsonl" --speeds "$BENCH_OUT/cluster_real_speeds.csv" \
  --workload "$BENCH_OUT/cluster_real_workload.csv" >"$tmp/penalty.txt"
manager_stop "$spool"
start_s=$(cat "$tmp/penalty.txt")
out=$BENCH_OUT/cluster_sim_vs_real.jsonl
# The policies learn a job's speed on a size as the manager does: after two
# of its commits in one launch (--commit-every 20 steps of 48 samples).
sim=("$gs" cluster simulate --workload "$BENCH_OUT/cluster_real_workload.csv"
     --tables "$BENCH_OUT/cluster_real_speeds.csv" --nodes 8 --policy all --interval 5
     --start-penalty "$start_s" --restart-penalty "$start_s" --learn-curves 1920 --json)
"${sim[@]}" >"$out"
# And on the table's curves from the start (an oracle), for comparison.
"${sim[@]:0:${#sim[@]}-3}" --json >"$out.oracle"
bench_stamp "$out" "$(bench_quote "${sim[@]}"); the same without --learn-curves 1920"
python3 "$here/sim_vs_real.py" report --sim "$out" --oracle "$out.oracle" \
  --speeds "$BENCH_OUT/cluster_real_speeds.csv" \
  --start "$start_s" --real "$BENCH_OUT"/cluster_real.jsonl "$BENCH_OUT"/cluster_real_run2.jsonl \
  "$BENCH_OUT"/cluster_real_run3.jsonl "$BENCH_OUT"/cluster_real_goodput_curves.jsonl \
  >"$BENCH_OUT/cluster_sim_vs_real.md"
bench_stamp "$BENCH_OUT/cluster_sim_vs_real.md" "bench/cluster/sim_vs_real.sh $*"
cat "$BENCH_OUT/cluster_sim_vs_real.md"
