#!/usr/bin/env bash
# The command line's contract, as a table: for every verb (run, bench, plan, simulate,
# replay, train, and the tool itself: help, version, unknown verbs) and every
# class of input of docs/CLI.md (unknown options, missing values, repeated
# options, numbers of the wrong kind or outside their range, options that
# cannot apply together, paths that cannot be written, environment settings
# that are not finite), the command, the exit status it must end with and a
# substring of its message. Every usage error (exit 2) of run, bench, plan and
# replay must also be ONE line on stderr ending in "(see --help)", with
# nothing on stdout. Then outputs: JSON lines are strict JSON (no NaN or
# Infinity) and valid UTF-8 whatever a profile's names contain; a size sweep
# from 1 byte ends.
# Usage: test_cli_table.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
unset GRADSYNC_TIMELINE GRADSYNC_ALPHA GRADSYNC_BETA
PY=/usr/bin/python3
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

prof=$tmp/small.json
cat > "$prof" <<'EOF'
{"name": "small", "forward_s": 0.002,
 "tensors": [{"name": "w", "numel": 1024, "backward_s": 0.001},
             {"name": "b", "numel": 16, "backward_s": 0.0005}]}
EOF
# Zero times: every prediction is 0 and no speedup exists.
printf '{"name":"zero","forward_s":0,"tensors":[{"name":"w","numel":4,"backward_s":0}]}' \
  > "$tmp/zero.json"
# Names with invalid UTF-8 (\xff\xfe), a control character (\u0007, BEL) and
# an escaped newline: outputs must stay valid UTF-8 on one line.
printf '{"name":"bad\xff\\u0007name","forward_s":0.001,"tensors":[{"name":"w\xfe\\n","numel":4,"backward_s":0.001},{"name":"b","numel":4,"backward_s":0.001}]}' \
  > "$tmp/names.json"
# More than 2^53 bytes: the planner refuses it (bad input, exit 2).
printf '{"name":"huge","forward_s":0,"tensors":[{"name":"w","numel":4000000000000000,"backward_s":0}]}' \
  > "$tmp/huge.json"
# An hour and more of compute per iteration: replay refuses it.
printf '{"name":"slow","forward_s":4000,"tensors":[{"name":"w","numel":4,"backward_s":0}]}' \
  > "$tmp/slow.json"

# t CODE NEEDLE ARGS...: runs gradsync ARGS (ENV=... words first go to env).
t() {
  local code=$1 needle=$2
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [[ $1 == *=* && $1 != -* ]]; do envs+=("$1"); shift; done
  local rc verb=${1:-}
  env "${envs[@]}" timeout 60 "$gs" "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  local what="${envs[*]} gradsync $*"
  if [ "$rc" != "$code" ]; then
    bad "$what: exit $rc, expected $code: $(head -c 400 "$tmp/err")"
    return
  fi
  if [ -n "$needle" ] && ! grep -qF -- "$needle" "$tmp/out" "$tmp/err"; then
    bad "$what: output lacks '$needle': $(head -c 400 "$tmp/err")"
    return
  fi
  # One voice: a usage error is one line on stderr with the hint, nothing on
  # stdout (the trainer's options are the train helper's: exit status and
  # message only).
  if [ "$code" = 2 ] && [ "$verb" != train ] && [ "${ONE_LINE:-1}" = 1 ]; then
    local lines
    lines=$(wc -l < "$tmp/err")
    if [ "$lines" != 1 ] || [ -s "$tmp/out" ] || ! grep -q '^gradsync[ a-z]*: .*(see --help)$' "$tmp/err"; then
      bad "$what: not one line ending in (see --help): $(head -c 400 "$tmp/err")"
      return
    fi
  fi
  ok "$what -> $rc"
}

echo "== the tool"
t 0 "usage: gradsync <command>" --help
t 0 "usage: gradsync <command>" help
t 0 "gradsync 0." --version
t 0 "usage: gradsync run" help bench
t 2 "no command given (run, bench, plan, train, replay, simulate, syncswitch, shard, cluster, submit, jobs, cancel)"
t 2 "unknown command 'frobnicate'" frobnicate
t 2 "unknown option '--frob'" --frob
t 2 "unexpected argument 'x'" --version x
t 2 "help: unknown command 'nope'" help nope

