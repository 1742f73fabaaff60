#!/bin/sh
# gradsync simulate: --help exits 0; bad options and inputs exit 2 with a
# message (bad profile, --workers 0, --per-node not dividing, unknown policy
# or preset, unwritable --trace); the table, the JSON and the trace have the
# shape docs/SIMULATE.md describes.
# usage: test_sim_cli.sh GRADSYNC PROFILES_DIR
G="$1"
P="$2/resnet50.json"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
expect() { # expect CODE NEEDLE -- ARGS...
  code="$1"; needle="$2"; shift 3
  out=$("$G" simulate "$@" 2>&1); rc=$?
  if [ "$rc" != "$code" ]; then
    echo "FAIL: gradsync simulate $*: exit $rc, expected $code: $out"; fail=1
  elif [ -n "$needle" ] && ! printf '%s' "$out" | grep -qF -- "$needle"; then
    echo "FAIL: gradsync simulate $*: output lacks '$needle': $out"; fail=1
  else
    echo "ok: gradsync simulate $* -> $rc"
  fi
}
printf '{"name": "x", "forward_s": 0.1, "tensors": [' > "$T/bad.json"
expect 0 "usage: gradsync simulate" -- --help
expect 2 "--profile FILE is required" -- --workers 4 --net 10GbE
expect 2 "--workers N is required" -- --profile "$P" --net 10GbE
expect 2 "--workers: expected an integer" -- --profile "$P" --workers 0 --net 10GbE
expect 2 "--per-node 3 must divide --workers 8" -- --profile "$P" --workers 8 --per-node 3 --net 10GbE
expect 2 "unknown policy" -- --profile "$P" --workers 8 --net 10GbE --policy fastest
expect 2 "unknown network" -- --profile "$P" --workers 8 --net 7GbE
expect 2 "a network is required" -- --profile "$P" --workers 8
expect 2 "give one of" -- --profile "$P" --workers 8 --net 10GbE --cost "$T/c.json"
expect 2 "--intra and --inter go together" -- --profile "$P" --workers 8 --intra 1e-6,1e-10
expect 2 "--inter: expected" -- --profile "$P" --workers 8 --intra 1e-6,1e-10 --inter 5
expect 2 "--cost" -- --profile "$P" --workers 8 --cost "$T/missing.json"
expect 2 "/nonexistent.json" -- --profile /nonexistent.json --workers 8 --net 10GbE
expect 2 "bad.json" -- --profile "$T/bad.json" --workers 8 --net 10GbE
expect 2 "--trace" -- --profile "$P" --workers 8 --net 10GbE --policy wfbp --trace /nonexistent-dir/t.json
# An empty name: refused before the work (it wrote ".wfbp" and the like in
# the current directory, or failed after the simulation).
expect 2 "--trace needs a file name" -- --profile "$P" --workers 8 --net 10GbE --trace ""
expect 2 "--jitter: expected" -- --profile "$P" --workers 8 --net 10GbE --jitter -1
expect 2 "--jitter-dist" -- --profile "$P" --workers 8 --net 10GbE --jitter-dist uniform
expect 2 "--jitter-scope" -- --profile "$P" --workers 8 --net 10GbE --jitter-scope tensor
# A comma-separated list of policies, in turn, as replay takes it (a list
# was refused until 2026-12-07); "first=" belongs to the bucket before it.
out=$("$G" simulate --profile "$P" --workers 4 --net 1gbit --policy wfbp,bucket:25,first=1,dear --json)
if [ "$(printf '%s\n' "$out" | /usr/bin/python3 -c "import json,sys; print(','.join(json.loads(l)['spec'] for l in sys.stdin))")" = "wfbp,bucket:25,first=1,dear" ]; then
  echo "ok: --policy wfbp,bucket:25,first=1,dear simulates the three in turn"
else
  echo "FAIL: --policy list: $out"; fail=1
