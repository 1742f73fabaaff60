#!/usr/bin/env bash
# The sharding planner against its two baselines (issue 37's planner
# targets): `gradsync shard`'s plan, TorchRec's greedy planner rules
# (gs_shard_torchrec_max: its greedy proposer and GreedyPerfPartitioner)
# and the DLRM reference's contiguous slicing, all priced with the one cost
# (this machine's lookup cost and caches, measured once, ids Zipf 1.05,
# and --net 1gbit), on the
# Criteo table sets (kaggle, terabyte, mlperf) and on seeded random table
# sets (5-200 tables, 10 to 1e7 rows, dims 16-128, pooling 1-20) on 4, 8,
# 16 and 64 ranks (4 per node). Reports each case's worst rank over the
# mean, and the baselines' worst ranks over the plan's. Estimates, not
# measurements: the cost model's; the planner's own timing is measured.
# Writes $BENCH_OUT/shard_planner.jsonl and .md.
#
# Usage: bench/embed/planner.sh [RANDOM_SETS]   (default 20 per rank count)
#   BENCH_QUICK=1: 3 random sets, 4 and 8 ranks.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
nrand=${1:-20}
ranks=(4 8 16 64)
if [ "$BENCH_QUICK" = 1 ]; then nrand=3 ranks=(4 8); fi
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
py=/usr/bin/python3
[ -x "$py" ] || py=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# This machine's lookup cost, once, so that every case is priced alike.
lookup=$("$gs" shard --tables kaggle --ranks 4 --json |
  "$py" -c 'import json,sys; d=json.load(sys.stdin); print(",".join("%.6g" % d[k] for k in ("lookup_alpha_s", "lookup_beta_s_per_B", "lookup_gamma_s_per_bag", "lookup_hit_alpha_s", "lookup_hit_beta_s_per_B", "cache_bytes", "lookup_gamma_mixed_s_per_bag", "lookup_row_alpha_s", "lookup_row_beta_s_per_B", "lookup_gamma_hit_s_per_bag")))')
echo "== lookup cost $lookup: s, s/B, s/bag; in the cache s, s/B; cache bytes; s/bag among half empty; a distinct row s, s/B; s/bag in the cache ($(date +%T))" >&2
out=$BENCH_OUT/shard_planner.jsonl
: >"$out"
case_run() { # NAME TABLES RANKS
  local per=4
  [ "$3" -lt 4 ] && per=1
  "$gs" shard --tables "$2" --ranks "$3" --per-node "$per" --lookup "$lookup" --json |
    "$py" -c '
import json, sys
d = json.load(sys.stdin)
kinds = {}
for t in d["sharding"]:
    kinds[t["sharding"]] = kinds.get(t["sharding"], 0) + 1
print(json.dumps({"case": sys.argv[1], "tables": len(d["sharding"]), "ranks": d["ranks"],
                  "max_s": d["max_rank_s"], "mean_s": d["mean_rank_s"],
                  "torchrec_s": d["torchrec_greedy_max_rank_s"],
                  "contiguous_s": d["contiguous_max_rank_s"],
                  "torchrec_taken": d["torchrec_plan_taken"], "plan_s": d["plan_s"],
                  "kinds": kinds}))' "$1" >>"$out"
}
for t in kaggle terabyte mlperf; do
  for r in "${ranks[@]}"; do case_run "$t" "$t" "$r"; done
done
for r in "${ranks[@]}"; do
  for k in $(seq 1 "$nrand"); do
    f=$tmp/r$r-$k.json
    "$py" - "$f" "$((r * 1000 + k))" <<'PY'
import json, random, sys
rnd = random.Random(int(sys.argv[2]))
n = rnd.randint(5, 200)
tables = [{"name": "t%d" % i, "rows": int(10 ** rnd.uniform(1, 7)),
           "dim": rnd.choice([16, 32, 64, 128]), "pooling": rnd.randint(1, 20)}
          for i in range(n)]
json.dump({"tables": tables}, open(sys.argv[1], "w"))
PY
    case_run "random-$k" "$f" "$r"
  done
done
bench_stamp "$out" "bench/embed/planner.sh $*"
md=$BENCH_OUT/shard_planner.md
"$py" - "$out" "$lookup" "$nrand" >"$md" <<'PY'
import json, statistics, sys
rows = [d for d in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")) if "case" in d]
print("# The sharding planner against TorchRec's greedy rules and contiguous slicing\n")
print("Estimates of the one cost model (lookup cost %s: s per lookup missing the cache, per byte of row and per bag; "
      "s per lookup and per byte in the cache; a rank's cache bytes; s per bag among half empty ones; "
      "s per distinct row a step updates and per byte of it; s per bag whose line of the pooled "
      "matrix is in the cache; measured on this machine; ids Zipf 1.05, each rank priced with its own cache; "
      "--net 1gbit, global batch 8192, 4 ranks per node), not measurements. 'worst/mean': "
      "the plan's busiest rank over the mean; 'TorchRec' and 'contiguous': their busiest rank "
      "over the plan's (above 1: the plan is better). Random sets: %s per rank count, "
      "seeded.\n" % (sys.argv[2], sys.argv[3]))
print("| tables | ranks | worst/mean | TorchRec greedy | contiguous | TorchRec's plan taken | plan ms |")
print("|---|---:|---:|---:|---:|---|---:|")
for r in rows:
    if r["case"].startswith("random"):
        continue
    tr = r["torchrec_s"] / r["max_s"] if r["torchrec_s"] else float("nan")
    print("| %s | %d | %.3f | %.2fx | %.2fx | %s | %.1f |" % (
        r["case"], r["ranks"], r["max_s"] / r["mean_s"], tr, r["contiguous_s"] / r["max_s"],
        "yes" if r["torchrec_taken"] else "no", r["plan_s"] * 1e3))
print("\n## Random table sets\n")
print("| ranks | sets | worst/mean median (max) | TorchRec greedy median (min) | contiguous median (min) | TorchRec's plan taken |")
print("|---:|---:|---:|---:|---:|---:|")
for R in sorted({r["ranks"] for r in rows}):
    rs = [r for r in rows if r["case"].startswith("random") and r["ranks"] == R]
    if not rs:
        continue
    im = [r["max_s"] / r["mean_s"] for r in rs]
    tr = [r["torchrec_s"] / r["max_s"] for r in rs if r["torchrec_s"]]
    co = [r["contiguous_s"] / r["max_s"] for r in rs]
    print("| %d | %d | %.3f (%.3f) | %.2fx (%.2fx) | %.2fx (%.2fx) | %d |" % (
        R, len(rs), statistics.median(im), max(im), statistics.median(tr), min(tr),
        statistics.median(co), min(co), sum(1 for r in rs if r["torchrec_taken"])))
worse_tr = [r for r in rows if r["torchrec_s"] and r["max_s"] > r["torchrec_s"] * (1 + 1e-9)]
worse_co = [r for r in rows if r["max_s"] > r["contiguous_s"] * (1 + 1e-9)]
print("\nCases where the plan is worse than TorchRec's rules: %d of %d; than contiguous "
      "slicing: %d." % (len(worse_tr), len(rows), len(worse_co)))
PY
bench_stamp "$md" "bench/embed/planner.sh $*"
cat "$md"