echo "== bench: options"
B=(--max-bytes 4K --iters 1 --warmup 0 --no-calibrate)
t 0 "usage: gradsync run" bench --help
t 2 "unknown option '--frob'" bench --frob
t 2 "unknown option '-x'" bench -x
t 2 "option '--step' needs a value" bench --step
# --step takes an integer, and its help says so (it said "size multiplier F").
t 2 "--step '2.5' must be an integer from 2 to 1024" bench --step 2.5
t 0 "--step K           each row's size is K times the last's: an integer" bench --help
t 2 "option '--json' takes no value" bench --json=1
t 2 "option --iters given more than once" bench --iters 2 --iters 3
t 2 "option '--m' is ambiguous: --min-bytes, --max-bytes" bench --m 4K
t 2 "option --json given more than once" bench --json --json
t 2 "unexpected argument 'extra'" bench extra
t 2 "must be a size from 1 to 64G" bench --min-bytes 0 --max-bytes 16
t 2 "must be a size from 1 to 64G" bench --max-bytes 1T
t 2 "must be a size from 1 to 64G" bench --max-bytes 65G
# Below one element a row moved 0 bytes (found by a user tester, 2026-12-01).
t 2 "--max-bytes 3 is below one element (4 bytes)" bench --min-bytes 3 --max-bytes 3 --no-calibrate
t 2 "--max-bytes 6 is below one element (8 bytes)" bench --min-bytes 6 --max-bytes 6 --dtype f64 --no-calibrate
# Profiles: text after the JSON value, a key twice (the first was taken);
# a replay list with an empty item (it was skipped).
{ cat "$prof"; echo 'trailing {{{'; } > "$tmp/trail.json"
printf '{"name":"d","forward_s":0.1,"forward_s":0.2,"tensors":[{"name":"w","numel":4,"backward_s":0.001}]}' > "$tmp/dup.json"
t 2 "(or text after its value)" plan --profile "$tmp/trail.json" --a 1e-3 --b 1e-9
t 2 "the key \"forward_s\" given twice in one object" plan --profile "$tmp/dup.json" --a 1e-3 --b 1e-9
t 2 "--policy wfbp,,dear: an empty item in the list" replay --profile "$prof" --policy wfbp,,dear
t 2 "--policy wfbp,: an empty item in the list" replay --profile "$prof" --policy wfbp,
# A tie between plans goes to the earlier policy (dear's sum came out an ulp
# lower and won).
printf '{"name":"tie","forward_s":0.1,"tensors":[{"name":"a","numel":5,"backward_s":0.01}]}' > "$tmp/tie.json"
t 0 '"chosen":"wfbp"' plan --profile "$tmp/tie.json" --a 1e-3 --b 1e-9 --json
t 2 "must be a size from 1 to 64G" bench --min-bytes -4K
t 2 "must be a size from 1 to 64G" bench --min-bytes +4K
t 2 "must be a size from 1 to 64G" bench --min-bytes 4K7
t 2 "must be a size from 1 to 64G" bench --min-bytes 1.5M
t 2 "must be a size from 1 to 64G" bench --min-bytes 0x10
t 2 "must be a size from 1 to 64G" bench --min-bytes 99999999999999999999
t 2 "must be an integer from 1 to 1000000" bench --iters 1.5
t 2 "must be an integer from 1 to 1000000" bench --iters 010
t 2 "must be an integer from 1 to 1000000" bench --iters 0x10
t 2 "must be an integer from 0 to 1000000" bench --warmup -1
t 2 "must be an integer from 2 to 1024" bench --step 99999999999999999999
t 2 "must be an integer from 2 to 1024" bench --step 1
t 2 "above 0 and up to 86400" bench --budget nan
t 2 "above 0 and up to 86400" bench --budget inf
t 2 "above 0 and up to 86400" bench --budget 0x1p3
t 2 "is larger than --max-bytes" bench --min-bytes 1M --max-bytes 4K
t 2 "does not implement bcast" bench --op bcast --algo ring
t 2 "unknown --op 'sum'" bench --op sum
t 2 "alltoall, alltoallv)" bench --op alltoallw
t 2 "--redop applies to allreduce and reduce_scatter, not to --op allgather" bench --op allgather --redop prod
t 2 "--redop applies to allreduce and reduce_scatter, not to --op bcast" bench --op bcast --redop avg
t 2 "--cost-out needs a file name" bench --cost-out ""
echo "== bench: paths and environment, before any work"
t 2 "--cost-out $tmp/none/x.json" bench "${B[@]}" --cost-out "$tmp/none/x.json"
t 2 "is a directory" bench "${B[@]}" --cost-out "$tmp"
t 2 "is not a directory" bench "${B[@]}" --cost-out "$prof/x.json"
t 2 "--cost-out /proc/gradsync-x.json" bench "${B[@]}" --cost-out /proc/gradsync-x.json
t 2 "GRADSYNC_ALPHA=nan" GRADSYNC_ALPHA=nan GRADSYNC_BETA=1e-9 bench "${B[@]}" --json
t 2 "GRADSYNC_BETA=inf" GRADSYNC_ALPHA=1e-5 GRADSYNC_BETA=inf bench "${B[@]}" --json
# A cost file every rank fails to read was ignored with a warning (exit 0).
printf '{"a":' > "$tmp/badcost.json"
t 2 "GRADSYNC_COST_FILE=$tmp/badcost.json: cost load: $tmp/badcost.json is not valid JSON" GRADSYNC_COST_FILE="$tmp/badcost.json" bench "${B[@]}"
t 2 "GRADSYNC_COST_FILE=$tmp/nonexistent.json: cost load: cannot open" GRADSYNC_COST_FILE="$tmp/nonexistent.json" bench "${B[@]}"
# One without the other was ignored, malformed or not (exit 0).
t 2 "GRADSYNC_BETA=inf without GRADSYNC_ALPHA" GRADSYNC_BETA=inf bench "${B[@]}" --json
t 2 "GRADSYNC_ALPHA=1e-5 without GRADSYNC_BETA" GRADSYNC_ALPHA=1e-5 bench "${B[@]}" --json
t 2 "GRADSYNC_SEGMENT_BYTES=12" GRADSYNC_SEGMENT_BYTES=12 bench "${B[@]}"
t 0 "" bench "${B[@]}" --cost-out "$tmp/cost.json"
[ -s "$tmp/cost.json" ] && ok "bench --cost-out wrote the file" || bad "no cost file written"
# On 2 ranks, a sweep of 3 or more sizes gives each algorithm's points: the
# sizes swept and the median times the rows report.
"$gs" run -np 2 -- "$gs" bench --op allreduce --min-bytes 4K --max-bytes 64K --iters 3 \
  --warmup 1 --json --cost-out "$tmp/cost2.json" > "$tmp/rows2.jsonl" 2> "$tmp/err2"
if "$PY" - "$tmp/cost2.json" "$tmp/rows2.jsonl" <<'EOF2'
import json, sys
cost = json.load(open(sys.argv[1]))
rows = [json.loads(l) for l in open(sys.argv[2]) if '"op"' in l]
checked = 0
for algo, fit in cost["fit"].items():
    want = sorted((r["bytes"], r["time_us"]) for r in rows if r["algo"] == algo)
    got = [(b, s * 1e6) for b, s in fit["points"]]
    assert len(want) == 3 and [b for b, _ in want] == [b for b, _ in got], (algo, want, got)
    # time_us is printed with two decimals
    assert all(abs(w - g) <= 0.006 for (_, w), (_, g) in zip(want, got)), (algo, want, got)
    checked += 1