fi
expect 2 "--policy wfbp,,dear: an empty item in the list" -- --profile "$P" --workers 4 --net 1gbit --policy wfbp,,dear
expect 2 "unknown policy 'fast'" -- --profile "$P" --workers 4 --net 1gbit --policy wfbp,fast
# One worker with jitter: no communication is exposed, not -2e-16 s ("-0.000").
if "$G" simulate --profile "$P" --workers 1 --net 1gbit --jitter 0.1 --iters 5 --json |
   /usr/bin/python3 -c "import json,sys; sys.exit(any(json.loads(l)['exposed_comm_s'] != 0 for l in sys.stdin))"; then
  echo "ok: one worker with jitter: exposed communication 0"
else
  echo "FAIL: one worker with jitter: exposed communication not 0"; fail=1
fi
expect 2 "--iters: expected" -- --profile "$P" --workers 8 --net 10GbE --iters 0
expect 2 "more than once" -- --profile "$P" --workers 8 --workers 4 --net 10GbE
expect 2 "unknown option" -- --profile "$P" --workers 8 --net 10GbE --bogus
expect 2 "unexpected argument" -- --profile "$P" --workers 8 --net 10GbE extra
expect 2 "--compress" -- --profile "$P" --workers 8 --net 10GbE --compress zip:3
expect 2 "--algo" -- --profile "$P" --workers 8 --net 1GbE --algo pipeline
expect 2 "--compute-scale" -- --profile "$P" --workers 8 --net 1GbE --compute-scale 0
expect 0 "(ring)" -- --profile "$P" --workers 8 --net 1GbE --algo ring --compute-scale 0.5
expect 0 "mgwfbp" -- --profile "$P" --workers 8 --net 1GbE
# A cost file (the form gradsync bench --cost-out writes) drives the same
# costs as the links it holds, and only for the topology it was measured on.
printf '{"ranks": 8, "nodes": 8, "alpha": 5e-5, "beta": 8e-9, "alpha_local": 1e-6, "beta_local": 2e-10, "gamma": 0, "fit": {}}' > "$T/c8.json"
expect 0 "all-reduce 3.000e-04 s + 1.400e-08 s/B" -- --profile "$P" --workers 8 --cost "$T/c8.json" --policy mgwfbp
expect 0 "all-reduce 3.000e-04 s + 1.400e-08 s/B" -- --profile "$P" --workers 8 --intra 1e-6,2e-10 --inter 5e-5,8e-9 --policy mgwfbp
expect 2 "measured on 8 ranks" -- --profile "$P" --workers 16 --cost "$T/c8.json"
expect 0 "hier" -- --profile "$P" --workers 16 --per-node 4 --intra 2e-6,2e-10 --inter 5e-5,8e-9
# On nodes of several workers simulate prices the all-reduce the
# communicator's way, as plan does (until 2026-12-07 it always took the
# hierarchical one: ResNet-50 on 64 workers of 8 a node on 100GbIB was 27%
# above plan's prediction).
for net in 100GbIB 10GbE 1gbit; do
  sim_s=$("$G" simulate --profile "$P" --net $net --workers 64 --per-node 8 \
    --policy single --compute-scale 0.05 --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['iter_s'])")
  plan_s=$("$G" plan --profile "$P" --net $net --workers 64 --nodes 8 \
    --policy single --compute-scale 0.05 --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['predicted_iter_s'])")
  if /usr/bin/python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-9 * b)" "$sim_s" "$plan_s"; then
    echo "ok: 64 workers of 8 a node on $net: simulate and plan agree ($sim_s s)"
  else
    echo "FAIL: 64 workers of 8 a node on $net: simulate $sim_s s, plan $plan_s s"; fail=1
  fi
