#!/usr/bin/env bash
# The simulator against measurements (issue 13, "Validation"): for every row
# of the committed replay results (bench/results/replay_<profile>_<N>nodes.jsonl:
# six profiles, every policy, 4 and 8 emulated nodes at 1 Gbit/s, measured
# by bench/replay_sweep.sh), runs `gradsync simulate` on the same cluster
# with the costs that run measured (the engine's all-reduce fit a + b*M,
# which replay records per row: --ar A,B) and the same compute scale, and
# compares the simulated iteration time with the measured one. The median
# over a cell's rounds is compared with the median of the simulations.
# Each row is simulated twice: with that row's own fit, and with the
# cluster's fit, the medians of a and b over every policy's fit in the same
# replay file (one cluster, one run). The engine fits from the messages of
# its few warm-up iterations, so a policy with few large messages (single,
# bucket) can get a b far from the link's; the cluster's fit is what a user
# of `gradsync simulate` has for a cluster they measured once.
# A third time with a fit of the communication measured during the
# replayed iterations themselves, held out by profile: profile P on a
# cluster is simulated with `simulate --replay` over every *other*
# profile's replay file of that cluster, which fits comm_s = a * ngroups +
# b * grad_bytes to their rows (a >= 0; dear's rows give a reduce-scatter
# plus an all-gather instead). The engine's own fit comes from its warm-up
# iterations under wfbp; this one from the plans as they ran, never from
# the profile simulated.
# A fourth time with the cluster's measured all-reduce curve: the cost file
# `gradsync bench --cost-out` wrote on the same cluster
# (bench/results/cost_<N>nodes_1gbit.json, measured by bench/cost_measure.sh):
# each message takes the time measured at its size (`simulate --cost`), and
# the plan is the engine's, made with the row's own fit (`--plan-ar a,b`).
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
cells = {}  # (profile, nodes, policy) -> [(measured, simulated with the row's fit,
           #   replay's prediction, simulated with the cluster's fit,
           #   simulated with the held-out fit of measured communication)]
