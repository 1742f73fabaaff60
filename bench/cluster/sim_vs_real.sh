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
# way, but for the manager's part; the mean is --start-penalty, unused while
# the table covers every size). Then it simulates the real trace (the same seed)
# on 8 nodes under each policy, resizing as the manager does (--commit-work:
# a job moves at its next commit, 20 steps of 48 samples, after its
# supervisor's discovery; --launch-delay: the manager's start to the
# supervisor's launch, from the committed static runs), and sets the mean
# JCTs and resizes beside those of the committed real runs
# (bench/results/cluster_real*.jsonl; BENCH_OUT's own copies first, where it
# has them). Writes $BENCH_OUT/cluster_sim_vs_real.{md,jsonl} and the tables
# it made (cluster_real_speeds.csv, its .solo.jsonl, cluster_real_workload.csv),
# and the simulation's rounds (cluster_sim_rounds.POLICY.jsonl), set beside
# a real run's where it has them (bench/cluster/compare_rounds.py).
# Needs root (the emulated nodes), but for --sim-only.
#
# Usage: bench/cluster/sim_vs_real.sh [--sim-only] [REPS]
#   REPS: each kind and size REPS times, their mean taken (default 2: one
#         run each moved the means by up to 17%)
#   CLUSTER_INTERFERENCE=K|measured: simulate with the emulated nodes'
#         interference K (`cluster simulate --interference`; "measured": from
#         cluster_interference.md, bench/cluster/interference.sh); default 0
#   REAL_RUNS="FILE..." : the real runs to compare with (real_trace.sh's
#         jsonl files) instead of the committed cluster_real*.jsonl
#   CLUSTER_SPAN=S: the trace's arrivals' span (trace.py; default 120), as
#         the real runs had it
#   CLUSTER_NODE_CPUS=C: each node's cores (default 0.25), as the real runs
#         had them
#   CLUSTER_MIX=light|scaling|uneven: the trace's mix (trace.py; default light), its
#         kinds measured on every size its jobs may run on, each job's own
#         commit interval given to the simulator (commit_samples); its
#         files named cluster_real_MIX_speeds.csv, cluster_sim_vs_real_MIX.md
#         and so on, the real runs cluster_real_MIX*.jsonl
#   CLUSTER_COMMITS=steps|time: steps (default), the real runs until
#         2026-12-05 (serve --commit-every 20, the scaling jobs' own 4 and 8
#         steps; `--commit-work`); time: the manager's default since (serve's
#         own --commit-every 10s, no commits of the jobs' own; real_trace.sh's
#         CLUSTER_COMMITS=time), measured so and simulated with
#         `--commit-time 10 --learn-curves 1s --restart-prior`; its files named
#         cluster_real_MIX_time_speeds.csv, cluster_sim_vs_real_MIX_time.md,
#         the real runs cluster_real_MIX_time_run{1,2,3}.jsonl
#   CLUSTER_SPEEDS_MIX=MIX: with --sim-only, simulate on MIX's committed speed
#         table (a mix of the same kinds on the same sizes: uneven on
#         scaling's), the workload made from trace.py (CLUSTER_SEED, default 1)
#   --sim-only (or SIM_ONLY=1): measures nothing; simulates on the committed
#         tables (bench/results/cluster_real_speeds.csv, its .solo.jsonl and
#         cluster_real_workload.csv, copied to BENCH_OUT; the speed table
#         rebuilt from its solo runs by the current rule), in seconds, as a
#         user without root can
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
sim_only=${SIM_ONLY:-0}
if [ "${1:-}" = --sim-only ]; then
  sim_only=1
  shift
