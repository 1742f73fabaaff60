#!/usr/bin/env bash
# Checks `gradsync plan --search` against measurement (issue 40, item 2).
#
# For each profile and network: the search's recommendation for at most 4
# workers on 4 emulated nodes (one per node), then a grid of configurations
# actually run with `gradsync replay` (compute replayed by sleeping, the
# gradients really communicated through the engine), and the recommended
# configuration's measured throughput against the grid's best:
#
#   workers 2 and 4  x  dense with wfbp, mgwfbp, dear and auto, and the
#   recommended compressor (or, when the search keeps dense, the fastest
#   candidate it predicted) with wfbp, mgwfbp and auto (dear's reduce-
#   scatter and all-gather cannot be sent compressed)
#
# plus the recommended configuration itself when the grid lacks it (another
# policy or count). Each launch runs its policies in turn for -r ROUNDS
# rounds (default 2; odd rounds in reverse order), so that the shared,
# loaded host's drift does not favour the policies measured first; a cell's
# figure is the median over its rounds. On a slow network (-S NET, default
# 100mbit) dense iterations take seconds (GoogleNet's 26 MB need 3.7 s on 4
# nodes at 100 Mbit/s, ResNet-50's 102 MB 14 s): there dense runs with wfbp
# and auto only, one round of 1 warm-up and 2 measured iterations, to keep
# the whole run near 20 minutes.
#
# Parameter servers are not replayable (replay drives the engine's
# all-reduce only): a recommendation of them is recorded, not measured, and
# the grid holds none. Throughput is samples per second: workers x the
# profile's batch over the measured iteration (the slowest rank's median).
# Compute is scaled by -s (default 0.25) in the search and in every replay.
#
# Usage: bench/plan/search_grid.sh [-p PROFILE]... [-n NET]... [-s SCALE]
#                                  [-i ITERS] [-w WARMUP] [-r ROUNDS] [-S NET]...
#   BENCH_QUICK=1: googlenet on 1gbit, 2 iterations after 1 warm-up, 1 round.
# Writes bench/results/search_grid.jsonl and bench/results/search_grid.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
gs=${GS:-$BENCH_BUILD/gradsync}
profiles=() nets=() scale=0.25 iters=4 warmup=2 rounds=2
slow=(100mbit) slow_iters=2 slow_warmup=1
if [ "$BENCH_QUICK" = 1 ]; then
  profiles=(googlenet) nets=(1gbit) iters=2 warmup=1 rounds=1
fi
while getopts "p:n:s:i:w:r:S:" o; do
  case $o in
    p) [ -n "${p_given:-}" ] || profiles=(); p_given=1; profiles+=("$OPTARG") ;;
    n) [ -n "${n_given:-}" ] || nets=(); n_given=1; nets+=("$OPTARG") ;;
    s) scale=$OPTARG ;;
    i) iters=$OPTARG ;;
    w) warmup=$OPTARG ;;
    r) rounds=$OPTARG ;;
    S) [ -n "${S_given:-}" ] || slow=(); S_given=1; slow+=("$OPTARG") ;;
    *) exit 2 ;;
  esac