stamps = {}
def simulate(r, cost):
    """The simulated iteration of row r's profile and policy with `cost`
    (simulate's cost options); returns simulate's JSON object."""
    cmd = [gs, "simulate", "--profile", f"profiles/{r['profile']}.json",
           "--workers", str(r["ranks"]), *cost,
           "--compute-scale", repr(r["time_scale"]), "--policy", r["policy"], "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                     text=True).stdout)

def ar(a, b):
    return ["--ar", f"{a!r},{b!r}"]

def curve_sim(r):
    """Row r simulated with its cluster's measured curve, or None without one."""
    path = os.path.join(src, f"cost_{r['ranks']}nodes_1gbit.json")
    if r["ranks"] != r["nodes"] or not os.path.exists(path):
        return None
    return simulate(r, ["--cost", path, "--plan-ar", f"{r['a']!r},{r['b']!r}"])["iter_s"]

cluster_fit = {}  # (profile, ranks) -> (a, b): medians over the file's fits
files = {}  # (profile, ranks) -> the file's rows with a measured fit
paths = {}  # (profile, ranks) -> the replay file
for path in sorted(glob.glob(os.path.join(src, "replay_*nodes.jsonl"))):
    with open(path) as f:
        recs = [json.loads(line) for line in f]
    fits = []
    for r in recs:
        if "stamp" in r:
            stamps[os.path.basename(path)] = r["stamp"]
        elif r.get("cost_measured"):
            fits.append(r)
    if not fits:
        continue
    ca = statistics.median(r["a"] for r in fits)
    cb = statistics.median(r["b"] for r in fits)
    cluster_fit[(fits[0]["profile"], fits[0]["ranks"])] = (ca, cb)
    files[(fits[0]["profile"], fits[0]["ranks"])] = fits
    paths[(fits[0]["profile"], fits[0]["ranks"])] = path
held = {}  # (profile, ranks) -> simulate --replay over the cluster's other files
held_fit = {}  # (profile, ranks) -> (a, b) that fit gave
held_rsag = {}  # the same for a reduce-scatter plus an all-gather
for (p, n) in files:
    held[(p, n)] = ["--replay", ",".join(paths[(q, m)] for (q, m) in sorted(paths)
                                         if m == n and q != p)]
for (p, n), fits in sorted(files.items()):
    ca, cb = cluster_fit[(p, n)]
    for r in fits:
        h = simulate(r, held[(p, n)])
        held_fit[(p, n)] = (h["ar_a"], h["ar_b"])
        held_rsag[(p, n)] = (h["rs_a"] + h["ag_a"], h["rs_b"] + h["ag_b"])
        cells.setdefault((r["profile"], r["ranks"], r["policy"]), []).append(
            (r["iter_s"], simulate(r, ar(r["a"], r["b"]))["iter_s"], r.get("predicted_s"),
             simulate(r, ar(ca, cb))["iter_s"], h["iter_s"], curve_sim(r)))
rows = []
for (p, n, pol), v in sorted(cells.items()):
    meas = statistics.median(x[0] for x in v)
    sim = statistics.median(x[1] for x in v)
    pred = statistics.median(x[2] for x in v if x[2] is not None)
    csim = statistics.median(x[3] for x in v)
    hsim = statistics.median(x[4] for x in v)
    msim = statistics.median(x[5] for x in v) if all(x[5] for x in v) else None
    ca, cb = cluster_fit[(p, n)]
    ha, hb = held_fit[(p, n)]
    rows.append({"profile": p, "nodes": n, "policy": pol, "rounds": len(v),
                 "measured_s": meas, "simulated_s": sim, "replay_predicted_s": pred,
                 "error": (sim - meas) / meas, "cluster_a": ca, "cluster_b": cb,
                 "cluster_simulated_s": csim, "cluster_error": (csim - meas) / meas,
                 "heldout_a": ha, "heldout_b": hb,
                 "heldout_rsag_a": held_rsag[(p, n)][0],
                 "heldout_rsag_b": held_rsag[(p, n)][1], "heldout_simulated_s": hsim,
                 "heldout_error": (hsim - meas) / meas, "curve_simulated_s": msim,
                 "curve_error": None if msim is None else (msim - meas) / meas})
with open(jsonl, "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")

def summary(sel, key="error"):
    e = [abs(r[key]) for r in sel if r[key] is not None]
    if not e:
        return None
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
     "stream, compute as profiled.", "",
     "Every row is also simulated with the cluster's fit: the medians of a and b over",
     "every policy's fit in the same replay file (one cluster, one run). The engine fits",
     "its cost from the messages of a few warm-up iterations, so a policy with few large",
     "messages can get a b far from the link's; the cluster's fit is what a user of",
     "`gradsync simulate` has after measuring a cluster once.", "",
     "And with a fit of the communication measured in the replayed iterations, held out",
     "by profile: profile P is simulated with `gradsync simulate --replay` over the replay",
     "files of every *other* profile measured on the same cluster, which fits",
     "comm_s = a * ngroups + b * grad_bytes (a >= 0) to their rows (comm_s: the",
     "communicator's busy time per iteration; ngroups: the plan's messages; grad_bytes:",
     "the gradient's; rows whose plan is dear left out), and the same to the rows whose",
     "plan is dear for a reduce-scatter plus an all-gather (half of it each). It is",
     "what a user has after replaying a few models on a cluster and simulating another;",
     "it never sees the simulated profile's measurements.", "",
     "And with the cluster's measured all-reduce curve: `gradsync bench --cost-out` on the",
     "same emulated cluster (bench/results/cost_<N>nodes_1gbit.json, bench/cost_measure.sh)",
     "times every algorithm at sizes from 4 KB to 64 MB; `gradsync simulate --cost FILE`",
     "prices each message at the fastest algorithm's time measured at its size",
     "(interpolated between sizes), with the plan the engine made from its own fit",
     "(`--plan-ar a,b`). TCP's windows make the link's time per message not affine in",
     "the size (a 1 MB all-reduce takes about 1.3x the per-byte time of a 64 MB one),",
     "so no single a and b prices 604 small messages and 4 large ones alike.", ""]
clusters = (("4 nodes", [r for r in rows if r["nodes"] == 4]),
            ("8 nodes", [r for r in rows if r["nodes"] == 8]), ("all", rows))
