#!/usr/bin/env bash
# Calibrates the network presets against the emulated link (issue 36,
# item 2): what one collective costs on `gradsync run --net 1gbit` as
# gradsync's engine runs it, on clusters of 4 and 8 nodes (one rank per
# node), measured on this host.
#
# For each cluster of N nodes:
#   1. `gradsync bench --op allreduce --algo all --cost-out`: every
#      all-reduce algorithm (ring, recursive doubling, Rabenseifner; MPI's
#      own as the peer) from 4 KB to 64 MB; the cost module itself
#      (gs_cost_fit_algo) fits each algorithm's alpha (one message step) and
#      beta (a byte on a link) to the medians, so no formula is restated here.
#   2. `gradsync bench --op reduce_scatter` and `--op allgather` (DeAR's two
#      halves, ring, and MPI's peer): measured points only; the presets price
#      them with the ring's constants, and the summary shows how close that is.
#   3. `gradsync replay` of two synthetic profiles without compute
#      (profiles/calib/: 128 tensors of 64 KiB, 32 of 1 MiB) under wfbp: every
#      tensor is one message, so comm_s / messages is what one message of
#      that size costs through the engine (its queue, its progress thread,
#      the plan's packing). Less the all-reduce's own time at that size (the
#      fastest algorithm of step 1, as the engine picks it), it is the
#      engine's overhead per message, taken from the 64 KiB messages (at
#      1 MiB a few percent of the link's rate weigh as much; that row is a
#      check).
#
# Writes $BENCH_OUT/net_calibrate.json (the fitted constants and every raw
# point), net_calibrate.md, and the raw rows net_calibrate_<N>nodes.jsonl,
# all stamped. The constants the presets use are copied from
# net_calibrate.json into net_calib[] in src/cost/cost.c, and
# tests/cost/test_net_calib.py fails when the two disagree.
# Needs root (gradsync run --net). About 10 minutes.
#
# Usage: bench/net_calibrate.sh [NODES...]   (default 4 8)
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
nodes=("$@")
[ ${#nodes[@]} -gt 0 ] || nodes=(4 8)
bench_build gradsync_cli
gs="$BENCH_BUILD/gradsync"
out=$BENCH_OUT
iters=10 budget=1.5 riters=5
if [ "$BENCH_QUICK" = 1 ]; then iters=3 budget=0.3 riters=2; fi
cmds=()
for n in "${nodes[@]}"; do
  case $n in
    '' | *[!0-9]*) echo "net_calibrate: '$n' is not a number of nodes" >&2; exit 2 ;;
  esac
  raw="$out/net_calibrate_${n}nodes.jsonl"
  : > "$raw"
  echo "== $n nodes: all-reduce ($(date +%T))" >&2
  argv=("$gs" run -np "$n" --net 1gbit -- "$gs" bench --op allreduce --algo all
        --no-calibrate --min-bytes 4K --max-bytes 64M --iters "$iters" --warmup 1 --budget "$budget"
        --json --cost-out "$out/net_calibrate_${n}nodes_cost.json")
  "${argv[@]}" >> "$raw"
  cmds+=("$(bench_quote "${argv[@]}")")
  for op in reduce_scatter allgather; do
    echo "== $n nodes: $op ($(date +%T))" >&2
    argv=("$gs" run -np "$n" --net 1gbit -- "$gs" bench --op "$op" --algo ring
          --no-calibrate --min-bytes 4K --max-bytes 64M --iters "$iters" --warmup 1 --budget "$budget"
          --json)
    "${argv[@]}" >> "$raw"
    cmds+=("$(bench_quote "${argv[@]}")")
  done
  for p in uniform_128x64k uniform_32x1m; do
    echo "== $n nodes: engine, $p ($(date +%T))" >&2
    argv=("$gs" run -np "$n" --net 1gbit -- "$gs" replay --profile "profiles/calib/$p.json"
          --policy wfbp --iters "$riters" --warmup 2 --json)
    "${argv[@]}" >> "$raw"
    cmds+=("$(bench_quote "${argv[@]}")")
  done
  bench_stamp "$raw" "$(printf '%s; ' "${cmds[@]}")"
  bench_stamp "$out/net_calibrate_${n}nodes_cost.json" "${cmds[0]}"
  cmds=()
done
python3 - "$out" "${nodes[@]}" <<'PY'
import json, os, statistics, sys

out, nodes = sys.argv[1], [int(x) for x in sys.argv[2:]]
sys.path.insert(0, "bench")
from net_calib_write import ALGOS, write_calibration  # noqa: E402
cal = {"rate_bps": 1e9, "name": "1gbit", "clusters": {}}
md = ["# The 1gbit preset, calibrated on the emulated link", "",
      "`bench/net_calibrate.sh`: on `gradsync run -np N --net 1gbit` (one rank per node),",
      "every all-reduce algorithm's time by size, the ring's reduce-scatter and all-gather,",
      "and the engine's time per message (replays of synthetic profiles without compute,",
      "every tensor one message). alpha and beta of each algorithm are the cost module's",
      "own fit (`bench --cost-out`, gs_cost_fit_algo: beta over the larger half of the",
      "sizes, alpha from the smallest). The engine's overhead per message is its measured",
      "time per message less the fastest algorithm's time at that size. These are the",
      "constants of `net_calib[]` in src/cost/cost.c. Measured on a shared 2-core host",
      "(other work running; the stamps give the load): times vary from run to run.", ""]
for n in nodes:
    rows = [json.loads(l) for l in open(os.path.join(out, f"net_calibrate_{n}nodes.jsonl"))]
    cost = json.load(open(os.path.join(out, f"net_calibrate_{n}nodes_cost.json")))
    pts = {}
    for r in rows:
        if "op" in r and "time_us" in r and r.get("check", "ok") == "ok":
            pts.setdefault(f"{r['op']}:{r['algo']}", []).append([r["bytes"], r["time_us"] * 1e-6])
    for v in pts.values():
        v.sort()
    reps = [r for r in rows if "profile" in r]
    c = {"nodes": n, "gamma": cost["gamma"], "algos": {}, "points": pts, "engine": []}
    for a in ALGOS:
        f = cost["fit"][a]
        c["algos"][a] = {"alpha": f["alpha"], "beta": f["beta"]}
    over = []
    for r in reps:
        per = r["comm_s"] / r["ngroups"]
        size = r["grad_bytes"] / r["ngroups"]
        best = min((t for k, v in pts.items() if k.startswith("allreduce:")
                    and k.split(":")[1] in ALGOS for b, t in v if b == size), default=None)
        o = per - best if best is not None else None
        c["engine"].append({"profile": r["profile"], "message_bytes": size,
                            "messages": r["ngroups"], "per_message_s": per,
                            "allreduce_s": best, "overhead_s": o})
        if o is not None:
            over.append(o)
    # The smallest messages show the overhead best: at 1 MiB a few percent
    # of the link's rate between the two measurements is as large.
    small = [e for e in c["engine"] if e["overhead_s"] is not None]
    small.sort(key=lambda e: e["message_bytes"])
    c["engine_msg_s"] = max(0.0, small[0]["overhead_s"]) if small else 0.0
    cal["clusters"][str(n)] = c
    md += [f"## {n} nodes", "",
           "| algorithm | alpha (us, one step) | beta (ns/B, one link) | share of 1 Gbit/s |",
           "|---|---:|---:|---:|"]
    for a in ALGOS:
        f = c["algos"][a]
        md.append(f"| {a} | {f['alpha'] * 1e6:.1f} | {f['beta'] * 1e9:.3f} | "
                  f"{8 / f['beta'] / 1e9:.0%} |")
    md += ["", f"Engine overhead per message: {c['engine_msg_s'] * 1e6:.0f} us "
           "(the smallest messages' row below; the larger one is a check).", "",
           "| replayed profile | message | engine per message (ms) | fastest all-reduce (ms) | overhead (us) |",
           "|---|---:|---:|---:|---:|"]
    for e in c["engine"]:
        md.append(f"| {e['profile']} | {e['message_bytes'] / 1024:.0f} KiB | "
                  f"{e['per_message_s'] * 1e3:.3f} | "
                  f"{(e['allreduce_s'] or float('nan')) * 1e3:.3f} | "
                  f"{(e['overhead_s'] or float('nan')) * 1e6:.0f} |")
    sizes = sorted({b for v in pts.values() for b, _ in v})
    keys = sorted(pts)
    md += ["", "Measured medians (ms):", "",
           "| bytes | " + " | ".join(keys) + " |", "|---:|" + "---:|" * len(keys)]
    for s in sizes:
        cells = []
        for k in keys:
            t = [t for b, t in pts[k] if b == s]
            cells.append(f"{t[0] * 1e3:.3f}" if t else "")
        md.append(f"| {s} | " + " | ".join(cells) + " |")
    md.append("")
write_calibration(out, cal, md, nodes)
PY
bench_stamp "$out/net_calibrate.json" "$(bench_quote bench/net_calibrate.sh "${nodes[@]}")"
bench_stamp "$out/net_calibrate.md" "$(bench_quote bench/net_calibrate.sh "${nodes[@]}")"
cat "$out/net_calibrate.md"
