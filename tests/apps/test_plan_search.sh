#!/usr/bin/env bash
# gradsync plan --search: hand-checkable recommendations and the refusals.
# usage: test_plan_search.sh GRADSYNC
set -u
G=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# Compute dominates: one 4 MB tensor, 1 s forward, 0.1 s backward. At 1 Gbit/s
# (the calibrated preset: beyond 8 nodes its 8-node row, bytes at 12.1 ns/B
# at most, a step 290 us at most, the engine 1.01 ms a message) its ring
# all-reduce costs 2(p-1)/p * 4 MB * 12.1 ns/B < 97 ms + 1 ms + 126 steps of
# 197 us (25 ms), so the efficiency stays above 1.1 / (1.1 + 0.123) = 0.9
# at every count: the most workers tried (64).
cat >"$tmp/compute.json" <<'J'
{"name": "compute", "batch_size": 1, "forward_s": 1.0,
 "tensors": [{"name": "w", "numel": 1000000, "dtype": "f32", "backward_s": 0.1}]}
J
# Communication dominates: one 100 MB tensor, 10 ms of compute. Two workers
# already spend >= 100 MB * 8.61 ns/B = 0.86 s on the all-reduce: efficiency
# below 0.03, so the only count that meets 0.8 is one worker.
cat >"$tmp/comm.json" <<'J'
{"name": "comm", "batch_size": 1, "forward_s": 0.005,
 "tensors": [{"name": "w", "numel": 25000000, "dtype": "f32", "backward_s": 0.005}]}
J
"$G" plan --search --profile "$tmp/compute.json" --net 1gbit --max-workers 64 \
  --target efficiency:0.8 --json >"$tmp/c.json" 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(jget "$tmp/c.json" 'd["recommendation"]["workers"]')" = 64 ] &&
   [ "$(jget "$tmp/c.json" 'min(p["efficiency"] for p in d["points"]) > 0.9')" = True ] &&
   [ "$(jget "$tmp/c.json" 'len(d["points"])')" = 7 ]; then
  pass "compute-bound profile: 64 workers, efficiency > 0.9 at 1..64"
else
  fail "compute-bound profile: exit $rc: $(head -c 400 "$tmp/c.json")"
fi
"$G" plan --search --profile "$tmp/comm.json" --net 1gbit --max-workers 64 \
  --target efficiency:0.8 --json >"$tmp/m.json" 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(jget "$tmp/m.json" 'd["recommendation"]["workers"]')" = 1 ] &&
   [ "$(jget "$tmp/m.json" 'd["points"][1]["efficiency"] < 0.03')" = True ]; then
  pass "communication-bound profile: 1 worker, efficiency < 0.03 at 2"
else
  fail "communication-bound profile: exit $rc: $(head -c 400 "$tmp/m.json")"
fi
# The same profile on a network 100 times faster: 2 workers spend ~8 ms.
"$G" plan --search --profile "$tmp/comm.json" --net 100gbit --workers 2 \
  --target efficiency:0.3 --json >"$tmp/f.json" 2>&1
if [ "$(jget "$tmp/f.json" 'd["recommendation"]["workers"]')" = 2 ]; then
  pass "communication-bound profile at 100gbit: 2 workers meet 0.3"
else
  fail "at 100gbit: $(head -c 400 "$tmp/f.json")"
fi
# Parameter servers on the same 4 workers: one 100 MB tensor cannot hide
# the ring's 2(p-1)/p = 1.5 x 100 MB on the link, while a BSP round whose
# pushes and pulls overlap moves 100 MB each way; the servers keep up once
# S >= 4 (b + g) / b = 4 x 1.023 (gamma 0.2 ns/B against the ring's 8.61 ns/B):
# 5 servers, and parameter servers are recommended.
"$G" plan --search --profile "$tmp/comm.json" --net 1gbit --workers 4 --json >"$tmp/ps.json" 2>&1
if [ "$(jget "$tmp/ps.json" 'd["recommendation"]["sync"]')" = ps ] &&
   [ "$(jget "$tmp/ps.json" 'd["recommendation"]["servers"]')" = 5 ] &&
   [ "$(jget "$tmp/ps.json" 'd["points"][0]["ps"]["iter_s"] < min(d["points"][0]["iter_s"].values())')" = True ]; then
  pass "parameter servers: 5 servers for 4 workers, faster than the ring"