fits = (("error", "each row's own fit"), ("cluster_error", "the cluster's fit"),
        ("heldout_error", "measured communication, held out"),
        ("curve_error", "the cluster's measured curve"))
S = {(key, label): summary(sel, key) for key, _ in fits for label, sel in clusters}
fits = tuple(f for f in fits if all(S[(f[0], label)] for label, _ in clusters))
L += ["| cluster | cost | cells | median abs. error | max abs. error | cells within 10% |",
      "|---|---|---:|---:|---:|---:|"]
for key, what in fits:
    for label, _ in clusters:
        med, mx, within, cnt = S[(key, label)]
        L.append(f"| {label} | {what} | {cnt} | {med:.1%} | {mx:.1%} | {within} |")
L += ["", "Targets (issue 13): median within 5% and every cell within 10%.", "",
      "The clusters' fits (a in us, b in ns/B):", "",
      "| profile | nodes | a | b | held-out a | held-out b | held-out rs+ag a | "
      "held-out rs+ag b |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
for (p, n), (ca, cb) in sorted(cluster_fit.items()):
    ha, hb = held_fit[(p, n)]
    ra, rb = held_rsag[(p, n)]
    L.append(f"| {p} | {n} | {ca * 1e6:.0f} | {cb * 1e9:.2f} | {ha * 1e6:.0f} | "
             f"{hb * 1e9:.2f} | {ra * 1e6:.0f} | {rb * 1e9:.2f} |")
L += ["",
      "Bias by policy (median signed error; + means the model is slower than measured):", "",
      "| policy | " + " | ".join(f"{n} nodes, {w}" for _, w in fits for n in (4, 8)) + " |",
      "|---|" + "---:|" * (2 * len(fits))]
for pol in sorted({r["policy"] for r in rows}):
    b = [statistics.median(r[k] for r in rows if r["policy"] == pol and r["nodes"] == n)
         for k, _ in fits for n in (4, 8)]
    L.append(f"| {pol} | " + " | ".join(f"{x:+.1%}" for x in b) + " |")
L += ["",
      "| profile | nodes | policy | rounds | measured s | simulated s (own fit) | error | "
      "simulated s (cluster's fit) | error | simulated s (held out) | error | "
      "simulated s (measured curve) | error |",
      "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    curve = "| |" if r["curve_error"] is None else \
        f"| {r['curve_simulated_s']:.4f} | {r['curve_error']:+.1%} |"
    L.append(f"| {r['profile']} | {r['nodes']} | {r['policy']} | {r['rounds']} | "
             f"{r['measured_s']:.4f} | {r['simulated_s']:.4f} | {r['error']:+.1%} | "
             f"{r['cluster_simulated_s']:.4f} | {r['cluster_error']:+.1%} | "
             f"{r['heldout_simulated_s']:.4f} | {r['heldout_error']:+.1%} " + curve)
L += ["", "The measurements and their provenance (each replay file's own stamp, and each",
      "cost file's: the stamp of the `gradsync bench` run that wrote it):", ""]
for path in sorted(glob.glob(os.path.join(src, "cost_*nodes_1gbit.json"))):
    with open(path) as f:
        stamps[os.path.basename(path)] = json.load(f).get("stamp", {})
for name, st in sorted(stamps.items()):
    c = st.get("commit") or st.get("committed_in")
    note = " (measured before results were stamped; to be regenerated)" \
        if st.get("to_be_regenerated") else ""
    L.append(f"- `{name}`: commit `{c}`{note}")
with open(md, "w") as f:
    f.write("\n".join(L) + "\n")
for key, what in fits:
    s4, s8 = S[(key, "4 nodes")], S[(key, "8 nodes")]
    print(f"{what}: 4 nodes: median {s4[0]:.1%}, max {s4[1]:.1%}; "
          f"8 nodes: median {s8[0]:.1%}, max {s8[1]:.1%}")
PY
bench_stamp "$out/sim_validate.jsonl" "$(bench_quote bench/sim_validate.sh "$@")"
bench_stamp "$out/sim_validate.md" "$(bench_quote bench/sim_validate.sh "$@")"
