#!/usr/bin/env bash
# How much the emulated cluster's nodes slow each other down (issue 39: the
# simulator within 10% of the real runs). The 8 emulated nodes are network
# namespaces on one host: capped at CLUSTER_NODE_CPUS cores each, they still
# time-share its cores and caches, so a job runs slower while the other
# nodes compute than alone, which no node of a real cluster does. This
# measures it under the manager, as the real runs have it (`cluster serve
# --emulated 8 --rate 1gbit --node-cpus C`, static, --commit-every 20): a
# job of the trace's kinds (bench/cluster/trace.py --mix scaling: cnn-big
# and resnet, their trace arguments) on n nodes alone and with the pool's
# other 8 - n nodes busy (filler jobs of the resnet kind, one a node,
# computing before the measured job is submitted and cancelled after it),
# REPS times each, alternating; its run under the manager (start to end: the
# launch over ssh, the program, the exit; what the simulator's completion
# times are made of) and its time inside the program (the summary's wall_s).
# K = busy / alone - 1 of the run at n = 1 is `gradsync cluster simulate
# --interference K` (a job on n of N nodes runs at 1 / (1 + K (B - n) /
# (N - n)) of its speed alone while B nodes compute); the n = 4 rows check
# that shape (it predicts 1 + K there too: every other node busy). Until
# 2026-12-07 K was of wall_s, the launch and the exit left out.
# Writes $BENCH_OUT/cluster_interference.{jsonl,md}. Needs root and sshd.
# Usage: bench/cluster/interference.sh [REPS]   (default 2)
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GRADSYNC_SPOOL
reps=${1:-2}
cpus=${CLUSTER_NODE_CPUS:-0.22}
pool=8
tmp=$(mktemp -d)
spool=$tmp/spool
# shellcheck source=bench/cluster/manager_lib.sh
. "$here/manager_lib.sh"
trap manager_cleanup EXIT
python3 "$here/trace.py" --jobs 20 --seed 1 --mix scaling --span 60 --cache "$tmp/cache" \
  >"$tmp/trace.jsonl"
"$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
# Each kind's trace arguments (its first job's).
kind_args() {
  python3 - "$tmp/trace.jsonl" "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    if j["name"].rsplit("-", 1)[0] == sys.argv[2]:
        print("\n".join(j["args"]))
        break
PY
}
mapfile -t cnn < <(kind_args cnn-big)
mapfile -t resnet < <(kind_args resnet)
# The fillers: resnet's arguments, steps and epochs enough to outlast any
# measurement (they are cancelled after it).
filler=()
skip=
for a in "${resnet[@]}"; do
  if [ -n "$skip" ]; then filler+=("$skip"); skip=; continue; fi
  filler+=("$a")
  case $a in --epochs) skip=100 ;; --max-steps) skip=100000 ;; esac
done
manager_start "$spool" "$tmp/serve.log" --emulated "$pool" --rate 1gbit --node-cpus "$cpus" \
  --policy static --interval 2 --commit-every 20
state_of() { "$gs" jobs --spool "$spool" --json | grep "\"id\":$1," |
  sed -E 's/.*"state":"([a-z]+)".*/\1/'; }
wait_end() {
  for _ in $(seq 1 2400); do
    case $(state_of "$1") in done | failed | cancelled) return 0 ;; esac
    sleep 0.5
  done
  return 1
}
# A filler computes once the manager has read its first commit.
computing() { "$gs" jobs --spool "$spool" --json | grep "\"id\":$1," |
  grep -qE '"progress":(0\.0*[1-9]|[1-9])'; }