done
[ ${#profiles[@]} -gt 0 ] || profiles=(googlenet densenet201 resnet50)
[ ${#nets[@]} -gt 0 ] || nets=(1gbit 100mbit)
[ -n "${GS:-}" ] || bench_build gradsync_cli
out=$BENCH_OUT
raw=$(mktemp)
trap 'rm -f "$raw" "$raw.err" "$raw.out"' EXIT
cmds=()

# replay_cells CASE ROLE WORKERS POLICIES COMPRESS ITERS WARMUP ROUNDS: one
# launch, one JSON line per policy and round.
replay_cells() {
  local case=$1 role=$2 w=$3 pols=$4 z=$5 it=$6 wu=$7 rd=$8 rc=0
  local argv=("$gs" run -np "$w" --net "$net" -- "$gs" replay --profile "profiles/$p.json"
              --policy "$pols" --iters "$it" --warmup "$wu" --rounds "$rd"
              --time-scale "$scale" --json)
  [ "$z" = none ] || argv+=(--compress "$z")
  cmds+=("$(bench_quote "${argv[@]}")")
  local t0 t1
  t0=$(date +%s)
  "${argv[@]}" >"$raw.out" 2>"$raw.err" || rc=$?
  t1=$(date +%s)
  python3 - "$case" "$role" "$w" "$pols" "$z" "$rc" "$raw.out" "$raw.err" "$((t1 - t0))" \
    >>"$raw" <<'PY'
import json, sys
case, role, w, pols, z, rc, outf, errf, wall = sys.argv[1:]
n = 0
for line in open(outf):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    o = {"kind": "cell", "case": case, "role": role, "workers": int(w),
         "policy": r["policy"], "compress": z, "rc": int(rc), "launch_wall_s": int(wall)}
    o.update({k: r[k] for k in ("round", "chosen", "iter_s", "predicted_s", "ngroups",
                                "bytes_per_step", "compressed_groups", "comm_s",
                                "exposed_comm_s", "nodes", "iters", "warmup") if k in r})
    print(json.dumps(o))
    n += 1
if n == 0 or int(rc) != 0:
    print(json.dumps({"kind": "failure", "case": case, "role": role, "workers": int(w),
                      "policy": pols, "compress": z, "rc": int(rc),
                      "stderr": open(errf).read()[-600:]}))
PY
  echo "   $role: $w workers, $pols, $z: exit $rc, $((t1 - t0)) s ($(date +%T))" >&2
  python3 - "$raw.out" <<'PY' >&2 || true
import json, sys
for l in open(sys.argv[1]):
    try:
        r = json.loads(l)
        pred = r.get("predicted_s")
        print(f"      round {r['round']} {r['policy']:7s} ({r['chosen']}): {r['iter_s'] * 1e3:8.1f} ms"
              + (f" (predicted {pred * 1e3:.1f})" if pred is not None else ""))
    except (ValueError, KeyError):
        pass
PY
}

for net in "${nets[@]}"; do
  for p in "${profiles[@]}"; do
    case=$p/$net
    echo "== $case: compute x$scale ($(date +%T))" >&2
    sargv=("$gs" plan --search --profile "profiles/$p.json" --net "$net" --max-workers 4
           --compute-scale "$scale" --json)
    cmds+=("$(bench_quote "${sargv[@]}")")
    srch=$("${sargv[@]}")
    python3 - "$case" "$srch" >>"$raw" <<'PY'
import json, sys
print(json.dumps({"kind": "search", "case": sys.argv[1], "search": json.loads(sys.argv[2])}))
PY
    # The recommendation and the compressor the grid compares with dense.
    read -r rw rpol rsync rz gz < <(python3 - "$srch" <<'PY'
import json, sys
d = json.loads(sys.argv[1]); r = d["recommendation"]
cands = d["compression"]["candidates"]
z = r["compress"]
g = z if z != "none" else (min(cands, key=lambda c: c["iter_s"])["spec"] if cands else "none")
print(r["workers"], r["policy"], r["sync"], z, g)
PY
)
    echo "   search: $rw workers, $rpol, $rsync, compress $rz (grid compressor $gz)" >&2
    for w in 2 4; do
      if [[ " ${slow[*]} " == *" $net "* ]]; then
        replay_cells "$case" grid "$w" wfbp,auto none "$slow_iters" "$slow_warmup" 1
      else
        replay_cells "$case" grid "$w" wfbp,mgwfbp,dear,auto none "$iters" "$warmup" "$rounds"
      fi
      if [ "$gz" != none ]; then
        replay_cells "$case" grid "$w" wfbp,mgwfbp,auto "$gz" "$iters" "$warmup" "$rounds"
      fi
    done
    # The recommendation when the grid lacks it; parameter servers cannot
    # be replayed.
    if [ "$rsync" = allreduce ] &&
       ! grep -q "\"case\": \"$case\", \"role\": \"grid\", \"workers\": $rw, \"policy\": \"$rpol\", \"compress\": \"$rz\"" "$raw"; then
      replay_cells "$case" recommended "$rw" "$rpol" "$rz" "$iters" "$warmup" "$rounds"
    fi
  done
done
cp "$raw" "$out/search_grid.jsonl"
bench_stamp "$out/search_grid.jsonl" "$(printf '%s; ' "${cmds[@]}")"
python3 bench/plan/summarize_search_grid.py "$out/search_grid.jsonl" >"$out/search_grid.md"
bench_stamp "$out/search_grid.md" "python3 bench/plan/summarize_search_grid.py $out/search_grid.jsonl"
cat "$out/search_grid.md"