fi
given=$*
[ "$sim_only" = 1 ] && given="--sim-only${given:+ $given}"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
here=bench/cluster
committed=bench/results
reps=${1:-2}
commit_every=20 global_batch=48 # the real runs' (real_trace.sh; trace.py's light mix)
mix=${CLUSTER_MIX:-light} span=${CLUSTER_SPAN:-120} cpus=${CLUSTER_NODE_CPUS:-0.25}
commits=${CLUSTER_COMMITS:-steps}
case $commits in
  steps | time) ;;
  *) echo "sim_vs_real: CLUSTER_COMMITS=$commits: expected steps or time" >&2; exit 2 ;;
esac
# Another mix's files carry its name: cluster_real_scaling_speeds.csv, ...
# and commits by time _time after it.
sfx=
[ "$mix" = light ] || sfx=_$mix
[ "$commits" = steps ] || sfx=${sfx}_time
speeds=$BENCH_OUT/cluster_real${sfx}_speeds.csv
workload=$BENCH_OUT/cluster_real${sfx}_workload.csv
speeds_mix=${CLUSTER_SPEEDS_MIX:-}
if [ -n "$speeds_mix" ] && [ "$sim_only" != 1 ]; then
  echo "sim_vs_real: CLUSTER_SPEEDS_MIX is for --sim-only (a measuring run makes its own table)" >&2
  exit 2
fi

# measure: each kind alone at each size under the manager, REPS times; writes
# the speed table (and its .solo.jsonl, each run) and the workload.
measure() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  unset GRADSYNC_SPOOL
  local seed=${CLUSTER_SEED:-1}
  tmp=$(mktemp -d)
  local spool=$tmp/spool
  # shellcheck source=bench/cluster/manager_lib.sh
  . "$here/manager_lib.sh"
  trap manager_cleanup EXIT
  local trace_opt=() commit_opt=(--commit-every "$commit_every")
  [ "$commits" = time ] && trace_opt=(--time-commits) commit_opt=()
  python3 "$here/trace.py" --jobs 20 --seed "$seed" --mix "$mix" --span "$span" \
    --cache "$tmp/cache" "${trace_opt[@]}" \
    >"$tmp/trace.jsonl"
  "$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
  # One job of each kind (the trace's arguments, its first job of the kind)
  # at each size that the trace's jobs of that kind may run on (from the
  # least min to the largest max, those that divide its global batch, as
  # the manager rounds a size down to one that does), one at a time, on a
  # pool as large as the largest.
  python3 - "$tmp/trace.jsonl" >"$tmp/kinds.jsonl" <<'PY'
import json, sys
seen, lo, hi = {}, {}, {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    kind = j["name"].rsplit("-", 1)[0]
    seen.setdefault(kind, j["args"])
    lo[kind] = min(lo.get(kind, j["min"]), j["min"])
    hi[kind] = max(hi.get(kind, j["max"]), j["max"])
for kind, args in seen.items():
    gb = int(dict(zip(args[::2], args[1::2]))["--global-batch"])
    sizes = [n for n in range(lo[kind], hi[kind] + 1) if gb % n == 0]
    print(json.dumps({"kind": kind, "args": args, "sizes": sizes}))
PY
  local pool
  pool=$(python3 -c 'import json,sys; print(max(max(json.loads(l)["sizes"]) for l in open(sys.argv[1])))' \
    "$tmp/kinds.jsonl")
  [ "$pool" -ge 4 ] || pool=4
  manager_start "$spool" "$tmp/serve.log" --emulated "$pool" --rate 1gbit --node-cpus "$cpus" \
    --policy static --interval 5 "${commit_opt[@]}"
  : >"$tmp/solo.txt"
  local line kind n k id args sizes
  while read -r line; do
    kind=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["kind"])' "$line")
    mapfile -t args < <(python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])["args"]))' "$line")
    sizes=$(python3 -c 'import json,sys; print(*json.loads(sys.argv[1])["sizes"])' "$line")
    for n in $sizes; do
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
    --trace "$tmp/trace.jsonl" --speeds "$speeds" --workload "$workload" --commits "$commits"
  manager_stop "$spool"
}