out=$BENCH_OUT/cluster_interference.jsonl
: >"$out"
# measure KIND N BUSY(0|1) REP ARGS...
measure() {
  local kind=$1 n=$2 busy=$3 rep=$4
  shift 4
  local fill=() f id
  if [ "$busy" = 1 ]; then
    for ((f = 0; f < pool - n; f++)); do
      fill+=("$("$gs" submit --spool "$spool" --min 1 --max 1 --name filler -- "${filler[@]}")")
    done
    for f in "${fill[@]}"; do
      for _ in $(seq 1 600); do computing "$f" && break; sleep 0.5; done
    done
  fi
  echo "== $kind on $n node(s), the others $([ "$busy" = 1 ] && echo busy || echo idle), $rep/$reps ($(date +%T))" >&2
  id=$("$gs" submit --spool "$spool" --min "$n" --max "$n" --name "$kind-$n" -- "$@")
  wait_end "$id" || { echo "interference: job $id did not end" >&2; exit 1; }
  [ ${#fill[@]} -gt 0 ] && "$gs" cancel --spool "$spool" "${fill[@]}" >/dev/null
  for f in "${fill[@]}"; do wait_end "$f" || true; done
  local wall run
  wall=$(grep '"summary"' "$spool/jobs/$id/out.log" | tail -1 | sed -E 's/.*"wall_s":([0-9.]+).*/\1/')
  [ -n "$wall" ] || { echo "interference: job $id has no summary" >&2; exit 1; }
  # Its run under the manager: from its start to its end (the launch over
  # ssh, the program, the exit), what the simulator's completion times are
  # made of.
  run=$("$gs" jobs --spool "$spool" --json | python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j.get("id") == int(sys.argv[1]):
        print(round(j["end_time"] - j["start_time"], 3))' "$id")
  [ -n "$run" ] || { echo "interference: job $id has no start and end" >&2; exit 1; }
  echo "{\"kind\":\"$kind\",\"nodes\":$n,\"others\":\"$([ "$busy" = 1 ] && echo busy || echo idle)\",\"rep\":$rep,\"job\":$id,\"wall_s\":$wall,\"run_s\":$run}" >>"$out"
}
for ((r = 1; r <= reps; r++)); do
  measure resnet 1 0 "$r" "${resnet[@]}"
  measure resnet 1 1 "$r" "${resnet[@]}"
  measure cnn-big 1 0 "$r" "${cnn[@]}"
  measure cnn-big 1 1 "$r" "${cnn[@]}"
  measure resnet 4 0 "$r" "${resnet[@]}"
  measure resnet 4 1 "$r" "${resnet[@]}"
done
manager_stop "$spool"
python3 - "$out" "$cpus" >"$BENCH_OUT/cluster_interference.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"kind"')]
print("# The emulated nodes' interference\n")
print(f"A job of the real trace's kinds under the manager on 8 emulated nodes (1 Gbit/s, "
      f"{sys.argv[2]} cores each, static), alone and with the pool's other nodes computing "
      "(one filler job of the resnet kind a node), its run under the manager (from its start "
      "to its end: the launch over ssh, the program, the exit) and its time inside the "
      "program (its summary's wall_s); every run listed. **K** = busy / alone - 1 of the "
      "run, at one node: `gradsync cluster simulate --interference K`, a job on n of N nodes "
      "running at 1 / (1 + K (B - n) / (N - n)) of its speed alone while B nodes compute "
      "(until 2026-12-07 K was of wall_s: the launch and the exit, slowed too while the "
      "other nodes compute, were left out). Absolute times on this shared host vary from "
      "run to run.\n")
print("| kind | nodes | run alone s (runs) | run, others busy s (runs) | busy / alone | "
      "in the program: alone s | others busy s | busy / alone |")
print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |")
ks, kw = [], []
for kind, n in sorted({(r["kind"], r["nodes"]) for r in rows}, key=lambda x: (x[1], x[0])):
    sel = lambda o: [r for r in rows if (r["kind"], r["nodes"], r["others"]) == (kind, n, o)]
    a, b = sel("idle"), sel("busy")
    if not a or not b:
        continue
    ra = [r["run_s"] for r in a]
    rb = [r["run_s"] for r in b]
    wa = statistics.mean(r["wall_s"] for r in a)
    wb = statistics.mean(r["wall_s"] for r in b)
    ratio = statistics.mean(rb) / statistics.mean(ra)
    if n == 1:
        ks.append(ratio - 1)
        kw.append(wb / wa - 1)
    print(f"| {kind} | {n} | {statistics.mean(ra):.1f} ({', '.join(f'{x:.1f}' for x in ra)}) | "
          f"{statistics.mean(rb):.1f} ({', '.join(f'{x:.1f}' for x in rb)}) | {ratio:.3f} | "
          f"{wa:.1f} | {wb:.1f} | {wb / wa:.3f} |")
if ks:
    k = statistics.mean(ks)
    print(f"\nK = {k:.3f} (the mean over the 1-node kinds' runs: "
          f"{', '.join(f'{x:.3f}' for x in ks)}; inside the program "
          f"{statistics.mean(kw):.3f}).")
    print(f"\n<!-- interference {k:.4f} -->")
PY
bench_stamp "$out" "$(bench_quote bench/cluster/interference.sh "$@")"
bench_stamp "$BENCH_OUT/cluster_interference.md" "$(bench_quote bench/cluster/interference.sh "$@")"
cat "$BENCH_OUT/cluster_interference.md"
