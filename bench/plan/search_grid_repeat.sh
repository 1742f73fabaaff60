#!/usr/bin/env bash
# Repeats, for bench/plan/search_grid.sh's contested cases, the recommended
# cell and the best other cell of the grid, so that the comparison rests on
# more than two rounds on a shared, loaded host.
#
# A case is contested when the recommendation's measured throughput is below
# -t (default 0.95) of the best cell's. The two cells are then run again:
# in one launch, alternating each round (--rounds R), when they share the
# worker count and the compressor (policies differ only); else in 2 x R
# launches of one round each, alternating which goes first. The lines go to
# bench/results/search_grid_repeat.jsonl (role "repeat"), and the summary
# (search_grid.md) is rewritten from both files.
#
# Usage: bench/plan/search_grid_repeat.sh [-r ROUNDS] [-t THRESHOLD] [-c CASE]...
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
gs=${GS:-$BENCH_BUILD/gradsync}
rounds=4 threshold=0.95 only=()
while getopts "r:t:c:" o; do
  case $o in
    r) rounds=$OPTARG ;;
    t) threshold=$OPTARG ;;
    c) only+=("$OPTARG") ;;
    *) exit 2 ;;
  esac
done
[ -n "${GS:-}" ] || bench_build gradsync_cli
out=$BENCH_OUT
grid=$out/search_grid.jsonl
raw=$(mktemp)
trap 'rm -f "$raw" "$raw.out" "$raw.err"' EXIT
cmds=()

# The contested cases: "case rw rpol rz bw bpol bz scale iters warmup".
mapfile -t todo < <(python3 - "$grid" "$threshold" "${only[@]}" <<'PY'
import json, statistics, sys
grid, thr, only = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
rows = [json.loads(l) for l in open(grid) if not l.startswith('{"stamp"')]
for s in (r for r in rows if r["kind"] == "search"):
    case, rec = s["case"], s["search"]["recommendation"]
    if only and case not in only or rec["sync"] != "allreduce":
        continue
    cells = {}
    for r in rows:
        if r["kind"] == "cell" and r["case"] == case and "iter_s" in r:
            cells.setdefault((r["workers"], r["policy"], r["compress"]), []).append(r)
    tput = {k: k[0] / statistics.median(c["iter_s"] for c in v) for k, v in cells.items()}
    rk = (rec["workers"], rec["policy"], rec["compress"])
    if rk not in tput:
        continue
    best = max((k for k in tput if k != rk), key=tput.get, default=None)
    if best is None or tput[rk] >= thr * tput[best]:
        continue
    c0 = cells[rk][0]
    print(case, *rk, *best, s["search"]["compute_scale"], c0["iters"], c0["warmup"])
PY
)

run_cells() { # CASE WORKERS POLICIES COMPRESS ROUNDS
  local case=$1 w=$2 pols=$3 z=$4 rd=$5 p=${1%/*} net=${1#*/} rc=0
  local argv=("$gs" run -np "$w" --net "$net" -- "$gs" replay --profile "profiles/$p.json"
              --policy "$pols" --iters "$iters" --warmup "$warmup" --rounds "$rd"
              --time-scale "$scale" --json)
  [ "$z" = none ] || argv+=(--compress "$z")
  cmds+=("$(bench_quote "${argv[@]}")")
  "${argv[@]}" >"$raw.out" 2>"$raw.err" || rc=$?
  python3 - "$case" "$w" "$z" "$rc" "$raw.out" <<'PY' | tee -a "$raw" >&2
import json, sys
case, w, z, rc, outf = sys.argv[1:]
for line in open(outf):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    o = {"kind": "cell", "case": case, "role": "repeat", "workers": int(w),
         "policy": r["policy"], "compress": z, "rc": int(rc)}
    o.update({k: r[k] for k in ("round", "chosen", "iter_s", "predicted_s", "ngroups",
                                "bytes_per_step", "compressed_groups", "iters", "warmup")
              if k in r})
    print(json.dumps(o))
PY
}

for t in "${todo[@]}"; do
  read -r case rw rpol rz bw bpol bz scale iters warmup <<<"$t"
  echo "== $case: recommended $rw $rpol $rz against $bw $bpol $bz ($(date +%T))" >&2
  if [ "$rw" = "$bw" ] && [ "$rz" = "$bz" ]; then
    run_cells "$case" "$rw" "$rpol,$bpol" "$rz" "$rounds"
  else
    for ((k = 0; k < rounds; k++)); do
      if ((k % 2 == 0)); then
        run_cells "$case" "$bw" "$bpol" "$bz" 1
        run_cells "$case" "$rw" "$rpol" "$rz" 1
      else
        run_cells "$case" "$rw" "$rpol" "$rz" 1
        run_cells "$case" "$bw" "$bpol" "$bz" 1
      fi
    done
  fi
done
cp "$raw" "$out/search_grid_repeat.jsonl"
bench_stamp "$out/search_grid_repeat.jsonl" "$(printf '%s; ' "${cmds[@]}")"
python3 bench/plan/summarize_search_grid.py "$grid" "$out/search_grid_repeat.jsonl" \
  >"$out/search_grid.md"
bench_stamp "$out/search_grid.md" \
  "python3 bench/plan/summarize_search_grid.py $grid $out/search_grid_repeat.jsonl"
cat "$out/search_grid.md"
