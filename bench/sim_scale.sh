#!/usr/bin/env bash
# How the simulator's run time grows with workers and tensors (issue 13,
# "Scale": 2048 workers of ResNet-50 in under 1 s, 16384 in under 10 s).
# For each profile (32 to 604 tensors), each jitter scope and 4 .. 16384
# workers (8 per node or all on one node below 8, 10GbE, jitter CV 0.05 so
# that every worker's times differ, one iteration), runs `gradsync
# simulate --json` 3 times and records the median wall time of the whole
# command and of the event loop alone. `--jitter-scope op` runs every
# worker's events; `iteration` (the default) runs two workers standing for
# all (docs/SIMULATE.md), and goes on to 1048576 workers. The peer,
# measured in the same run, is `gradsync plan` (the analytical model of the
# same plan, which the simulation equals without jitter).
# Writes bench/results/sim_scale.jsonl and bench/results/sim_scale.md.
#
# Usage: bench/sim_scale.sh [BUILD_DIR]
#   BENCH_QUICK=1: resnet50 only, up to 2048 workers.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
BENCH_BUILD=${1:-$BENCH_BUILD}
bench_build gradsync_cli
gs="$BENCH_BUILD/gradsync"
out=$BENCH_OUT
profiles=(vgg16 resnet50 bert_base resnet152 densenet201)
workers=(4 16 64 256 1024 2048 4096 8192 16384 65536 262144 1048576)
policies=(mgwfbp dear)
scopes=(op iteration)
op_max=16384 # every worker's events: beyond this, minutes
if [ "$BENCH_QUICK" = 1 ]; then
  profiles=(resnet50) workers=(4 64 2048) policies=(mgwfbp)
fi
# Wall time of a command in seconds (the JSON goes to a file).
wall() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > "$tmp/out.json"
  t1=$(date +%s.%N)
  python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jsonl="$out/sim_scale.jsonl"
: > "$jsonl"
for p in "${profiles[@]}"; do
  for pol in "${policies[@]}"; do
    for scope in "${scopes[@]}"; do
    for n in "${workers[@]}"; do
      [ "$scope" = op ] && [ "$n" -gt "$op_max" ] && continue
      sim=() loop=() plan=()
      k=$(( n < 8 ? n : 8 ))
      for rep in 1 2 3; do
        sim+=("$(wall "$gs" simulate --profile "profiles/$p.json" --workers "$n" --per-node "$k" \
                 --net 10GbE --policy "$pol" --jitter 0.05 --jitter-scope "$scope" --iters 1 \
                 --json)")
        loop+=("$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sim_wall_s'])" "$tmp/out.json")")
        cp "$tmp/out.json" "$tmp/sim.json"
        plan+=("$(wall "$gs" plan --profile "profiles/$p.json" --workers "$n" --nodes "$(( n / k ))" \
                  --net 10GbE --policy "$pol" --json)")
      done
      python3 - "$p" "$pol" "$n" "$tmp/sim.json" "${sim[*]}" "${loop[*]}" "${plan[*]}" "$scope" \
        >> "$jsonl" <<'PY'
import json, statistics, sys
p, pol, n, path = sys.argv[1:5]
med = lambda s: statistics.median(float(x) for x in s.split())
r = json.load(open(path))
print(json.dumps({"profile": p, "policy": pol, "scope": sys.argv[8], "workers": int(n),
                  "events": r["events"], "iter_s": r["iter_s"],
                  "efficiency": r["efficiency"], "sim_cmd_s": med(sys.argv[5]),
                  "sim_loop_s": med(sys.argv[6]), "plan_cmd_s": med(sys.argv[7]),
                  "runs": 3}))
PY
      echo "$p $pol $scope $n done" >&2
    done
    done
  done
done
cmd=$(bench_quote bench/sim_scale.sh "$@")
bench_stamp "$jsonl" "$cmd"
python3 - "$jsonl" > "$out/sim_scale.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if not l.startswith('{"stamp"')]
tensors = {}
for r in rows:
    if r["profile"] not in tensors:
        tensors[r["profile"]] = len(json.load(open(f"profiles/{r['profile']}.json"))["tensors"])
print("# Simulator run time against workers and tensors\n")
print("`gradsync simulate` of one iteration (jitter CV 0.05, 8 "
      "workers per node, 10GbE preset), median of 3 runs. Scope `op` (one factor per "
      "operation) runs every worker's events; scope `iteration` (one factor per worker and "
      "iteration, the default) runs two workers that stand for all N after N draws "
      "(docs/SIMULATE.md). `sim` is the whole command "
      "(profile load, planning, simulation), `loop` the event loop alone (gs_sim_run), "
      "`plan` the peer measured in the same run: `gradsync plan` of the same profile and "
      "policy (the analytical model, no per-worker events). Absolute times depend on "
      "the machine and on what else ran on it (the stamp gives both, and the load); "
      "ratios less so.\n")
print("| profile | tensors | policy | scope | workers | events | loop (s) | sim (s) | plan (s) | sim / plan | ns per event | efficiency |")
print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['profile']} | {tensors[r['profile']]} | {r['policy']} | {r['scope']} | {r['workers']} | "
          f"{r['events']} | {r['sim_loop_s']:.4f} | {r['sim_cmd_s']:.3f} | {r['plan_cmd_s']:.3f} | "
          f"{r['sim_cmd_s'] / r['plan_cmd_s']:.1f} | {1e9 * r['sim_loop_s'] / r['events']:.0f} | "
          f"{100 * r['efficiency']:.1f}% |")
tgt = {(r["profile"], r["policy"], r["scope"], r["workers"]): r for r in rows}
print("\n## Targets\n")
for pol in sorted({r["policy"] for r in rows}):
    for scope in ("op", "iteration"):
        for n, lim in ((2048, 1.0), (16384, 10.0), (1048576, 10.0)):
            r = tgt.get(("resnet50", pol, scope, n))
            if r:
                print(f"- ResNet-50, {pol}, scope {scope}, {n} workers: {r['sim_cmd_s']:.3f} s for "
                      f"the whole command (target < {lim:g} s: "
                      f"{'met' if r['sim_cmd_s'] < lim else 'MISSED'}).")
print("\nWith scope `op` the events grow as N x (2L + 1) per iteration (L tensors) and the "
      "loop's cost per event as log N (the heap of N + 1 entities): see the `ns per event` "
      "column. With scope `iteration` the events are 2 x (2L + 1) whatever N, and the time "
      "grows with the N draws that find the slowest worker.")
PY
bench_stamp "$out/sim_scale.md" "$cmd"
cat "$out/sim_scale.md"