assert checked >= 2 and cost["ranks"] == 2, cost
# Every row reports the busiest rank's CPU time per call: some CPU, and not
# more than the two ranks' threads could use in the call's time, plus a few
# ms: over 3 calls on a loaded 2-core host the threads' wake-ups around them
# weigh (1.34 ms against a 41 us call was seen with 4 other jobs running).
for r in rows:
    assert 0 < r["cpu_us"] <= 8 * r["time_us"] + 5000, r
EOF2
then ok "bench --cost-out: points are the sweep's sizes and median times; rows give cpu_us"
else bad "bench --cost-out on 2 ranks: $(tail -3 "$tmp/err2")"; fi

echo "== bench: bounded sweeps, strict JSON"
t 0 "" bench --min-bytes 1 --max-bytes 16 --iters 1 --warmup 0 --no-calibrate --json
rows=$(grep -c '"op"' "$tmp/out")
[ "$rows" -gt 0 ] && [ "$rows" -le 40 ] && ok "sweep from 1 byte ended after $rows rows" \
  || bad "sweep from 1 byte: $rows rows"
strict_json() { # strict_json FILE: every line strict JSON and valid UTF-8
  "$PY" - "$1" <<'EOF'
import json, sys
def no_const(c): raise ValueError("non-finite number " + c)
def no_twice(pairs):  # a key twice in one object is not strict JSON
    keys = [k for k, _ in pairs]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup: raise ValueError("keys twice: " + ", ".join(sorted(dup)))
    return dict(pairs)
data = open(sys.argv[1], "rb").read()
text = data.decode("utf-8")  # raises on invalid UTF-8
for line in text.splitlines():
    if line.strip():
        json.loads(line, parse_constant=no_const, object_pairs_hook=no_twice)
EOF
}
strict_json "$tmp/out" && ok "bench --json lines are strict JSON" || bad "bench JSON not strict"

echo "== OpenBLAS's kernels: the CPU's widest unless the user chose"
# Debian's OpenBLAS 0.3.21 falls back to SSE3 (Prescott) kernels on CPUs
# newer than itself; gradsync sets OPENBLAS_CORETYPE and runs itself again.
blas_core() { grep -o '"blas_core":"[^"]*"' "$tmp/out" | head -1 | cut -d'"' -f4; }
t 0 "" bench --min-bytes 4 --max-bytes 4 --iters 1 --warmup 0 --no-calibrate --json
core=$(blas_core)
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  case "$core" in
    Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids) ok "AVX2 CPU: OpenBLAS runs $core kernels" ;;
    *) bad "AVX2 CPU but OpenBLAS runs '$core' kernels" ;;
  esac
else
  [ -n "$core" ] && ok "no AVX2: OpenBLAS's own choice ($core) kept" || bad "no blas_core in env"
fi
t 0 "" OPENBLAS_CORETYPE=Prescott bench --min-bytes 4 --max-bytes 4 --iters 1 --warmup 0 \
  --no-calibrate --json
[ "$(blas_core)" = Prescott ] && ok "OPENBLAS_CORETYPE set by the user is kept" \
  || bad "OPENBLAS_CORETYPE=Prescott gave '$(blas_core)'"

echo "== plan"
t 0 "usage: gradsync plan" plan --help
t 2 "--profile FILE is required" plan --a 0 --b 0
t 2 "option --policy given more than once" plan --profile "$prof" --a 0 --b 0 --policy wfbp --policy all
t 2 "option '--a' needs a value" plan --profile "$prof" --a
t 2 "unknown option '--frob'" plan --frob
# An ambiguous prefix says so and lists the candidates (was "unknown option").
t 2 "option '--comp' is ambiguous: --compute-scale, --compress" plan --profile "$prof" --comp 1
t 2 "--a: expected seconds from 0 to 3600" plan --profile "$prof" --a 1e9 --b 0
t 2 "--a: expected seconds from 0 to 3600" plan --profile "$prof" --a nan --b 0
t 2 "--b: expected seconds per byte from 0 to 1" plan --profile "$prof" --a 0 --b inf
t 2 "--b: expected seconds per byte from 0 to 1" plan --profile "$prof" --a 0 --b -1e-9
t 2 "--compute-scale: expected a number above 0 and up to 1e+06" plan --profile "$prof" --a 0 --b 0 --compute-scale 0
t 2 "--workers: expected an integer from 1" plan --profile "$prof" --net 1GbE --workers 2.5
t 2 "either --a/--b or --net" plan --profile "$prof" --a 0 --b 0 --net 1GbE --workers 4
t 2 "--algo applies only with --net" plan --profile "$prof" --a 0 --b 0 --algo ring
t 2 "--nodes applies only with --net" plan --profile "$prof" --a 0 --b 0 --nodes 2
t 2 "--a and --b go together" plan --profile "$prof" --a 0
t 2 "--net needs --workers" plan --profile "$prof" --net 1GbE
t 2 "must divide" plan --profile "$prof" --net 1GbE --workers 4 --nodes 3
t 2 "$tmp/none.json" plan --profile "$tmp/none.json" --a 0 --b 0
t 2 "more than 2^53 bytes" plan --profile "$tmp/huge.json" --a 0 --b 0
t 0 "" plan --profile "$tmp/zero.json" --a 0 --b 0
grep -qi "nan" "$tmp/out" && bad "plan with zero times prints nan: $(cat "$tmp/out")" \
  || ok "plan with zero times prints no nan"
