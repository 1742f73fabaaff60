#!/usr/bin/env bash
# The cluster simulator at scale (issue 39: 1,000 nodes and 10,000 jobs in
# under 60 s): a synthetic trace (bench/cluster/gen_synthetic.py, seed 1:
# four model classes, sizes 1 to 64, lengths 10 min to 10 h, load 0.9) on
# 1,000 nodes under every policy; dorm with a 1 ms GLPK limit per round (its
# rounds come on every arrival and completion: about 20,000). Writes
# $BENCH_OUT/cluster_scale.jsonl and cluster_scale.md (the simulator's own
# wall time per policy, and the process's CPU time and peak memory).
#
# Usage: bench/cluster/scale.sh [JOBS] [NODES]   (default 10000 1000)
#   BENCH_QUICK=1: 1,000 jobs on 100 nodes.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
jobs=${1:-10000}
nodes=${2:-1000}
[ "$BENCH_QUICK" = 1 ] && jobs=1000 nodes=100
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 bench/cluster/gen_synthetic.py "$jobs" "$nodes" "$tmp/w.csv" "$tmp/s.csv" 1
out=$BENCH_OUT/cluster_scale.jsonl
: >"$out"
for p in static goodput dorm; do
  extra=()
  [ "$p" = dorm ] && extra=(--time-limit 0.001)
  echo "== $p ($(date +%T))" >&2
  /usr/bin/time -f '{"cpu_s":%U,"sys_s":%S,"wall_s":%e,"max_rss_kb":%M}' -o "$tmp/time.json" \
    "$gs" cluster simulate --workload "$tmp/w.csv" --tables "$tmp/s.csv" --nodes "$nodes" \
    --policy "$p" --json "${extra[@]}" >"$tmp/row.json"
  python3 - "$tmp/row.json" "$tmp/time.json" "$jobs" >>"$out" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))
row.update(json.load(open(sys.argv[2])))
row["workload"] = f"synthetic {sys.argv[3]} jobs (gen_synthetic.py, seed 1)"
print(json.dumps(row))
PY
done
python3 - "$out" "$BENCH_OUT/cluster_scale.md" "$jobs" "$nodes" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"stamp"' not in l[:9]]
jobs, nodes = sys.argv[3], sys.argv[4]
out = ["# The cluster simulator at scale", "",
       f"`gradsync cluster simulate` on a synthetic trace of {int(jobs):,} jobs on {int(nodes):,} nodes",
       "(bench/cluster/gen_synthetic.py, seed 1: four model classes whose step time is",
       "compute/n + sync*log2(2n), sizes 1 to 64, lengths log-uniform from 10 min to 10 h,",
       "Poisson arrivals at load 0.9), re-allocation every 60 s (goodput) and on every",
       "arrival and completion, 30 s per restart; dorm with GLPK limited to 1 ms a round.", "",
       "| policy | simulator wall (s) | CPU (s) | peak memory (MB) | rounds | jobs per round | "
       "round ms (mean / max) | mean JCT (s) | p99 JCT (s) | utilisation | fairness loss |",
       "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for r in rows:
    out.append(f"| {r['policy']} | {r['sim_s']:.1f} | {r['cpu_s'] + r['sys_s']:.1f} | "
               f"{r['max_rss_kb'] / 1024:.0f} | {r['rounds']} | {r['jobs_per_round']:.0f} | "
               f"{r['round_ms_mean']:.2f} / {r['round_ms_max']:.0f} | {r['jct_mean_s']:.0f} | "
               f"{r['jct_p99_s']:.0f} | {r['util']:.3f} | {r['fairness_loss']:.3f} |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
cmd=$(bench_quote "$gs" cluster simulate --workload W.csv --tables S.csv --nodes "$nodes" --policy P --json)
bench_stamp "$out" "$cmd (gen_synthetic.py $jobs $nodes W.csv S.csv 1; dorm: --time-limit 0.001)"
bench_stamp "$BENCH_OUT/cluster_scale.md" "$cmd (gen_synthetic.py $jobs $nodes W.csv S.csv 1; dorm: --time-limit 0.001)"
cat "$BENCH_OUT/cluster_scale.md"