done
expect 0 "topk" -- --profile "$P" --workers 8 --net 1GbE --policy wfbp --compress topk:0.01
expect 0 '"compress":"topk:0.01"' -- --profile "$P" --workers 8 --net 1GbE --policy wfbp --compress TOPK:0.01 --json
expect 0 "left out" -- --profile "$P" --workers 8 --net 1GbE --compress topk:0.01
expect 2 "cannot be sent compressed" -- --profile "$P" --workers 8 --net 1GbE --policy dear --compress topk:0.01
# --coding-rate NS: the compressor's coding time given, as plan's (until
# 2026-12-06 simulate measured it on every run, and two runs differed).
expect 2 "--coding-rate applies only with --compress" -- --profile "$P" --workers 8 --net 1GbE --coding-rate 2
expect 2 "--coding-rate: expected ns per element from 0 to 1e6, got '-1'" -- --profile "$P" --workers 8 --net 1GbE --compress topk:0.01 --coding-rate -1
expect 2 "--coding-rate: expected ns per element from 0 to 1e6, got '2e6'" -- --profile "$P" --workers 8 --net 1GbE --compress topk:0.01 --coding-rate 2e6
expect 0 "compression topk:0.01 (coding 2 ns/element, --coding-rate)" -- --profile "$P" --workers 8 --net 10GbE --compress topk:0.01 --coding-rate 2
expect 0 '"coding_ns_per_elem":2,"coding_rate_measured":false' -- --profile "$P" --workers 8 --net 10GbE --policy wfbp --compress topk:0.01 --coding-rate 2 --json
expect 0 '"coding_rate_measured":true' -- --profile "$P" --workers 8 --net 10GbE --policy wfbp --compress topk:0.01 --json
a=$("$G" simulate --profile "$P" --workers 8 --net 10GbE --compress auto:topk:0.01 --coding-rate 0.7 2>&1)
b=$("$G" simulate --profile "$P" --workers 8 --net 10GbE --compress auto:topk:0.01 --coding-rate 0.7 2>&1)
c=$("$G" simulate --profile "$P" --workers 8 --net 10GbE --compress auto:topk:0.01 --coding-rate 0.7 --json | sed 's/"sim_wall_s":[^,}]*//')
d=$("$G" simulate --profile "$P" --workers 8 --net 10GbE --compress auto:topk:0.01 --coding-rate 0.7 --json | sed 's/"sim_wall_s":[^,}]*//')
if [ -n "$a" ] && [ "$a" = "$b" ] && [ -n "$c" ] && [ "$c" = "$d" ]; then
  echo "ok: two runs with --coding-rate give the same table and JSON"
else
  echo "FAIL: two runs with --coding-rate differ: $a / $b"; fail=1
fi
# --ar: the all-reduce's measured a + b*M (what replay reports), as plan --a --b.
expect 0 "all-reduce 2.000e-04 s + 1.500e-08 s/B" -- --profile "$P" --workers 4 --ar 2e-4,1.5e-8 --policy mgwfbp
expect 2 "--ar: expected" -- --profile "$P" --workers 4 --ar 2e-4
expect 2 "--ar: expected" -- --profile "$P" --workers 4 --ar -1,1e-9
expect 2 "give one of" -- --profile "$P" --workers 4 --ar 2e-4,1.5e-8 --net 1gbit
expect 2 "does not apply" -- --profile "$P" --workers 4 --ar 2e-4,1.5e-8 --compress topk:0.01
for pol in wfbp mgwfbp optimal dear; do
  s=$("$G" simulate --profile "$P" --workers 4 --ar 2e-4,1.5e-8 --policy $pol --json |
      sed -n 's/.*"iter_s":\([^,]*\),.*/\1/p')
  p=$("$G" plan --profile "$P" --a 2e-4 --b 1.5e-8 --policy $pol --json |
      sed -n 's/.*"predicted_iter_s":\([^,}]*\).*/\1/p' | head -1)
  /usr/bin/python3 -c "import sys; s, p = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(s - p) > 1e-9 * p)" "$s" "$p" \
    && echo "ok: --ar $pol equals plan --a --b ($s)" \
    || { echo "FAIL: --ar $pol: simulated '$s', plan '$p'"; fail=1; }
