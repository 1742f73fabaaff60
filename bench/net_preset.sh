#!/usr/bin/env bash
# The network presets against the links they name (issue 36, item 2):
# `gradsync simulate --net 1gbit` against `gradsync replay` on the emulated
# 1 Gbit/s cluster (bench/results/replay_*nodes.jsonl, bench/replay_sweep.sh),
# for every profile, cluster and policy replayed: the shipped profiles
# (profiles/*.json) and the held-out ones (profiles/heldout/: models and a
# synthetic profile no constant was fitted on).
#
# Two columns per cell, the same replay as the peer:
#   after:  the preset as built (`--net 1gbit`): the calibration of
#           bench/net_calibrate.sh (bench/results/net_calibrate.md), per
#           cluster size and algorithm, with the engine's cost per message;
#           fitted to no replay of any profile here.
#   before: the preset until this calibration: every message priced on the
#           ring's line with alpha = 100 us a step and bytes at 85% of the
#           line rate, gamma 1/(5 GB/s); given to simulate as --ar/--rs/--ag
#           (the ring's all-reduce, reduce-scatter and all-gather lines of
#           those constants, as gs_plan_cost_from_net read them then).
# Writes $BENCH_OUT/net_preset.jsonl and .md, stamped. Needs no root (it
# reads replays measured before).
#
# Usage: bench/net_preset.sh [REPLAY_DIR...]   (default bench/results)
#   Several directories: their rows of one cell (profile, cluster, policy,
#   compute scale) are pooled, the cell's measurement their median (replays
#   of one cell repeated, bench/replay_repeat.py).
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
src=${*:-bench/results}
bench_build gradsync_cli
gs="$BENCH_BUILD/gradsync"
out=$BENCH_OUT
python3 - "$gs" "$src" "$out/net_preset.jsonl" "$out/net_preset.md" <<'PY'
import glob, json, os, re, shlex, statistics, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

gs, src, jsonl, md = sys.argv[1:5]
# The preset before the calibration (cost.c until then): alpha a step, bytes
# at 85% of 1 Gbit/s, reductions at 5 GB/s.
OLD_A, OLD_B, OLD_G = 100e-6, 8 / (0.85 * 1e9), 1 / 5e9

cells, stamps, paths = {}, {}, {}
for path in sorted(p for d in src.split() for p in
                   glob.glob(os.path.join(d, "replay_*nodes.jsonl")) +
                   glob.glob(os.path.join(d, "heldout", "replay_*nodes.jsonl"))):
    with open(path) as f:
        recs = [json.loads(line) for line in f]
    st = next((r["stamp"] for r in recs if "stamp" in r), {})
    m = re.search(r"--profile (\S+)", st.get("command", ""))
    if not m:
        continue
    prof = m.group(1)
    stamps[path] = st
    for r in recs:
        if "stamp" in r or r["ranks"] != r["nodes"]:
            continue
        key = (prof, r["nodes"], r["policy"], r["time_scale"])
        cells.setdefault(key, []).append(r["iter_s"])
if not cells:
    sys.exit(f"net_preset: no replay rows under {src} (run bench/replay_sweep.sh)")
keys = sorted(cells)


