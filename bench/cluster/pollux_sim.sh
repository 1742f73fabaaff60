#!/usr/bin/env bash
# The cluster simulator on Pollux's eight workloads (issue 39's target): every
# policy (static, dorm, goodput) on workloads/workload-{1..8}.csv of Pollux's
# OSDI'21 artifact, 64 GPUs as 16 nodes of 4, a re-allocation every 60 s and
# 30 s per restart (the artifact's settings), speeds from the artifact's
# measured step times (docs/CLUSTER.md). Writes $BENCH_OUT/cluster_sim.jsonl
# (one line per workload and policy), cluster_sim.md (the table, beside the
# artifact's published figures) and the pictures cluster_gantt, cluster_util
# (workload-1) and cluster_jct_cdf (every workload), .png and .svg.
#
# Usage: bench/cluster/pollux_sim.sh [POLLUX_DIR]
#   POLLUX_DIR: the artifact's data (default data/pollux-osdi21)
#   BENCH_QUICK=1: workload-1 only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
data=$(realpath "${1:-data/pollux-osdi21}")
[ -d "$data/workloads" ] && [ -d "$data/traces" ] || {
  echo "pollux_sim: no workloads/ and traces/ under $data" >&2
  exit 2
}
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$BENCH_OUT/cluster_sim.jsonl
: >"$out"
last=8
[ "$BENCH_QUICK" = 1 ] && last=1
args=(--nodes 16 --gpus-per-node 4 --policy all --restart-penalty 30 --interval 60 --json)
for k in $(seq 1 "$last"); do
  echo "== workload-$k ($(date +%T))" >&2
  "$gs" cluster simulate --workload "$data/workloads/workload-$k.csv" --tables "$data/traces" \
    "${args[@]}" --trace-out "$tmp/w$k.csv" | bench_tag_json workload_name "workload-$k" >>"$out"
done
python3 bench/cluster/summarize.py "$out" "$BENCH_OUT/cluster_sim.md"
for p in static dorm goodput; do
  traces=()
  for k in $(seq 1 "$last"); do traces+=("$tmp/w$k.$p.csv"); done
  python3 bench/cluster/plot_data.py "$tmp" 16 "$p" "$tmp/w1.$p.csv" "${traces[@]}"
done
gnuplot -e "DIR='$tmp'; OUT='$BENCH_OUT/cluster'; NODES=16" bench/cluster/cluster_plots.gp
cat >>"$BENCH_OUT/cluster_sim.md" <<'MD'

## Pictures

Workload-1's partitions over time under each policy (one colour per job, ten
colours repeating), its utilisation over time, and the distribution of every
job's completion time over the eight workloads:

![Gantt](cluster_gantt.png)
![Utilisation](cluster_util.png)
![JCT CDF](cluster_jct_cdf.png)
MD
cmd=$(bench_quote "$gs" cluster simulate --workload "$data/workloads/workload-K.csv" \
  --tables "$data/traces" "${args[@]}")
bench_stamp "$out" "$cmd (K = 1..$last)"
bench_stamp "$BENCH_OUT/cluster_sim.md" "$cmd (K = 1..$last)"
cat "$BENCH_OUT/cluster_sim.md"