t 0 "" plan --profile "$tmp/zero.json" --a 0 --b 0 --json
strict_json "$tmp/out" && ok "plan --json with zero times is strict JSON" || bad "plan JSON not strict"
t 0 "" plan --profile "$tmp/names.json" --a 1e-5 --b 1e-9 --json
strict_json "$tmp/out" && ok "plan --json with bad names is strict UTF-8 JSON" \
  || bad "plan JSON with bad names"
t 0 "" plan --profile "$tmp/names.json" --a 1e-5 --b 1e-9
"$PY" -c 'import sys; t = open(sys.argv[1], "rb").read().decode("utf-8"); sys.exit(any(ord(c) < 32 and c != "\n" for c in t))' \
  "$tmp/out" && ok "plan's table with bad names is clean UTF-8" || bad "plan's table not clean"
t 2 "--search-compress: " plan --search --profile "$prof" --net 1gbit --max-workers 4 --search-compress nonsense:1
t 2 "--accuracy-table: " plan --search --profile "$prof" --net 1gbit --max-workers 4 --accuracy-table "$tmp/none.jsonl"
t 0 "" plan --search --profile "$tmp/names.json" --net 1gbit --max-workers 4 --json
strict_json "$tmp/out" && ok "plan --search --json with bad names is strict UTF-8 JSON" \
  || bad "plan --search JSON with bad names"

echo "== replay"
t 0 "usage: gradsync replay" replay --help
t 2 "are required" replay --profile "$prof"
t 2 "option --iters given more than once" replay --profile "$prof" --policy all --iters 1 --iters 2
t 2 "expected a number from 1e-06 to 1000" replay --profile "$prof" --policy all --time-scale 0
t 2 "expected a number from 1e-06 to 1000" replay --profile "$prof" --policy all --time-scale -1
t 2 "expected a number from 1e-06 to 1000" replay --profile "$prof" --policy all --time-scale nan
t 2 "expected a number from 1e-06 to 1000" replay --profile "$prof" --policy all --time-scale 1e4
t 2 "expected an integer from 1 to 1000000" replay --profile "$prof" --policy all --iters 1e3
t 2 "at most 3600 s is replayed" replay --profile "$tmp/slow.json" --policy wfbp
t 2 "unknown policy" replay --profile "$prof" --policy fastest
t 2 "--compress: " replay --profile "$prof" --policy all --compress nonsense:1
t 2 "auto:topk:0.01" replay --profile "$prof" --policy dear --compress topk:0.01
t 2 "GRADSYNC_TIMELINE $tmp/none/t.json" GRADSYNC_TIMELINE="$tmp/none/t.json" \
  replay --profile "$prof" --policy wfbp --iters 1 --warmup 0
t 0 "" replay --profile "$tmp/names.json" --policy wfbp --iters 1 --warmup 1 --json
strict_json "$tmp/out" && ok "replay --json with bad names is strict UTF-8 JSON" \
  || bad "replay JSON with bad names"

echo "== simulate"
t 0 "usage: gradsync simulate" simulate --help
t 2 "--profile" simulate --workers 4 --net 1GbE
t 2 "option --workers given more than once" simulate --profile "$prof" --workers 4 --workers 8 --net 1GbE
t 2 "unknown option '--frob'" simulate --frob
t 2 "option '--j' is ambiguous: --jitter, --jitter-dist, --json, --jitter-scope" simulate --profile "$prof" --j 0.1
t 2 "--workers" simulate --profile "$prof" --workers 0 --net 1GbE
t 2 "--workers" simulate --profile "$prof" --workers 2.5 --net 1GbE
t 2 "must divide" simulate --profile "$prof" --workers 4 --per-node 3 --net 1GbE
t 2 "--jitter" simulate --profile "$prof" --workers 4 --net 1GbE --jitter nan
t 2 "unknown policy" simulate --profile "$prof" --workers 4 --net 1GbE --policy fastest
t 2 "$tmp/none.json" simulate --profile "$tmp/none.json" --workers 4 --net 1GbE
t 2 "$tmp/none/t.json" simulate --profile "$prof" --workers 4 --net 1GbE --policy wfbp --trace "$tmp/none/t.json"
t 0 "" simulate --profile "$tmp/zero.json" --workers 4 --net 1GbE --json
strict_json "$tmp/out" && ok "simulate --json with zero times is strict JSON" \
  || bad "simulate JSON with zero times not strict"
t 0 "" simulate --profile "$tmp/names.json" --workers 4 --net 1GbE --json
strict_json "$tmp/out" && ok "simulate --json with bad names is strict UTF-8 JSON" \
  || bad "simulate JSON with bad names"

