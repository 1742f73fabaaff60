#!/usr/bin/env bash
# The decayed-usage fair share (cluster simulate --usage-halflife, Slurm's
# PriorityDecayHalfLife and fair-share factor) on Pollux's eight workloads:
# each job charged by a seeded draw to account heavy (60% of the jobs),
# medium (30%) or light (10%), equal shares; every policy without usage and
# with half-lives of 1, 6 and 24 hours. Writes $BENCH_OUT/
# cluster_usage_halflife.jsonl (a line per workload, policy and half-life,
# with its accounts) and cluster_usage_halflife.md (the means, each
# account's JCT against the run without usage).
#
# Usage: bench/cluster/usage_halflife.sh [POLLUX_DIR]
#   POLLUX_DIR: the artifact's data (default data/pollux-osdi21)
#   BENCH_QUICK=1: workload-1 only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
data=$(realpath "${1:-data/pollux-osdi21}")
[ -d "$data/workloads" ] && [ -d "$data/traces" ] || {
  echo "usage_halflife: no workloads/ and traces/ under $data" >&2
  exit 2
}
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$BENCH_OUT/cluster_usage_halflife.jsonl
: >"$out"
last=8
[ "$BENCH_QUICK" = 1 ] && last=1
args=(--nodes 16 --gpus-per-node 4 --policy all --restart-penalty 30 --interval 60 --json)
for k in $(seq 1 "$last"); do
  python3 bench/cluster/usage_accounts.py assign "$data/workloads/workload-$k.csv" \
    "$tmp/w$k.csv" "$k"
  for h in 0 3600 21600 86400; do
    echo "== workload-$k, half-life $h s ($(date +%T))" >&2
    hopt=()
    [ "$h" != 0 ] && hopt=(--usage-halflife "$h")
    "$gs" cluster simulate --workload "$tmp/w$k.csv" --tables "$data/traces" "${args[@]}" \
      "${hopt[@]}" | bench_tag_json workload_name "workload-$k" halflife_s "$h" >>"$out"
  done
done
python3 bench/cluster/usage_accounts.py summarize "$out" "$BENCH_OUT/cluster_usage_halflife.md"
cmd=$(bench_quote "$gs" cluster simulate --workload "workload-K.csv+accounts" \
  --tables "$data/traces" "${args[@]}" --usage-halflife S)
bench_stamp "$out" "$cmd (K = 1..$last; S = none, 3600, 21600, 86400)"
bench_stamp "$BENCH_OUT/cluster_usage_halflife.md" "$cmd (K = 1..$last; S = none, 3600, 21600, 86400)"
cat "$BENCH_OUT/cluster_usage_halflife.md"
