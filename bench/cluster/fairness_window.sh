#!/usr/bin/env bash
# dorm's fairness window (cluster simulate --fairness-window S: a job's
# target is its fair share plus the node-seconds of share it was owed and
# not given, paid back over S) on Pollux's eight workloads (64 GPUs as 16
# nodes x 4, the settings of pollux_sim.sh): every policy without a window
# (static and goodput the peers), dorm with windows of 0.5, 1, 2 and 4 hours;
# and on the real uneven trace's simulation (bench/results/
# cluster_real_uneven_{workload,speeds}.csv, the manager's settings of
# sim_vs_real.sh) with windows of 20, 60 and 300 s. Writes $BENCH_OUT/
# cluster_fairness_window.jsonl (a line per workload, policy and window)
# and cluster_fairness_window.md (per workload, and each window's
# geometric means against dorm without one).
#
# Usage: bench/cluster/fairness_window.sh [POLLUX_DIR]
#   POLLUX_DIR: the artifact's data (default data/pollux-osdi21)
#   BENCH_QUICK=1: workload-1 only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
data=$(realpath "${1:-data/pollux-osdi21}")
[ -d "$data/workloads" ] && [ -d "$data/traces" ] || {
  echo "fairness_window: no workloads/ and traces/ under $data" >&2
  exit 2
}
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
out=$BENCH_OUT/cluster_fairness_window.jsonl
: >"$out"
last=8
[ "$BENCH_QUICK" = 1 ] && last=1
windows=(1800 3600 7200 14400)
args=(--nodes 16 --gpus-per-node 4 --restart-penalty 30 --interval 60 --json)
for k in $(seq 1 "$last"); do
  w=$data/workloads/workload-$k.csv
  echo "== workload-$k ($(date +%T))" >&2
  "$gs" cluster simulate --workload "$w" --tables "$data/traces" "${args[@]}" --policy all |
    bench_tag_json trace "workload-$k" window_s 0 >>"$out"
  for s in "${windows[@]}"; do
    "$gs" cluster simulate --workload "$w" --tables "$data/traces" "${args[@]}" --policy dorm \
      --fairness-window "$s" | bench_tag_json trace "workload-$k" window_s "$s" >>"$out"
  done
done
# The real uneven trace, simulated as sim_vs_real.sh does (its committed
# table and workload, the start-up and launch delay its report gives).
res=bench/results
uneven=(--workload "$res/cluster_real_uneven_workload.csv"
        --tables "$res/cluster_real_uneven_speeds.csv" --nodes 8 --interval 5
        --start-penalty 14.48 --interference 0.0659 --commit-work 960 --launch-delay 0.44
        --learn-curves 1920 --json)
"$gs" cluster simulate "${uneven[@]}" --policy all | bench_tag_json trace uneven window_s 0 >>"$out"
for s in 20 60 300; do
  "$gs" cluster simulate "${uneven[@]}" --policy dorm --fairness-window "$s" |
    bench_tag_json trace uneven window_s "$s" >>"$out"
done
python3 bench/cluster/fairness_window.py "$out" >"$BENCH_OUT/cluster_fairness_window.md"
cmd="$(bench_quote "$gs" cluster simulate --workload "workload-K.csv" --tables "$data/traces" \
  "${args[@]}" --policy dorm --fairness-window S) (K = 1..$last; S = none (every policy), \
${windows[*]}); $(bench_quote "$gs" cluster simulate "${uneven[@]}" --policy dorm \
  --fairness-window S) (S = none (every policy), 20, 60, 300)"
bench_stamp "$out" "$cmd"
bench_stamp "$BENCH_OUT/cluster_fairness_window.md" "$cmd"
cat "$BENCH_OUT/cluster_fairness_window.md"