echo "== run"
t 0 "usage: gradsync run" run --help
t 2 "option -np given more than once" run -np 1 -np 2 -- /bin/true
t 2 "-np needs a rank count from 1 to 65536" run -np 1.5 -- /bin/true
t 2 "-np needs a rank count from 1 to 65536" run -np 0 -- /bin/true
t 2 "--per-node needs a number of ranks per node from 1" run -np 2 --per-node -1 -- /bin/true
t 2 "--net: unknown network '1e9bit' (expected 100mbit" run -np 1 --net 1e9bit -- /bin/true
t 2 "unknown option '--frob'" run --frob
t 2 "missing -np N" run -- /bin/true
t 2 "not divisible" run -np 3 --per-node 2 -- /bin/true
t 2 "--hosts entry 1 ('h1:0')" run --hosts h1:0 -- /bin/true
t 2 "--hostfile $tmp/none.txt: cannot read it" run --hostfile "$tmp/none.txt" -- /bin/true
t 2 "--net emulates a cluster" run --hosts h1 --net 1gbit -- /bin/true
t 2 "more than the 2 slots" run -np 3 --hosts h1:2 -- /bin/true
t 0 "--host h1:2 " run --dry-run --hosts h1:2 -- /bin/true
t 0 "mpirun --bind-to none /bin/true" SLURM_JOB_ID=7 SLURM_NODELIST=n1 run --dry-run -- /bin/true
# --elastic (docs/ELASTIC.md): its settings' refusals, and short jobs.
t 2 "--elastic needs MIN:MAX" run -np 2 --elastic 3:2 -- /bin/true
t 2 "--elastic needs MIN:MAX" run -np 2 --elastic x -- /bin/true
t 2 "option --elastic given more than once" run -np 2 --elastic 1:2 --elastic 1:2 -- /bin/true
t 2 "--discover belongs to an elastic job" run -np 1 --discover /bin/true -- /bin/true
t 2 "--max-restarts belongs to an elastic job" run -np 1 --max-restarts 2 -- /bin/true
t 2 "--max-restarts needs a count from 0 to 10000" run -np 1 --elastic 1 --max-restarts -1 -- /bin/true
t 2 "--min-wait needs seconds from 0 to 86400" run -np 1 --elastic 1 --min-wait x -- /bin/true
t 2 "--elastic with --per-node needs --net" run -np 2 --elastic 1:2 --per-node 2 -- /bin/true
t 2 "--elastic with --dry-run is not supported" run -np 2 --elastic 1:2 --dry-run -- /bin/true
t 2 "-np 4 is more than --elastic's most ranks, 2" run -np 4 --elastic 1:2 -- /bin/true
t 2 "-np 1 is fewer than --elastic's fewest ranks, 2" run -np 1 --elastic 2:3 -- /bin/true
t 2 "--discover /nonexistent: not an executable file" run --elastic 1:2 --discover /nonexistent -- /bin/true
t 2 "no size from 5 to 5 divides the program's --global-batch 48" run -np 5 --elastic 5 -- /bin/true --global-batch 48
t 2 "the program's --ps 2 servers leave no worker in a launch of 2 ranks" run -np 4 --elastic 2:4 -- /bin/true --ps 2
t 2 "no size from 3 to 4 leaves workers (less the program's --ps 1) that divide its --global-batch 5" run -np 4 --elastic 3:4 -- /bin/true --ps 1 --global-batch 5
t 2 "--events /proc/x.json: cannot write it" run -np 1 --elastic 1 --events /proc/x.json -- /bin/true
t 0 "elastic job history: 1 launch, 0 restarts" run -np 2 --elastic 1:2 -- /bin/true
t 1 "the restart budget (0) is spent" run -np 1 --elastic 1 --max-restarts 0 -- /bin/false
ONE_LINE=0 t 2 "the program refused its options (exit 2)" run -np 1 --elastic 1 -- sh -c "exit 2"
# run's options as every verb's (until 2026-12-06 only the exact names):
# --name=value, an unambiguous prefix; flags take no value.
t 0 "" run --np=2 --per=1 -- /bin/true
t 2 "option '--s' is ambiguous: --slow, --ssh-config" run -np 2 --s 1 -- /bin/true
t 2 "option '--dry-run' takes no value" run -np 2 --dry-run=1 -- /bin/true
# One slow node, one packet size and bucket: a repeat was taken, the last won.
t 2 "option --slow given more than once" run -np 3 --net 1gbit --slow 1:100mbit --slow 0:10mbit -- /bin/true
t 2 "option --gso given more than once" run -np 2 --net 1gbit --gso 2000 --gso 3000 -- /bin/true
t 2 "--net shm: shm is plan's and simulate's name" run -np 2 --net shm -- /bin/true
touch "$tmp/afile"
t 2 "--cost-cache $tmp/afile: $tmp/afile is not a directory" run -np 2 --cost-cache "$tmp/afile" -- /bin/true
printf 'not a program\n' > "$tmp/notelf"
chmod +x "$tmp/notelf"
t 2 "is neither an ELF program nor a #! script" run -np 2 -- "$tmp/notelf"
t 2 "--ssh-control needs --hosts" run -np 2 --ssh-control "$tmp/ctl" -- /bin/true
t 2 "--hosts has 131072 slots, more than the 65536 ranks" run --hosts a:65536,b:65536 -- /bin/true
t 2 "GRADSYNC_CPU_PERIOD_US=abc: expected microseconds" GRADSYNC_CPU_PERIOD_US=abc run -np 2 --node-cpus 1 -- /bin/true
# Variables forwarded by Open MPI's own list beside run's -x: Open MPI
# refused the mix.
ONE_LINE=0 t 0 "forwarded-by-env-list" MYVAR=forwarded-by-env-list OMPI_MCA_mca_base_env_list=MYVAR \
  run --hosts localhost:1 -- sh -c 'echo $MYVAR'
# An elastic job starts without a host that does not answer, if the rest
# hold its fewest ranks (one such host refused the job until 2026-12-06).
ONE_LINE=0 t 0 "starting on 1 host (1 slot) without the 1 host above that did not answer" \
  run --elastic 1:2 --hosts localhost:1,nohost.invalid:1 -- /bin/true
ONE_LINE=0 t 2 "the hosts that answered hold 1 slot, fewer than the job's fewest ranks, 2" \
  run --elastic 2:2 --hosts localhost:1,nohost.invalid:1 -- /bin/true
printf '\357\273\277localhost:1\n' > "$tmp/bom_hosts"
t 0 "" run --hostfile "$tmp/bom_hosts" -- /bin/true
# A rank's usage error is the run's exit status (mpirun adds its own lines).
ONE_LINE=0 t 2 "unknown option '--frob'" run -np 1 -- "$gs" bench --frob

echo "== shard"
printf '{"tables":[{"name":"a","rows":100,"dim":16},{"name":"b","rows":5,"dim":8,"pooling":3}]}' \
  > "$tmp/tables.json"