else
  fail "parameter servers: $(head -c 400 "$tmp/ps.json")"
fi
# The per-worker batch within a global batch of 8 (the profile measured at
# 1): 8, 4, 2 and 1 per worker at 1, 2, 4 and 8 workers, one worker's
# compute 8.8, 4.4, 2.2 and 1.1 s.
"$G" plan --search --profile "$tmp/compute.json" --net 1gbit --max-workers 8 \
  --max-global-batch 8 --json >"$tmp/b.json" 2>&1
if [ "$(jget "$tmp/b.json" '[p["batch"] for p in d["points"]]')" = "[8, 4, 2, 1]" ] &&
   [ "$(jget "$tmp/b.json" 'abs(d["points"][0]["iter_s"]["wfbp"] - 8.8) < 1e-9')" = True ]; then
  pass "per-worker batch within --max-global-batch 8"
else
  fail "per-worker batch: $(head -c 400 "$tmp/b.json")"
fi
# The search's figures are the planner's: 4 workers' best time equals the
# fastest of plan --net 1gbit --workers 4.
"$G" plan --profile "$tmp/compute.json" --net 1gbit --workers 4 --json >"$tmp/p.jsonl" 2>&1
want=$(python3 -c "import json,sys; print(min(json.loads(l)['predicted_iter_s'] for l in open(sys.argv[1]) if json.loads(l)['policy']!='auto'))" "$tmp/p.jsonl")
got=$(jget "$tmp/c.json" '[min(p["iter_s"].values()) for p in d["points"] if p["workers"]==4][0]')
if [ -n "$want" ] && python3 -c "import sys; a,b=map(float,sys.argv[1:]); sys.exit(abs(a-b)>1e-9*b)" "$want" "$got"; then
  pass "search at 4 workers = plan --workers 4 ($got s)"
else
  fail "search at 4 workers $got, plan says $want"
fi
# Text output says why.
"$G" plan --search --profile "$tmp/comm.json" --net 1gbit --max-workers 8 \
  --target efficiency:0.8 >"$tmp/t" 2>&1
if grep -q "^recommendation: 1 workers" "$tmp/t" && grep -q "past 1 workers the efficiency falls below 0.80" "$tmp/t"; then
  pass "text output: recommendation and why"
else
  fail "text output: $(cat "$tmp/t")"
fi

# Refusals: exit 2 with a message naming the problem.
P=$tmp/compute.json
expect2() {
  local want=$1
  shift
  "$G" "$@" >"$tmp/e" 2>&1
  local rc=$?
  if [ $rc = 2 ] && grep -q -- "$want" "$tmp/e"; then pass "exit 2 '$want'"
  else fail "$*: exit $rc, wanted '$want': $(head -c 300 "$tmp/e")"; fi
}
expect2 "needs --net" plan --search --profile "$P" --max-workers 8
expect2 "a cost file" plan --search --profile "$P" --max-workers 8 --cost "$P"
expect2 "one of --workers N or --max-workers N" plan --search --profile "$P" --net 1gbit
expect2 "one of --workers N or --max-workers N" plan --search --profile "$P" --net 1gbit --workers 4 --max-workers 8
expect2 "apply only with --search" plan --profile "$P" --net 1gbit --workers 4 --max-workers 8
expect2 "--per-node must divide" plan --search --profile "$P" --net 1gbit --max-workers 6 --per-node 4
expect2 "--target: expected" plan --search --profile "$P" --net 1gbit --max-workers 8 --target efficiency:1.5
expect2 "--target: expected" plan --search --profile "$P" --net 1gbit --max-workers 8 --target speed
expect2 "only with --max-global-batch" plan --search --profile "$P" --net 1gbit --max-workers 8 --max-batch 4
expect2 "without a sample" plan --search --profile "$P" --net 1gbit --max-workers 8 --max-global-batch 4
expect2 "apply only with --search" plan --profile "$P" --net 1gbit --workers 4 --max-global-batch 8
expect2 "unknown network" plan --search --profile "$P" --net 1gb --max-workers 8
expect2 "not with\|--nodes" plan --search --profile "$P" --net 1gbit --max-workers 8 --nodes 2

[ $failures = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