done
# --rs/--ag: DeAR's measured reduce-scatter and all-gather instead of halves
# of --ar. One tensor of 4 MB, forward 10 ms, backward 20 ms: the iteration
# is 10 + 20 + (1 + 4) + (2 + 8) ms = 45 ms; halves of --ar 0,4e-9 give
# 8 + 8 ms (46 ms), the same as no --rs/--ag at all.
printf '{"name": "one", "forward_s": 0.01, "tensors": [{"name": "w", "numel": 1000000, "dtype": "f32", "backward_s": 0.02}]}' > "$T/one.json"
dear_iter() {
  "$G" simulate --profile "$T/one.json" --workers 4 --ar 0,4e-9 --policy dear --json "$@" |
    sed -n 's/.*"iter_s":\([^,]*\),.*/\1/p'
}
for c in "0.045 --rs 1e-3,1e-9 --ag 2e-3,2e-9" "0.046 --rs 0,2e-9 --ag 0,2e-9" "0.046" \
         "0.042 --rs 0,1e-9"; do
  # shellcheck disable=SC2086
  set -- $c
  want=$1; shift
  got=$(dear_iter "$@")
  /usr/bin/python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-12)" "$got" "$want" \
    && echo "ok: dear with --ar 0,4e-9 $*: $got s" \
    || { echo "FAIL: dear with --ar 0,4e-9 $*: '$got' s, expected $want"; fail=1; }
done
expect 0 "reduce-scatter 1.000e-03 s + 1.000e-09 s/B, all-gather 2.000e-03 s + 2.000e-09 s/B" -- --profile "$T/one.json" --workers 4 --ar 0,4e-9 --rs 1e-3,1e-9 --ag 2e-3,2e-9 --policy dear
# A cost file with measured points prices each message at the time
# measured at its size: ring's points (1e5 B: 5 ms, 4e6 B: 90 ms, 1e7 B:
# 200 ms) put one.json's 4 MB at 90 ms, far off its line a + b*M, so the
# iteration is 10 + 20 + 90 ms. Halfway between two points, linear.
printf '{"ranks": 4, "nodes": 4, "alpha": 5e-5, "beta": 8e-9, "alpha_local": 1e-6, "beta_local": 2e-10, "gamma": 0, "fit": {"ring": {"alpha": 1e-4, "beta": 1e-8, "points": [[1e5, 5e-3], [4e6, 0.09], [1e7, 0.2]]}}}' > "$T/c4.json"
printf '{"name": "seven", "forward_s": 0.01, "tensors": [{"name": "w", "numel": 1750000, "dtype": "f32", "backward_s": 0.02}]}' > "$T/seven.json"
# gradsync plan prices the same file's messages on the same points
# (docs/PLANNING.md), so a plan whose groups do not depend on the price
# (wfbp) is predicted at simulate's time. Until 2026-12-07 plan --cost used
# only the file's line: price_points 0, one.json at 10 + 20 + 60.6 ms.
curve_iter() { # curve_iter VERB PROFILE WANT (simulate's iter_s, plan's predicted_iter_s)
  got=$("$G" "$1" --profile "$2" --workers 4 --cost "$T/c4.json" --algo ring --policy wfbp --json)
  /usr/bin/python3 -c "
import json, sys
d = json.loads(sys.argv[1])
it = d['iter_s'] if sys.argv[3] == 'simulate' else d['predicted_iter_s']
sys.exit(d['price_points'] != 3 or abs(it - float(sys.argv[2])) > 1e-12)" "$got" "$3" "$1" \
    && echo "ok: $1 --cost with points: $2 takes $3 s" \
    || { echo "FAIL: $1 --cost with points: $2: $got, expected $3 s"; fail=1; }
}
for verb in simulate plan; do
  curve_iter $verb "$T/one.json" 0.12
  curve_iter $verb "$T/seven.json" 0.175 # 7e6 B, halfway from 4e6 to 1e7: 90 + 110/2 ms