printf '{"tables":[{"name":"a","rows":0,"dim":16}]}' > "$tmp/badtables.json"
L=(--lookup 4e-8,4e-10)
t 0 "usage: gradsync shard" shard --help
t 2 "--tables and --ranks are required" shard --tables kaggle
t 2 "--per-node 3 does not divide --ranks 8" shard --tables kaggle --ranks 8 --per-node 3
t 2 "expected auto, tw, rw, cw, twrw or dp" shard --tables kaggle --ranks 4 --sharding row
t 2 "no such preset" shard --tables nope --ranks 4
t 2 "table 0 ('a'): \"rows\" is 0; expected a whole number" shard --tables "$tmp/badtables.json" --ranks 4
t 2 "--scale '2' must be" shard --tables kaggle --ranks 4 --scale 2
t 2 "--lookup 'x'" shard --tables kaggle --ranks 4 --lookup x
t 2 "expected A,B[,G[,AH,BH,C,GM[,AR,BR,GH]]]" shard --tables kaggle --ranks 4 --lookup 1e-8,1e-10,-1
t 0 "3 ns per bag" shard --tables kaggle --ranks 4 --lookup 1e-8,1e-10,3e-9
t 2 "expected A,B[,G[,AH,BH,C,GM[,AR,BR,GH]]]" shard --tables kaggle --ranks 4 --lookup 1e-8,1e-10,3e-9,1e-9
t 0 "17.8 MB of cache a rank, ids Zipf 1.2" shard --tables kaggle --ranks 4 --zipf 1.2 \
  --lookup 4e-8,4e-10,9e-9,0,1.2e-10,17825792,2.3e-8
t 0 "no cache model" shard --tables kaggle --ranks 4 --lookup 1e-8,1e-10,3e-9
t 0 "a distinct row's update a step: 5 ns + 0.1 ns per byte" shard --tables kaggle --ranks 4 \
  --lookup 4e-8,4e-10,9e-9,0,1.2e-10,17825792,2.3e-8,5e-9,1e-10,3e-9
t 0 "line of the pooled matrix is in the cache: 3 ns" shard --tables kaggle --ranks 4 \
  --lookup 4e-8,4e-10,9e-9,0,1.2e-10,17825792,2.3e-8,5e-9,1e-10,3e-9
t 2 "expected A,B[,G[,AH,BH,C,GM[,AR,BR,GH]]]" shard --tables kaggle --ranks 4 \
  --lookup 4e-8,4e-10,9e-9,0,1.2e-10,17825792,2.3e-8,5e-9,1e-10
t 2 "--zipf '11' must be a number from 0 to 10" shard --tables kaggle --ranks 4 --zipf 11
t 2 "--precision 'fp8'" shard --tables kaggle --ranks 4 --precision fp8
t 2 "fits on no rank under the memory cap of 1 MiB" shard --tables kaggle --ranks 4 --mem-cap 1M --sharding tw "${L[@]}"
# the cap is said in the unit it was given in (M is MiB): 200M, not "210 MB"
t 2 "memory cap of 200 MiB" shard --tables kaggle --ranks 4 --mem-cap 200M --sharding tw "${L[@]}"
t 2 "--net" shard --tables kaggle --ranks 4 --net 1xbit "${L[@]}"
t 2 "option --ranks given more than once" shard --tables kaggle --ranks 4 --ranks 8
t 0 "imbalance" shard --tables kaggle --ranks 8 --per-node 4 "${L[@]}"
t 0 "contiguous" shard --tables "$tmp/tables.json" --ranks 3 "${L[@]}"
# --json and --out: a plan every rank of the job owns once (checked on load
# by the planner's tests); the JSON names each table's sharding and reason.
if "$gs" shard --tables terabyte --scale 0.01 --ranks 8 --per-node 4 "${L[@]}" --json \
     --out "$tmp/plan.json" > "$tmp/shard.json" 2> "$tmp/err" &&
   python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
assert len(j["sharding"]) == 26 and all(t["why"] for t in j["sharding"]), j["sharding"][:2]
assert len(j["per_rank"]) == 8 and j["max_rank_s"] <= j["contiguous_max_rank_s"] * (1 + 1e-9)
assert p["ranks"] == 8 and len(p["tables"]) == 26 and len(p["shards"]) >= 26
' "$tmp/shard.json" "$tmp/plan.json"; then
  ok "gradsync shard --json --out"
else
  bad "gradsync shard --json --out: $(head -c 400 "$tmp/err")"
fi

echo "== train (options)"
t 0 "usage: gradsync run" train --help
t 2 "--epochs" train --epochs 1.5
t 2 "--batch" train --batch 0x10
t 2 "" train --frobnicate
# An unknown option and a missing value are told apart, as plan's and
# simulate's are (both said "is unknown or needs a value" until 2026-12-06).
t 2 "gradsync train: unknown option '--timeline' (see --help)" train --timeline tl.json
t 2 "gradsync train: unknown option '--bogus' (see --help)" train --bogus
t 2 "gradsync train: option '--batch' needs a value (see --help)" train --batch
t 2 "gradsync train: option '--json' takes no value" train --json=1
# A data set without one full step is refused as the inputs' (it was exit 1).
t 2 "gradsync train: 10 samples give no full step of 64 (1 rank x 64) (see --help)" train \
  --model mlp --synthetic 10 --batch 64
# The help says the synthetic test set's size as the code makes it.
t 0 "N/5 + 1 test" train --help
# Values a float cannot hold apart from 0 became 0: the compressor's default
# damping, a K-FAC damping refused on every rank (exit 1), no KL clip.
t 2 "--ef-decay '1e-50' must be a number above 0" train --compress topk:0.01 --ef-decay 1e-50
t 2 "--kfac-damping '1e-50' must be" train --optimizer kfac --kfac-damping 1e-50
t 2 "--kfac-kl-clip '1e-50' must be" train --optimizer kfac --kfac-kl-clip 1e-50
# Each names the limit it broke (they said "above 0" for 2e6 and 1e-40).
t 2 "--compress '' names no compressor" train --compress ''
t 0 "--compress-warmup-steps 1000000 is longer than the run (3 steps)" train --model mlp \
  --synthetic 256 --batch 16 --max-steps 3 --compress topk:0.01 --compress-warmup-steps 1000000