if [ "$sim_only" = 1 ] && [ -n "$speeds_mix" ]; then
  # Another mix's speed table (the same kinds and sizes); this trace's
  # workload made from trace.py.
  ssfx=
  [ "$speeds_mix" = light ] || ssfx=_$speeds_mix
  [ "$commits" = steps ] || ssfx=${ssfx}_time
  for f in "cluster_real${ssfx}_speeds.csv" "cluster_real${ssfx}_speeds.csv.solo.jsonl"; do
    [ -f "$committed/$f" ] || { echo "sim_vs_real: CLUSTER_SPEEDS_MIX=$speeds_mix needs $committed/$f" >&2; exit 2; }
    [ "$committed/$f" -ef "$BENCH_OUT/$f" ] || cp "$committed/$f" "$BENCH_OUT/$f"
  done
  speeds=$BENCH_OUT/cluster_real${ssfx}_speeds.csv
  # (the table from its solo runs by the current rule: a step is train_s)
  python3 "$here/sim_vs_real.py" table --speeds "$speeds"
  python3 "$here/trace.py" --jobs 20 --seed "${CLUSTER_SEED:-1}" --mix "$mix" --span "$span" \
    --cache unused | python3 "$here/sim_vs_real.py" workload --trace /dev/stdin \
    --workload "$workload" --commits "$commits"
elif [ "$sim_only" = 1 ]; then
  for f in "cluster_real${sfx}_speeds.csv" "cluster_real${sfx}_speeds.csv.solo.jsonl" \
    "cluster_real${sfx}_workload.csv"; do
    [ -f "$committed/$f" ] || { echo "sim_vs_real: --sim-only needs $committed/$f" >&2; exit 2; }
    [ "$committed/$f" -ef "$BENCH_OUT/$f" ] || cp "$committed/$f" "$BENCH_OUT/$f"
  done
  # The table from its solo runs by the current rule (a step is train_s;
  # until 2026-12-07 wall_s, whose tables were committed so).
  python3 "$here/sim_vs_real.py" table --speeds "$speeds"
else
  measure
fi
real=()
if [ -n "${REAL_RUNS:-}" ]; then
  read -r -a real <<<"$REAL_RUNS"
else
  runs=(cluster_real.jsonl cluster_real_run2.jsonl cluster_real_run3.jsonl
    cluster_real_goodput_curves.jsonl)
  [ "$mix" = light ] ||
    runs=("cluster_real${sfx}.jsonl" "cluster_real${sfx}_run2.jsonl" "cluster_real${sfx}_run3.jsonl")
  [ "$commits" = steps ] ||
    runs=("cluster_real${sfx}_run1.jsonl" "cluster_real${sfx}_run2.jsonl" "cluster_real${sfx}_run3.jsonl")
  for f in "${runs[@]}"; do
    if [ -f "$BENCH_OUT/$f" ]; then real+=("$BENCH_OUT/$f"); else real+=("$committed/$f"); fi
  done
fi
# The mean start-up (the penalties where the table has no start_s) and the
# time from the manager's start of a job to its supervisor's launch.
read -r start_s launch_s < <(python3 "$here/sim_vs_real.py" settings --speeds "$speeds" \
  --real "${real[@]}")
out=$BENCH_OUT/cluster_sim_vs_real${sfx}.jsonl
# The manager's resizes (a job moves at its next commit), and its policies
# learn a job's speed on a size as it does: after two of its commits in one
# launch there. The start-ups charged are the table's; --restart-penalty is
# left at the policies' default (30 s), which the manager's goodput weighs a
# grow against too.
# CLUSTER_INTERFERENCE=K: the emulated nodes' interference (measured apart by
# bench/cluster/interference.sh; "measured": the K its result
# cluster_interference.md gives, BENCH_OUT's first, else the committed one;
# default 0, none). A K measured below 0 (none, within the runs' noise) is
# simulated as 0. (Until 2026-12-07 a negative K was not read, and the
# committed K of another host was taken in its place without a word.)
interference=${CLUSTER_INTERFERENCE:-0}
if [ "$interference" = measured ]; then
  interference=
  for f in "$BENCH_OUT/cluster_interference.md" "$committed/cluster_interference.md"; do
    [ -z "$interference" ] && [ -f "$f" ] &&
      interference=$(sed -nE 's/^<!-- interference (-?[0-9.]+) -->$/\1/p' "$f" | head -1) &&
      [ -n "$interference" ] && echo "sim_vs_real: the interference K = $interference of $f" >&2
  done
  [ -n "$interference" ] || { echo "sim_vs_real: no measured interference" >&2; exit 2; }
  case $interference in -*) interference=0 ;; esac