done
if "$G" plan --profile "$T/one.json" --workers 4 --cost "$T/c4.json" --policy wfbp \
    | grep -qF "messages priced at the all-reduce times measured (3 sizes, 100000 B to 10000000 B)"; then
  echo "ok: plan --cost with points says so"
else
  echo "FAIL: plan --cost with points does not say its messages are priced on them"; fail=1
fi
# A point of 0 bytes is refused, naming the file.
printf '{"ranks": 4, "nodes": 4, "alpha": 5e-5, "beta": 8e-9, "alpha_local": 1e-6, "beta_local": 2e-10, "gamma": 0, "fit": {"ring": {"alpha": 1e-4, "beta": 1e-8, "points": [[0, 5e-3], [4e6, 0.09], [1e7, 0.2]]}}}' > "$T/c0.json"
expect 2 "--cost $T/c0.json (--algo auto): plan cost: ring's measured point 0 has size 0" -- --profile "$T/one.json" --workers 4 --cost "$T/c0.json"
expect 0 "messages priced at the all-reduce times measured at 3 sizes, 100000 B to 10000000 B" -- --profile "$T/one.json" --workers 4 --cost "$T/c4.json" --algo ring --policy wfbp
# --plan-ar plans as an engine with that fit would, and the messages still
# cost what --ar says: two tensors of 4 MB, backward 20 ms each, --ar
# 0,4e-9. mgwfbp with a start-up of 10 s merges both (one 8 MB message,
# 32 ms: 10 + 40 + 32 ms); with none it sends two (16 ms each, the first
# hidden behind the second backward: 10 + 40 + 16 ms).
printf '{"name": "two", "forward_s": 0.01, "tensors": [{"name": "a", "numel": 1000000, "dtype": "f32", "backward_s": 0.02}, {"name": "b", "numel": 1000000, "dtype": "f32", "backward_s": 0.02}]}' > "$T/two.json"
for c in "10,0 1 0.082" "0,4e-9 2 0.066"; do
  # shellcheck disable=SC2086
  set -- $c
  got=$("$G" simulate --profile "$T/two.json" --workers 4 --ar 0,4e-9 --plan-ar "$1" --policy mgwfbp --json)
  /usr/bin/python3 -c "
import json, sys
d = json.loads(sys.argv[1])
sys.exit(d['groups'] != int(sys.argv[2]) or abs(d['iter_s'] - float(sys.argv[3])) > 1e-12)" "$got" "$2" "$3" \
    && echo "ok: --plan-ar $1: $2 message(s), $3 s" \
    || { echo "FAIL: --plan-ar $1: $got, expected $2 message(s) and $3 s"; fail=1; }