def simulate(key, cost):
    prof, n, pol, ts = key
    cmd = [gs, "simulate", "--profile", prof, "--workers", str(n), *cost,
           "--compute-scale", repr(ts), "--policy", pol, "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def old_preset(n):
    f = (n - 1) / n
    ar = (2 * (n - 1) * OLD_A, 2 * f * OLD_B + f * OLD_G)
    rs = ((n - 1) * OLD_A, f * (OLD_B + OLD_G))
    ag = ((n - 1) * OLD_A, f * OLD_B)
    return ["--ar", f"{ar[0]!r},{ar[1]!r}", "--rs", f"{rs[0]!r},{rs[1]!r}",
            "--ag", f"{ag[0]!r},{ag[1]!r}"]


def errors(cost_of):
    with ThreadPoolExecutor(2) as ex:
        sims = list(ex.map(lambda k: simulate(k, cost_of(k))["iter_s"], keys))
    return {k: (s - statistics.median(cells[k])) / statistics.median(cells[k])
            for k, s in zip(keys, sims)}


after = errors(lambda k: ["--net", "1gbit"])
before = errors(lambda k: old_preset(k[1]))
shown = simulate(keys[0], ["--net", "1gbit"])


def kind(prof):
    return "held out" if "/heldout/" in prof or prof.startswith("profiles/heldout") else "shipped"


rows = []
for k in keys:
    prof, n, pol, ts = k
    v = cells[k]
    rows.append({"profile": prof, "set": kind(prof), "nodes": n, "policy": pol,
                 "time_scale": ts, "measured_s": statistics.median(v),
                 "measured_min_s": min(v), "measured_max_s": max(v), "rounds": len(v),
                 "after_error": after[k], "before_error": before[k]})
with open(jsonl, "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")


def summary(sel, key):
    e = [abs(r[key]) for r in sel]
    return statistics.median(e), max(e), sum(x <= 0.10 for x in e), len(e)


L = ["# The network presets against the links they name", "",
     "`gradsync simulate --net 1gbit` against `gradsync replay` measured on the emulated",
     f"1 Gbit/s cluster (one rank per node; the replay files under `{src}`, their stamps",
     "below), for every profile, cluster and policy replayed, at the compute scale each",
     "replay used. Error = (simulated - measured) / measured, on the median measured",
     "iteration of the cell. **after**: the preset as built, calibrated by",
     "`bench/net_calibrate.sh` (bench/results/net_calibrate.md) and fitted to no replay",
     "here; **before**: the preset until then (every message on the ring's line, 100 us a",
     "step, bytes at 85% of the rate). Held-out profiles (profiles/heldout/) are models",
     "and a synthetic profile that no constant, before or after, was fitted on. Measured",
     "on a shared 2-core host with other work running (the stamps give the load): the",
     "replays' own spread is in the last columns.", "",
     f"The preset as built: {shown.get('network_assumes', '(the build does not say)')}", "",
     "| profiles | nodes | cells | after: median abs. error | after: max | after: within 10% "
     "| before: median | before: max | before: within 10% |",
     "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for s in ("shipped", "held out"):
    for n in sorted({r["nodes"] for r in rows}):
        sel = [r for r in rows if r["set"] == s and r["nodes"] == n]
        if not sel:
            continue
        a, b = summary(sel, "after_error"), summary(sel, "before_error")
        L.append(f"| {s} | {n} | {a[3]} | {a[0]:.1%} | {a[1]:.1%} | {a[2]} | "
                 f"{b[0]:.1%} | {b[1]:.1%} | {b[2]} |")
a, b = summary(rows, "after_error"), summary(rows, "before_error")
L.append(f"| all | | {a[3]} | {a[0]:.1%} | {a[1]:.1%} | {a[2]} | {b[0]:.1%} | {b[1]:.1%} | {b[2]} |")
L += ["", "Target (issue 36): every cell within 10%.", "", "Every cell:", "",
      "| profile | nodes | policy | compute scale | measured ms (min-max) | after | before |",
      "|---|---:|---|---:|---|---:|---:|"]
for r in rows:
    name = os.path.splitext(os.path.relpath(r["profile"], "profiles"))[0]
    L.append(f"| {name} | {r['nodes']} | {r['policy']} | {r['time_scale']:g} | "
             f"{r['measured_s'] * 1e3:.1f} ({r['measured_min_s'] * 1e3:.0f}-"
             f"{r['measured_max_s'] * 1e3:.0f}) | {r['after_error']:+.1%} | "
             f"{r['before_error']:+.1%} |")
L += ["", "The replays:", ""]
for name, st in sorted(stamps.items()):
    env = st.get("env", {})
    L.append(f"- `{name}`: commit {st.get('commit', '?')[:10]}, {st.get('date', '?')}, "
             f"{env.get('cpu', '?')}, {env.get('cores', '?')} cores, load "
             f"{env.get('loadavg', '?')}: `{st.get('command', '?')}`")
with open(md, "w") as f:
    f.write("\n".join(L) + "\n")
PY
bench_stamp "$out/net_preset.jsonl" "$(bench_quote bench/net_preset.sh "$@")"
bench_stamp "$out/net_preset.md" "$(bench_quote bench/net_preset.sh "$@")"
cat "$out/net_preset.md"
