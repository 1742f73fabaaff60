#!/usr/bin/env bash
# What a manager that has to learn its jobs' speeds loses, and what sharing
# them between jobs of one kind wins back (issue 39; docs/CLUSTER_MANAGER.md,
# "--share-speeds"): the cluster simulator on Pollux's eight workloads (64
# GPUs as 16 nodes of 4, a re-allocation every 60 s, 30 s per restart: the
# artifact's settings, as bench/cluster/pollux_sim.sh), goodput three ways:
#   oracle   the tables' curves from the start (pollux_sim.sh's runs);
#   learned  a job's speed on a size known only after 100 steps there in
#            one launch (--learn-curves 100, the manager's two commits),
#            linear before its first;
#   shared   learned, and a job that learned nothing yet starts from the
#            curve of the job of its model that learned the most
#            (--share-speeds, the manager's serve --share-speeds).
# Writes $BENCH_OUT/cluster_share_speeds.jsonl and .md.
#
# Usage: bench/cluster/share_speeds.sh [POLLUX_DIR] [POLICY]
#   POLLUX_DIR: the artifact's data (default data/pollux-osdi21)
#   POLICY: goodput (default) or dorm
#   BENCH_QUICK=1: workload-1 only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
data=$(realpath "${1:-data/pollux-osdi21}")
policy=${2:-goodput}
[ -d "$data/workloads" ] && [ -d "$data/traces" ] || {
  echo "share_speeds: no workloads/ and traces/ under $data" >&2
  exit 2
}
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
out=$BENCH_OUT/cluster_share_speeds.jsonl
: >"$out"
last=8
[ "$BENCH_QUICK" = 1 ] && last=1
args=(--nodes 16 --gpus-per-node 4 --policy "$policy" --restart-penalty 30 --interval 60 --json)
for k in $(seq 1 "$last"); do
  echo "== workload-$k ($(date +%T))" >&2
  w=("$gs" cluster simulate --workload "$data/workloads/workload-$k.csv" --tables "$data/traces"
     "${args[@]}")
  "${w[@]}" | bench_tag_json workload_name "workload-$k" mode oracle >>"$out"
  "${w[@]}" --learn-curves 100 | bench_tag_json workload_name "workload-$k" mode learned >>"$out"
  "${w[@]}" --learn-curves 100 --share-speeds |
    bench_tag_json workload_name "workload-$k" mode shared >>"$out"
done
python3 - "$out" "$policy" >"$BENCH_OUT/cluster_share_speeds.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if "mode" in r]
policy = sys.argv[2]
modes = ["oracle", "learned", "shared"]
by = {(r["workload_name"], r["mode"]): r for r in rows}
names = sorted({r["workload_name"] for r in rows}, key=lambda n: int(n.split("-")[1]))
print("# Learning jobs' speeds, and sharing them between jobs of one kind\n")
print(f"`gradsync cluster simulate`, policy {policy}, on Pollux's workloads (160 jobs each, 16 "
      "nodes of 4 GPUs, a round every 60 s, 30 s a restart): **oracle**, the speed tables' "
      "curves from the start; **learned**, a job's speed on a size known only after 100 steps "
      "there in one launch (`--learn-curves 100`, as the manager measures it: linear speed-up "
      "and unknown work before its first); **shared**, learned, and a job that learned "
      "nothing yet starts from the curve of the job of its model that learned the most "
      "(`--share-speeds`, the manager's `serve --share-speeds`). Simulated times, the same on "
      "every run (no randomness): the figures do not depend on this host.\n")
print("| workload | mean JCT s: oracle | learned | shared | shared / learned | p99 JCT s: "
      "learned | shared | worst finish-time fairness: learned | shared | resizes: learned | "
      "shared |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
sums = {m: 0.0 for m in modes}
for n in names:
    o, l, s = (by.get((n, m)) for m in modes)
    if not (o and l and s):
        continue
    for m, r in zip(modes, (o, l, s)):
        sums[m] += r["jct_mean_s"]
    print(f"| {n} | {o['jct_mean_s']:.0f} | {l['jct_mean_s']:.0f} | {s['jct_mean_s']:.0f} | "
          f"{s['jct_mean_s'] / l['jct_mean_s']:.2f} | {l['jct_p99_s']:.0f} | "
          f"{s['jct_p99_s']:.0f} | {l['ftf_max']:.1f} | {s['ftf_max']:.1f} | "
          f"{l['resizes']} | {s['resizes']} |")
k = len(names)
if k:
    print(f"\nMean over the {k} workloads: oracle {sums['oracle'] / k:.0f} s, learned "
          f"{sums['learned'] / k:.0f} s, shared {sums['shared'] / k:.0f} s "
          f"({sums['shared'] / sums['learned']:.2f}x learned's, "
          f"{sums['shared'] / sums['oracle']:.2f}x the oracle's).")
PY
cmd=$(bench_quote "$gs" cluster simulate --workload "$data/workloads/workload-K.csv" \
  --tables "$data/traces" "${args[@]}")
bench_stamp "$out" "$cmd [--learn-curves 100 [--share-speeds]] (K = 1..$last)"
bench_stamp "$BENCH_OUT/cluster_share_speeds.md" \
  "$cmd [--learn-curves 100 [--share-speeds]] (K = 1..$last)"
cat "$BENCH_OUT/cluster_share_speeds.md"