done
expect 0 "planned with --plan-ar: all-reduce 1.000e+01 s + 0.000e+00 s/B" -- --profile "$T/two.json" --workers 4 --ar 0,4e-9 --plan-ar 10,0 --policy mgwfbp
expect 2 "--plan-ar: expected" -- --profile "$T/two.json" --workers 4 --ar 0,4e-9 --plan-ar 10
expect 2 "--rs refines the measured cost of --ar" -- --profile "$P" --workers 4 --net 1gbit --rs 1e-3,1e-9
expect 2 "--ag refines the measured cost of --ar" -- --profile "$P" --workers 4 --cost "$T/c8.json" --ag 1e-3,1e-9
expect 2 "--ag: expected" -- --profile "$P" --workers 4 --ar 2e-4,1.5e-8 --ag 1e-3
expect 2 "--rs: expected" -- --profile "$P" --workers 4 --ar 2e-4,1.5e-8 --rs 1e-3,-1
# --replay: the cluster's costs fitted to replay rows' communication (comm_s
# = a * ngroups + b * grad_bytes exactly here: a = 8e-4, b = 2e-8; dear's
# rows: a reduce-scatter plus an all-gather at 4e-3 + 3e-8 M, half each).
# Rows of another shape and the bench stamp are skipped.
cat > "$T/r.jsonl" <<'EOF2'
{"stamp": {"commit": "x"}}
{"profile":"one","policy":"wfbp","chosen":"wfbp","ranks":4,"nodes":4,"ngroups":161,"grad_bytes":1e8,"comm_s":2.1288}
{"profile":"one","policy":"single","chosen":"single","ranks":4,"nodes":4,"ngroups":1,"grad_bytes":1e8,"comm_s":2.0008}
{"profile":"one","policy":"optimal","chosen":"optimal","ranks":4,"nodes":4,"ngroups":4,"grad_bytes":5e7,"comm_s":1.0032}
{"profile":"one","policy":"dear","chosen":"dear","ranks":4,"nodes":4,"ngroups":5,"grad_bytes":1e8,"comm_s":3.02}
{"profile":"one","policy":"auto","chosen":"dear","ranks":4,"nodes":4,"ngroups":2,"grad_bytes":5e7,"comm_s":1.508}
{"profile":"one","policy":"wfbp","chosen":"wfbp","ranks":8,"nodes":8,"ngroups":161,"grad_bytes":1e8,"comm_s":9}
EOF2
expect 0 "all-reduce 8.000e-04 s + 2.000e-08 s/B" -- --profile "$T/one.json" --workers 4 --replay "$T/r.jsonl" --policy wfbp
expect 0 "reduce-scatter 2.000e-03 s + 1.500e-08 s/B, all-gather 2.000e-03 s + 1.500e-08 s/B" -- --profile "$T/one.json" --workers 4 --replay "$T/r.jsonl" --policy dear
# Without dear's rows, halves of the all-reduce; a row without grad_bytes
# takes the profile of its name beside --profile (one.json: 4 MB).
grep -v dear "$T/r.jsonl" > "$T/r2.jsonl"
printf '{"profile":"one","policy":"bucket","chosen":"bucket","ranks":4,"nodes":4,"ngroups":1,"comm_s":0.0808}\n' >> "$T/r2.jsonl"
expect 0 "halves of the all-reduce" -- --profile "$T/one.json" --workers 4 --replay "$T/r2.jsonl" --policy dear
expect 0 "all-reduce 8.000e-04 s + 2.000e-08 s/B" -- --profile "$T/one.json" --workers 4 --replay "$T/r2.jsonl" --policy wfbp
s=$("$G" simulate --profile "$T/one.json" --workers 4 --replay "$T/r.jsonl" --policy wfbp --json)
if printf '%s' "$s" | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
want = {'ar_a': 8e-4, 'ar_b': 2e-8, 'rs_a': 2e-3, 'rs_b': 1.5e-8, 'ag_a': 2e-3, 'ag_b': 1.5e-8}
sys.exit(d['network'] != 'replay' or any(abs(d[k] - v) > 1e-9 * v for k, v in want.items()))"; then
  echo "ok: --replay --json reports the fitted costs"
else
  echo "FAIL: --replay --json: $s"; fail=1