fi
base=("$gs" cluster simulate --workload "$workload" --tables "$speeds" --nodes 8 --policy all
      --interval 5 --start-penalty "$start_s" --interference "$interference")
manager=(--commit-work $((commit_every * global_batch)) --launch-delay "$launch_s")
learn=(--learn-curves $((2 * commit_every * global_batch)))
if [ "$commits" = time ]; then
  # serve's own commits by time; the manager measures a speed from two
  # progress reports (two checks), about a second
  manager=(--commit-time 10 --launch-delay "$launch_s")
  # and prices a resize by the pool's measurements until the job's own
  # (serve's default since 2026-12-05)
  learn=(--learn-curves 1s --restart-prior)
fi
"${base[@]}" "${manager[@]}" "${learn[@]}" --json \
  --round-log "$BENCH_OUT/cluster_sim_rounds${sfx}.jsonl" >"$out"
# On the table's curves from the start (an oracle), and with resizes at
# once (the simulator's model before the manager's), for comparison.
"${base[@]}" "${manager[@]}" --json >"$out.oracle"
"${base[@]}" "${learn[@]}" --json >"$out.at_once"
bench_stamp "$out" "$(bench_quote "${base[@]}" "${manager[@]}" "${learn[@]}"); the same without \
${learn[*]} (.oracle), and without ${manager[*]} (.at_once)"
python3 "$here/sim_vs_real.py" report --mix "$mix" --span "$span" --node-cpus "$cpus" \
  --interference "$interference" --commits "$commits" --sim "$out" --oracle "$out.oracle" \
  --at-once "$out.at_once" \
  --speeds "$speeds" --workload "$workload" --start "$start_s" --launch "$launch_s" \
  --real "${real[@]}" \
  >"$BENCH_OUT/cluster_sim_vs_real${sfx}.md"
# Round by round where a real run's rounds were logged (real_trace.sh's
# RUN.rounds.POLICY.jsonl beside RUN.jsonl, since 2026-12-07): each job's
# answers beside the simulation's, and where the two first part.
for r in "${real[@]}"; do
  for p in static dorm goodput; do
    rr=${r%.jsonl}.rounds.$p.jsonl
    sr=$BENCH_OUT/cluster_sim_rounds${sfx}.$p.jsonl
    [ -f "$rr" ] && [ -f "$sr" ] || continue
    { printf '\n### Rounds of %s: %s against the simulation\n\n' "$p" "$(basename "$rr")"
      python3 "$here/compare_rounds.py" --markdown "$rr" "$sr"; } \
      >>"$BENCH_OUT/cluster_sim_vs_real${sfx}.md"
  done
done
bench_stamp "$BENCH_OUT/cluster_sim_vs_real${sfx}.md" \
  "${REAL_RUNS:+REAL_RUNS=\"$REAL_RUNS\" }${speeds_mix:+CLUSTER_SPEEDS_MIX=$speeds_mix }CLUSTER_COMMITS=$commits CLUSTER_MIX=$mix CLUSTER_SPAN=$span CLUSTER_NODE_CPUS=$cpus CLUSTER_INTERFERENCE=${CLUSTER_INTERFERENCE:-0} bench/cluster/sim_vs_real.sh $given"
cat "$BENCH_OUT/cluster_sim_vs_real${sfx}.md"
