#!/usr/bin/env bash
# The simulator against measurements (issue 13, "Validation"): for every row
# of the committed replay results (bench/results/replay_<profile>_<N>nodes.jsonl:
# six profiles, every policy, 4 and 8 emulated nodes at 1 Gbit/s, measured
# by bench/replay_sweep.sh), runs `gradsync simulate` on the same cluster
# with the costs that run measured (the engine's all-reduce fit a + b*M,
# which replay records per row: --ar A,B) and the same compute scale, and
# compares the simulated iteration time with the measured one. The median
# over a cell's rounds is compared with the median of the simulations.
# Writes bench/results/sim_validate.jsonl and bench/results/sim_validate.md.
#
# What it does not do: measure anew. The replay files carry their own
# stamps (the commit and link they were measured on); re-run
# bench/replay_sweep.sh first to validate against fresh measurements.
#
# Usage: bench/sim_validate.sh [REPLAY_DIR]   (default bench/results)
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
src=${1:-bench/results}
bench_build gradsync_cli
gs="$BENCH_BUILD/gradsync"
out=$BENCH_OUT
python3 - "$gs" "$src" "$out/sim_validate.jsonl" "$out/sim_validate.md" <<'PY'
import glob, json, os, statistics, subprocess, sys

gs, src, jsonl, md = sys.argv[1:5]
cells = {}  # (profile, nodes, policy) -> list of (measured, simulated, row)
stamps = {}
for path in sorted(glob.glob(os.path.join(src, "replay_*nodes.jsonl"))):
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "stamp" in r:
                stamps[os.path.basename(path)] = r["stamp"]
                continue
            if not r.get("cost_measured"):
                continue
            cmd = [gs, "simulate", "--profile", f"profiles/{r['profile']}.json",
                   "--workers", str(r["ranks"]), "--ar", f"{r['a']!r},{r['b']!r}",
                   "--compute-scale", repr(r["time_scale"]), "--policy", r["policy"],
                   "--json"]
            s = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                          text=True).stdout)
            cells.setdefault((r["profile"], r["ranks"], r["policy"]), []).append(
                (r["iter_s"], s["iter_s"], r.get("predicted_s")))
rows = []
for (p, n, pol), v in sorted(cells.items()):
    meas = statistics.median(x[0] for x in v)
    sim = statistics.median(x[1] for x in v)
    pred = statistics.median(x[2] for x in v if x[2] is not None)
    rows.append({"profile": p, "nodes": n, "policy": pol, "rounds": len(v),
                 "measured_s": meas, "simulated_s": sim, "replay_predicted_s": pred,
                 "error": (sim - meas) / meas})
with open(jsonl, "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")

def summary(sel):
    e = [abs(r["error"]) for r in sel]
    return statistics.median(e), max(e), sum(x <= 0.10 for x in e), len(e)

L = ["# The simulator against measured iterations (replay)", "",
     "For every profile, policy and cluster of bench/results/replay_*.jsonl (measured by",
     "`gradsync replay` on 4 and 8 emulated nodes at 1 Gbit/s, one rank per node), "
     "`gradsync simulate`",
     "ran the same cluster with the all-reduce cost that run measured (`--ar a,b`, the "
     "engine's fit",
     "recorded per row) and the same compute scale. Error = (simulated - measured) / measured,",
     "on the medians over the cell's rounds. Without jitter the simulator equals the planner's",
     "prediction (tested), so the errors are the model's: the affine all-reduce cost, one network",
     "stream, compute as profiled.", ""]
med4, max4, in4, n4 = summary([r for r in rows if r["nodes"] == 4])
med8, max8, in8, n8 = summary([r for r in rows if r["nodes"] == 8])
meda, maxa, ina, na = summary(rows)
L += ["| cluster | cells | median abs. error | max abs. error | cells within 10% |",
      "|---|---:|---:|---:|---:|",
      f"| 4 nodes | {n4} | {med4:.1%} | {max4:.1%} | {in4} |",
      f"| 8 nodes | {n8} | {med8:.1%} | {max8:.1%} | {in8} |",
      f"| all | {na} | {meda:.1%} | {maxa:.1%} | {ina} |", "",
      "Targets (issue 13): median within 5% and every cell within 10%.", "",
      "Bias by policy (median signed error; + means the model is slower than measured):", "",
      "| policy | 4 nodes | 8 nodes |", "|---|---:|---:|"]
for pol in sorted({r["policy"] for r in rows}):
    b = [statistics.median(r["error"] for r in rows if r["policy"] == pol and r["nodes"] == n)
         for n in (4, 8)]
    L.append(f"| {pol} | {b[0]:+.1%} | {b[1]:+.1%} |")
L += ["",
      "| profile | nodes | policy | rounds | measured s | simulated s | error |",
      "|---|---:|---|---:|---:|---:|---:|"]
for r in rows:
    L.append(f"| {r['profile']} | {r['nodes']} | {r['policy']} | {r['rounds']} | "
             f"{r['measured_s']:.4f} | {r['simulated_s']:.4f} | {r['error']:+.1%} |")
L += ["", "The measurements and their provenance (each replay file's own stamp):", ""]
for name, st in sorted(stamps.items()):
    c = st.get("commit") or st.get("committed_in")
    note = " (measured before results were stamped; to be regenerated)" \
        if st.get("to_be_regenerated") else ""
    L.append(f"- `{name}`: commit `{c}`{note}")
with open(md, "w") as f:
    f.write("\n".join(L) + "\n")
print(f"4 nodes: median {med4:.1%}, max {max4:.1%}; 8 nodes: median {med8:.1%}, max {max8:.1%}")
PY
bench_stamp "$out/sim_validate.jsonl" "$(bench_quote bench/sim_validate.sh "$@")"
bench_stamp "$out/sim_validate.md" "$(bench_quote bench/sim_validate.sh "$@")"