fi
# Two files, comma-separated: the second's rows count too.
expect 0 "costs fitted to 9 replayed plans" -- --profile "$T/one.json" --workers 4 --replay "$T/r.jsonl,$T/r2.jsonl" --policy wfbp
expect 2 "no row of a plan other than dear measured on 2 ranks on 2 nodes (6 rows of other shapes" -- --profile "$T/one.json" --workers 2 --replay "$T/r.jsonl"
# A compressed plan's row (replay --compress: compressed_groups > 0) moved
# its compressor's payload and spent its coding time, not grad_bytes through
# all-reduces: it is left out of the fit and counted (until 2026-12-07 it
# was fitted as dense: a = 0 and b = 2.7e-9 s/B here, not 8e-4 and 2e-8).
cp "$T/r.jsonl" "$T/rz.jsonl"
printf '{"profile":"one","policy":"wfbp","chosen":"wfbp","compress":"topk:0.01","compressed_groups":161,"ranks":4,"nodes":4,"ngroups":161,"grad_bytes":1e8,"comm_s":0.2}\n' >> "$T/rz.jsonl"
printf '{"profile":"one","policy":"single","chosen":"single","compress":"auto:topk:0.01","compressed_groups":0,"ranks":4,"nodes":4,"ngroups":1,"grad_bytes":1e8,"comm_s":2.0008}\n' >> "$T/rz.jsonl"
expect 0 "all-reduce 8.000e-04 s + 2.000e-08 s/B" -- --profile "$T/one.json" --workers 4 --replay "$T/rz.jsonl" --policy wfbp
expect 0 "1 row of a compressed plan left out" -- --profile "$T/one.json" --workers 4 --replay "$T/rz.jsonl" --policy wfbp
grep compressed_groups\":161 "$T/rz.jsonl" > "$T/rc.jsonl"
expect 2 "(0 rows of other shapes, 0 of dear, 1 of a compressed plan, 0 without communication)" -- --profile "$T/one.json" --workers 4 --replay "$T/rc.jsonl"
# A row of no communication is not fitted, and the refusal says so.
printf '%s\n' '{"profile":"one","policy":"wfbp","chosen":"wfbp","ranks":4,"nodes":4,"ngroups":1,"grad_bytes":1e8,"comm_s":0}' > "$T/r0.jsonl"
expect 2 "0 of a compressed plan, 1 without communication)" -- --profile "$T/one.json" --workers 4 --replay "$T/r0.jsonl"
expect 2 "cannot open '$T/missing.jsonl'" -- --profile "$T/one.json" --workers 4 --replay "$T/missing.jsonl"
printf '{"profile":"one"\n' > "$T/bad.jsonl"
expect 2 "bad.jsonl:1 is not JSON" -- --profile "$T/one.json" --workers 4 --replay "$T/bad.jsonl"
printf '{"profile":"one","ranks":4}\n' > "$T/bad2.jsonl"
expect 2 "bad2.jsonl:1 is not a row of 'gradsync replay --json'" -- --profile "$T/one.json" --workers 4 --replay "$T/bad2.jsonl"
printf '{"profile":"nosuch","policy":"wfbp","chosen":"wfbp","ranks":4,"nodes":4,"ngroups":1,"comm_s":1}\n' > "$T/bad3.jsonl"
expect 2 "bad3.jsonl:1 has no grad_bytes" -- --profile "$T/one.json" --workers 4 --replay "$T/bad3.jsonl"
# A field out of range is refused naming the file, the line and the field
# (a negative time was dropped, ngroups 0 "had no grad_bytes", 1e300 "carried
# no bytes", 173.5 was taken); a fit that degenerates says so (was a NaN).
row='{"profile":"one","policy":"wfbp","chosen":"wfbp","ranks":4,"nodes":4,'
ok2='{"profile":"one","policy":"single","chosen":"single","ranks":4,"nodes":4,"ngroups":1,"grad_bytes":1e8,"comm_s":2.0008}'
n=0
for f in '"ngroups":161,"grad_bytes":1e8,"comm_s":-0.025|field comm_s is -0.025: expected a time in seconds' \
         '"ngroups":0,"grad_bytes":0,"comm_s":2|field ngroups is 0: expected a whole number from 1' \
         '"ngroups":161,"grad_bytes":0,"comm_s":2|field grad_bytes is 0: expected bytes above 0' \
         '"ngroups":1e300,"grad_bytes":1e8,"comm_s":2|field ngroups is 1e+300' \
         '"ngroups":161,"grad_bytes":1e300,"comm_s":2|field grad_bytes is 1e+300' \
         '"ngroups":161,"grad_bytes":1e8,"comm_s":1e300|field comm_s is 1e+300' \
         '"ngroups":173.5,"grad_bytes":1e8,"comm_s":2|field ngroups is 173.5'; do
  n=$((n + 1))
  printf '%s\n%s%s}\n' "$ok2" "$row" "${f%%|*}" > "$T/f$n.jsonl"
  expect 2 "--replay: $T/f$n.jsonl:2: ${f#*|}" -- --profile "$T/one.json" --workers 4 --replay "$T/f$n.jsonl"
