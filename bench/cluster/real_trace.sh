#!/usr/bin/env bash
# The cluster manager on a time-compressed trace of real gradsync training
# jobs (issue 39, part 4): 8 emulated nodes (network namespaces with an sshd
# each and a 1 Gbit/s link, `gradsync cluster serve --emulated 8`), each
# capped to C cores (--node-cpus, default 0.25: the 8 nodes together are the
# machine's 2 cores, and no node lends another its share), and a trace of 20
# jobs (trace.py: seeded; mlp and cnn on Fashion-MNIST and synthetic data,
# 1 to 4 nodes, arrivals over about two minutes) submitted at their arrival
# times, once per policy. Per policy it reports each job's wait, run and
# completion time (JCT), resizes and restarts, and the mean and p99 JCT, the
# makespan and the utilisation (node-seconds that ranks ran, from the
# supervisors' launch events, over nodes x makespan).
# Writes $BENCH_OUT/cluster_real.jsonl and cluster_real.md, and each
# policy's rounds as cluster_real.rounds.POLICY.jsonl (serve --round-log,
# timed from the trace's start; a copy of a run keeps the name's tail:
# RUN.jsonl beside RUN.rounds.POLICY.jsonl). Needs root,
# sshd, tc and a writable CPU cgroup.
#
# Usage: bench/cluster/real_trace.sh [POLICY...]   (default: every policy the
#        build knows of static, dorm, goodput)
#   BENCH_QUICK=1: 6 jobs, the same steps.
#   CLUSTER_NODE_CPUS=C (0.25), CLUSTER_SEED=S (1), CLUSTER_SPAN=S (120: the
#   arrivals' span; the same jobs in the same order, closer together when
#   smaller, so that more work waits), CLUSTER_MIX=light|scaling|uneven
#   (light: the small jobs above; scaling: trace.py's jobs that scale with
#   their nodes, as Dorm's and Pollux's do, on 1 to 6 nodes, beside one-node
#   mlp; uneven: the same jobs asking for 3 or 6 nodes, sizes that do not
#   tile the 8),
#   CLUSTER_KEEP=DIR (the spools, every job's events and logs, kept there),
#   CLUSTER_NET=NAME (serve --net NAME: train jobs' curves predicted from
#   their profiles before they are measured; default none),
#   CLUSTER_SHARE_SPEEDS=1 (serve --share-speeds: a job starts from the
#   speeds an earlier job of its kind measured; default off),
#   CLUSTER_COMMITS=steps|time (steps, the runs until 2026-12-05: serve
#   --commit-every 20 and the scaling jobs' own 4 and 8 steps; time: the
#   manager's default commits by time, --commit-every 10s, and none of the
#   jobs' own, so that a stop is taken at a check about 0.5 s on and the
#   manager measures the jobs from their progress reports),
#   CLUSTER_RESTART_PENALTY=S (serve --restart-penalty S: what a resize's
#   restart is priced at until the job's own is measured; default the
#   manager's, 30).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
here=bench/cluster
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GRADSYNC_SPOOL
cpus=${CLUSTER_NODE_CPUS:-0.25}
seed=${CLUSTER_SEED:-1}
span=${CLUSTER_SPAN:-120}
mix=${CLUSTER_MIX:-light}
net=${CLUSTER_NET:-}
share=${CLUSTER_SHARE_SPEEDS:-0}
share_opt=() share_env=
if [ "$share" = 1 ]; then share_opt=(--share-speeds) share_env="CLUSTER_SHARE_SPEEDS=1 "; fi
penalty=${CLUSTER_RESTART_PENALTY:-}
commits=${CLUSTER_COMMITS:-steps}
commit_opt=(--commit-every 20) trace_opt=() commits_env=
case $commits in
  steps) ;;
  time) commit_opt=() trace_opt=(--time-commits) commits_env="CLUSTER_COMMITS=time " ;;
  *) echo "real_trace.sh: CLUSTER_COMMITS=$commits: expected steps or time" >&2; exit 2 ;;
esac
njobs=20
[ "$BENCH_QUICK" = 1 ] && njobs=6
policies=("$@")
if [ ${#policies[@]} = 0 ]; then
  for p in static dorm goodput; do
    # a policy the build lacks is refused at once, before anything is built
    msg=$("$gs" cluster serve --nodes /dev/null --policy "$p" 2>&1 || true)
    [[ $msg == *"unknown policy"* ]] && continue
    policies+=("$p")
  done
fi
tmp=$(mktemp -d)
# shellcheck source=bench/cluster/manager_lib.sh
. "$here/manager_lib.sh"
trap manager_cleanup EXIT
python3 "$here/trace.py" --jobs "$njobs" --seed "$seed" --span "$span" --mix "$mix" \
  --cache "$tmp/cache" "${trace_opt[@]}" \
  >"$tmp/trace.jsonl"
# The data cache is made once, before any clock starts.
"$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
out=$BENCH_OUT/cluster_real.jsonl
: >"$out"
for policy in "${policies[@]}"; do
  spool=$tmp/spool-$policy
  manager_start "$spool" "$tmp/serve-$policy.log" --emulated 8 --rate 1gbit \
    --node-cpus "$cpus" --policy "$policy" --interval 5 "${commit_opt[@]}" ${penalty:+--restart-penalty "$penalty"} ${net:+--net "$net"} "${share_opt[@]}" \
    --round-log "$tmp/rounds-$policy.jsonl"
  t0=$(date +%s.%N)
  python3 "$here/submit_trace.py" "$gs" "$spool" "$tmp/trace.jsonl" "$t0"
  # every job ended (at most an hour)
  for _ in $(seq 1 3600); do
    states=$("$gs" jobs --spool "$spool" --json || true)
    grep -qE '"state":"(queued|running|resizing)"' <<<"$states" || break
    sleep 1
  done
  python3 "$here/summarize_trace.py" --policy "$policy" --nodes 8 --start "$t0" \
    --spool "$spool" >>"$out"
  manager_stop "$spool"
  # The manager's rounds, timed from the trace's start as the simulator's
  # are (cluster simulate --round-log; bench/cluster/compare_rounds.py).
  python3 -c '
import json, sys
t0 = float(sys.argv[1])
for line in open(sys.argv[2]):
    r = json.loads(line)
    r["t"] = round(r["t"] - t0, 3)
    print(json.dumps(r, ensure_ascii=False, separators=(",", ":")))
' "$t0" "$tmp/rounds-$policy.jsonl" >"${out%.jsonl}.rounds.$policy.jsonl"
done
python3 "$here/summarize_trace.py" --markdown "$out" --node-cpus "$cpus" \
  --trace "$tmp/trace.jsonl" >"$BENCH_OUT/cluster_real.md"
# The settings from the environment are part of the command that measured.
cmd="CLUSTER_MIX=$mix CLUSTER_SPAN=$span CLUSTER_SEED=$seed CLUSTER_NODE_CPUS=$cpus ${net:+CLUSTER_NET=$net }$share_env$commits_env${penalty:+CLUSTER_RESTART_PENALTY=$penalty }\
$(bench_quote "$here/real_trace.sh" "${policies[@]}")"
bench_stamp "$out" "$cmd"
bench_stamp "$BENCH_OUT/cluster_real.md" "$cmd"
cat "$BENCH_OUT/cluster_real.md"