t 2 "gradsync plan: --compress '' names no compressor" plan --profile "$prof" --net 1gbit --workers 4 --compress ''
t 2 "gradsync simulate: --compress '' names no compressor" simulate --profile "$prof" --net 1gbit --workers 4 --compress ''
t 2 "--kfac-damping '2e6' must be a number above 0 and at most 1e6" train --optimizer kfac --kfac-damping 2e6
t 2 "(a float: at least 1.17549e-38)" train --optimizer kfac --kfac-damping 1e-40
t 2 "--kfac-kl-clip '1e7' must be a number from 0 (no clip) to 1e6" train --optimizer kfac --kfac-kl-clip 1e7
t 2 "--lr '1e-50' must be" train --lr 1e-50
# Options that were silently unused, or ended the job late (a user tester,
# 2026-12-01): K-FAC over parameter servers hung until the watchdog;
# compression and policies under a sync mode with its own exchange did
# nothing; dear with compression failed at the engine's creation, once per
# rank, exit 1; a warm-up the compressor has none of; asynchronous options
# under bsp.
S=(--model mlp --synthetic 64 --max-steps 1)
t 2 "--optimizer kfac with --ps: K-FAC needs every rank" train "${S[@]}" --optimizer kfac --ps 1 --sync bsp
t 2 "--compress topk:0.01: compression is the engine's, and --sync bsp" train "${S[@]}" --ps 1 --sync bsp --compress topk:0.01
t 2 "--compress topk:0.01: compression is the engine's, and --sync local" train "${S[@]}" --sync local:2 --compress topk:0.01
t 2 "--policy dear: the policy schedules the engine's messages" train "${S[@]}" --ps 1 --sync asp --policy dear
t 2 "--compress topk:0.1 with --policy dear: compression" train "${S[@]}" --policy dear --compress topk:0.1
t 2 "--compress-warmup-steps: gtopk has no density warm-up" train "${S[@]}" --compress gtopk:0.1 --compress-warmup-steps 8
t 2 "not to bsp" train "${S[@]}" --ps 1 --sync bsp --async-momentum 0.5
# The summary of a parameter-server run names its sync once (it had "sync"
# twice: "switch" and "switch:offline:0.5").
timeout 120 "$gs" run -np 3 -- "$gs" train --model mlp --synthetic 512 --batch 16 --max-steps 4 \
  --ps 1 --sync switch:offline:0.5 --json > "$tmp/out" 2> "$tmp/err"
if strict_json "$tmp/out" && grep -q '"sync":"switch:offline:0.5"' "$tmp/out"; then
  ok "train --ps --sync switch: the JSON summary is strict (one \"sync\")"
else bad "train --ps --sync switch: JSON not strict: $(tail -c 300 "$tmp/out") $(tail -2 "$tmp/err")"; fi
# Its ranks are the job's, servers included, with which of them train
# (until 2026-12-06 "ranks" was the workers, 2, and there was no "workers").
if "$PY" -c 'import json, sys
s = [json.loads(l)["summary"] for l in open(sys.argv[1]) if l.startswith("{\"summary\"")][0]
assert (s["ranks"], s["workers"], s["servers"]) == (3, 2, 1), s' "$tmp/out"; then
  ok "train --ps 1 on 3 ranks: the JSON summary's ranks 3, workers 2, servers 1"
else bad "train --ps 1 on 3 ranks: the JSON summary: $(grep -o '"summary":{[^}]*' "$tmp/out" | head -c 300)"; fi
timeout 120 "$gs" run -np 3 -- "$gs" train --model mlp --synthetic 512 --batch 16 --max-steps 4 \
  --ps 1 --sync bsp > "$tmp/out" 2> "$tmp/err"
if grep -q '^summary: mlp on 3 ranks (2 workers, 1 server), 1 epoch(s), batch 16 per worker$' "$tmp/out"; then
  ok "train --ps 1 on 3 ranks: the summary says 3 ranks (2 workers, 1 server)"
else bad "train --ps 1 on 3 ranks: the summary: $(grep '^summary' "$tmp/out") $(tail -2 "$tmp/err")"; fi

echo "== syncswitch search"
# TRAIN OPTIONS that it sets, or that the trainer refuses, are refused before
# any run (the first trial failed: exit 1 and "--sync is given more than
# once"); its own options once each; one line for an unknown one.
SS=(syncswitch search -np 3 --ps 1 --steps 1)
t 2 "TRAIN OPTIONS: --sync is set by syncswitch" "${SS[@]}" -- --model mlp --sync bsp
t 2 "TRAIN OPTIONS: --json is set by syncswitch" "${SS[@]}" -- --model mlp --json
t 2 "TRAIN OPTIONS: --ps is set by syncswitch" "${SS[@]}" -- --model mlp --ps=2
t 2 "TRAIN OPTIONS: --checkpoint: every trial of the search trains from scratch" "${SS[@]}" -- --model mlp --checkpoint /tmp/x
t 2 "TRAIN OPTIONS: --resume: every trial" "${SS[@]}" -- --model mlp --resume=auto
t 2 "TRAIN OPTIONS: --stop-at-step: every trial" "${SS[@]}" -- --model mlp --stop-at-step 3
t 2 "TRAIN OPTIONS: --model dlrm has no parameter servers" "${SS[@]}" -- --model=dlrm
t 2 "needs -np N (the job's ranks) (see --help)" syncswitch search --ps 1 -- --model mlp
t 2 "needs --ps S (how many" syncswitch search -np 3 -- --model mlp
t 2 "--ps 3 on -np 3: at least one rank must be a worker" syncswitch search -np 3 --ps 3 -- --model mlp
t 2 "TRAIN OPTIONS: unknown option '--bogus'" "${SS[@]}" -- --model mlp --bogus
t 2 "TRAIN OPTIONS: --momentum '2' must be a number from 0 to 0.999" "${SS[@]}" -- --model mlp --momentum 2
t 2 "--steps is given more than once" "${SS[@]}" --steps 2 -- --model mlp
t 2 "unknown option 'extra' (see --help)" "${SS[@]}" extra
if [ "$(grep -c "see --help" "$tmp/err")" = 1 ] && ! grep -q "see 'gradsync" "$tmp/err"; then
  ok "syncswitch: an unknown option's line has one help hint"