done
printf '%s\n%s"ngroups":161,"grad_bytes":1e8,"comm_s":1e-300}\n' "$ok2" "$row" > "$T/tiny.jsonl"
expect 2 "--replay $T/tiny.jsonl: the fit of 2 rows: cost fit of totals: degenerate" -- --profile "$T/one.json" --workers 4 --replay "$T/tiny.jsonl"
expect 2 "give one of" -- --profile "$T/one.json" --workers 4 --replay "$T/r.jsonl" --net 1gbit
expect 2 "--replay gives the all-reduce's cost itself" -- --profile "$T/one.json" --workers 4 --replay "$T/r.jsonl" --algo ring

# JSON: one line per policy, and the simulated time equals the model's
# without jitter.
n=$("$G" simulate --profile "$P" --workers 8 --net 10GbE --json | grep -c '"policy"')
[ "$n" = 7 ] || { echo "FAIL: --json gave $n lines, expected 7"; fail=1; }
line=$("$G" simulate --profile "$P" --workers 8 --net 10GbE --json --policy optimal)
/usr/bin/python3 - "$line" <<'PY' || fail=1
import json, sys
r = json.loads(sys.argv[1])
for k in ("iter_s", "compute_s", "exposed_comm_s", "efficiency", "messages", "bytes",
          "straggler_s", "predicted_iter_s"):
    assert k in r, k
assert abs(r["iter_s"] - r["predicted_iter_s"]) <= 1e-9 * r["iter_s"], r
assert abs(r["efficiency"] - r["compute_s"] / r["iter_s"]) < 1e-12, r
print("ok: JSON fields and the model's time")
PY

# Jitter is deterministic for a seed.
a=$("$G" simulate --profile "$P" --workers 64 --net 10GbE --policy wfbp --jitter 0.1 --seed 7 --json | sed 's/"sim_wall_s":[^,}]*//')
b=$("$G" simulate --profile "$P" --workers 64 --net 10GbE --policy wfbp --jitter 0.1 --seed 7 --json | sed 's/"sim_wall_s":[^,}]*//')
[ "$a" = "$b" ] || { echo "FAIL: same seed, different results"; fail=1; }

# The trace: one file per policy with several, valid Chrome trace JSON.
"$G" simulate --profile "$P" --workers 8 --net 10GbE --policy dear --jitter 0.1 --trace "$T/t.json" >/dev/null || fail=1
"$G" simulate --profile "$P" --workers 8 --net 10GbE --trace "$T/all.json" >/dev/null || fail=1
for f in "$T/t.json" "$T/all.wfbp.json" "$T/all.dear.json" "$T/all.auto.json"; do
  /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert any(e.get('ph')=='X' for e in d['traceEvents'])" "$f" \
    || { echo "FAIL: $f is not a Chrome trace"; fail=1; }
done
[ $fail = 0 ] && echo "all ok"
# One worker has no all-reduce: a measured --ar costs nothing, as --net does.
out=$("$G" simulate --profile "$P" --workers 1 --ar 1e-3,1e-9 --policy single --json 2>&1)
if printf '%s' "$out" | grep -q '"efficiency": *1[,}]'; then echo "ok: one worker, --ar: no communication"
else echo "FAIL: one worker with --ar is charged communication: $out"; fail=1; fi
exit $fail