else bad "syncswitch: unknown option: $(cat "$tmp/err")"; fi
# A search of one halving step: the BSP run and switch:offline:0.5, as JSON.
timeout 200 "$gs" "${SS[@]}" --json -- --model mlp --synthetic 512 --batch 16 --max-steps 3 \
  > "$tmp/out" 2> "$tmp/err"
rc=$?
if [ $rc = 0 ] && "$PY" - "$tmp/out" <<'EOF3'
import json, sys
o = json.load(open(sys.argv[1]))
r = o["runs"]
assert len(r) == 1 and r[0]["fraction"] == 0.5, r
want = 0.5 if r[0]["accepted"] else 1
assert o["fraction"] == want, (o["fraction"], want)
# Accuracies are fractions, as train's JSON has them; the tolerance is in points.
assert 0 <= o["bsp_accuracy"] <= 1 and 0 <= r[0]["test_accuracy"] <= 1, o
assert o["tolerance"] == 0.5
ok = r[0]["test_accuracy"] >= o["bsp_accuracy"] - o["tolerance"] / 100 - 1e-12
assert r[0]["accepted"] == ok, (r[0], o["bsp_accuracy"])
EOF3
then ok "syncswitch search --steps 1 --json: one trial at 0.5, the fraction it implies"
else bad "syncswitch search: exit $rc: $(tail -c 300 "$tmp/out") $(tail -3 "$tmp/err")"; fi

# An option error of bench and replay under a launcher: said once, by rank
# 0 (each rank said it until 2026-12-06), exit 2.
once() { # once WHAT NEEDLE ARGS...
  local what=$1 needle=$2
  shift 2
  "$gs" run -np 3 -- "$gs" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? n
  n=$(grep -c -- "$needle" "$tmp/err")
  if [ $rc = 2 ] && [ "$n" = 1 ]; then ok "$what: said once on 3 ranks, exit 2"
  else bad "$what: exit $rc, said $n times (want once): $(head -3 "$tmp/err")"; fi
}
once "bench --redop with bcast" "--redop applies to allreduce and reduce_scatter" \
  bench --redop sum --op bcast
once "bench --min-bytes 4x" "--min-bytes" bench --min-bytes 4x
once "replay --policy foo" "unknown policy 'foo'" replay --profile "$prof" --policy foo
once "bench --op sparse_allreduce --compress dgc:0.01" "expected topk:D" \
  bench --op sparse_allreduce --compress dgc:0.01
once "bench --op sparse_allreduce --iters 0" "--iters '0' must be an integer from 1" \
  bench --op sparse_allreduce --compress topk:0.01 --iters 0
# The sparse and top-k benches' options in the verbs' one format, each once.
t 2 "gradsync bench: unknown option '--bogus' (see --help)" \
  bench --op sparse_allreduce --compress topk:0.01 --bogus
t 2 "gradsync bench: unknown option '--bogus' (see --help)" bench --op topk --bogus
t 2 "option --n given more than once" bench --op topk --n 1000 --n 1000
t 2 "option --n given more than once" bench --op sparse_allreduce --compress topk:0.01 --n 9 --n 9
# bench --op topk --n takes an integer count as every count does (until
# 2026-12-07 it read strtod: 1.5 ran with n = 2, 0x10 and 010 were taken);
# 25.6M, an integer written with a power of 10, still is one.
t 2 "--n: '1.5' is not an integer from 1 to 2^32-1" bench --op topk --n 1.5
t 2 "--n: '0x10' is not an integer from 1 to 2^32-1" bench --op topk --n 0x10
t 2 "--n: '010' is not an integer from 1 to 2^32-1" bench --op topk --n 010
t 2 "--n: '1.0005K' is not an integer from 1 to 2^32-1" bench --op topk --n 1.0005K
t 2 "--n: '0x1K' is not an integer from 1 to 2^32-1" bench --op topk --n 0x1K
t 2 "--n: '4294967296' is not an integer from 1 to 2^32-1" bench --op topk --n 4294967296
t 0 "n = 1500, k = 15" bench --op topk --n 1.5K --density 0.01 --iters 1 --only fast
t 0 "n = 1200, k = 12" bench --op topk --n 1200 --density 0.01 --iters 1 --only fast
# --density's message states its real bound (it said "(0, 1]" of 1e-12).
t 2 "--density: '1e-12' is not a number from 1e-09 to 1" bench --op topk --density 1e-12
t 2 "--n '1.5' must be an integer from 1 to 2^32-1" \
  bench --op sparse_allreduce --compress topk:0.01 --n 1.5
t 2 "--n '0x10' must be an integer from 1 to 2^32-1" \
  bench --op sparse_allreduce --compress topk:0.01 --n 0x10
# The help lists both benches of their own and says what --compress SPEC
# does (until 2026-12-07 bench's omitted topk, and train's said a plain SPEC
# took the exchange the plan predicts fastest: only auto:SPEC chooses).
t 0 "--op topk --help" bench --help
t 0 "compressor's own exchange; auto:SPEC lets the plan" train --help

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
