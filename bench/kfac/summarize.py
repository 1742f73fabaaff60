#!/usr/bin/env python3
"""Turns bench/results/kfac_iter.jsonl into the iteration section of kfac.md."""
import json
import sys

lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
runs = [l for l in lines if "stamp" not in l]
stamps = [l["stamp"] for l in lines if "stamp" in l]
print("# Distributed K-FAC: dkfac, spd, dp\n")
print("Iteration time of one K-FAC training step (forward, backward with the engine's")
print("gradient all-reduce, the K-FAC step) on emulated nodes at 1 Gbit/s, batch 32 per")
print("rank, factors every step, inverses every 5 steps; mean over the measured")
print("iterations after a warm-up (spd plans its factor messages and places its")
print("inversions there). Times are seconds per iteration, from rank 0.\n")
cores = stamps[0]["env"].get("cores", 0) if stamps else 0
if cores >= 8:
    print(f"**A core per rank**: the machine has {cores} cores for 4 or 8 ranks.")
else:
    print(f"**4 or 8 ranks share the machine's {cores or '?'} cores** (the stamp's load is")
    print("mostly this job's own ranks). Compute (forward/backward, factors, inversions,")
    print("preconditioning) is inflated 2-4x over one rank per core.")
print("Each row of the first table is one run, in the order they ran; the second table")
print("gives medians.\n")
print("| model | nodes | scheme | iter (s) | vs dkfac | fwd+bwd | grad wait | factor compute | "
      "factor comm (exposed) | inversion | broadcast wait | precondition+SGD | exposed comm | "
      "MB per 2nd-order update | dkfac bytes / this |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
key = lambda r: (r["model"], r["ranks"])
base = {}  # the dkfac run of the same repetition: the latest one before it
for r in runs:
    if r["optimizer"] == "dkfac":
        base[key(r)] = r
    b = base.get(key(r))
    ratio = r["iter_s"] / b["iter_s"] if b else float("nan")
    bytes_ratio = (b["bytes_per_second_order_update"] / r["bytes_per_second_order_update"]
                   if b and r["bytes_per_second_order_update"] else float("nan"))
    print(f"| {r['model']} | {r['ranks']} | {r['optimizer']} | {r['iter_s']:.3f} | {ratio:.2f}x | "
          f"{r['forward_backward_s']:.3f} | {r['grad_wait_s']:.3f} | {r['factor_compute_s']:.3f} | "
          f"{r['factor_comm_s']:.3f} | {r['inversion_s']:.3f} | {r['bcast_s']:.3f} | "
          f"{r['precondition_s']:.3f} | {r['exposed_comm_s']:.3f} | "
          f"{r['bytes_per_second_order_update'] / 1e6:.1f} | {bytes_ratio:.2f}x |")
print()
# Medians over repeated runs of a configuration (every run is listed above).
from statistics import median
groups = {}
for r in runs:
    groups.setdefault((r["model"], r["ranks"], r["optimizer"]), []).append(r)
print("Medians over the runs above (runs per row in the last column); the ratios are")
print("medians against dkfac's median of the same model and node count.\n")
print("| model | nodes | scheme | iter (s) | vs dkfac | exposed comm (s) | vs dkfac | runs |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for (m, n, o), rs in groups.items():
    it = median(r["iter_s"] for r in rs)
    ex = median(r["exposed_comm_s"] for r in rs)
    b = groups.get((m, n, "dkfac"))
    bit = median(r["iter_s"] for r in b) if b else float("nan")
    bex = median(r["exposed_comm_s"] for r in b) if b else float("nan")
    print(f"| {m} | {n} | {o} | {it:.3f} | {it / bit:.2f}x | {ex:.3f} | "
          f"{(ex / bex if bex else float('nan')):.2f}x | {len(rs)} |")
print()
spd = [r for r in runs if r["optimizer"] == "spd"]
if spd:
    plans = {}  # each configuration's distinct plans, in order, with their run counts
    for r in spd:
        p = (f"{r['merge_groups_a']} A and {r['merge_groups_g']} G messages, "
             f"{r['inverted_locally']} factors inverted by every rank")
        c = plans.setdefault(f"{r['model']}/{r['ranks']}", {})
        c[p] = c.get(p, 0) + 1
    print("spd's planner merged the factor streams into "
          + "; ".join(f"{cfg}: " + " or ".join(
              p + (f" ({k} run{'s' if k > 1 else ''})" if len(c) > 1 else "") for p, k in c.items())
              for cfg, c in plans.items()) + ".\n")
print("Columns: fwd+bwd includes building the factors in the hooks (and, for spd, posting")
print("their all-reduces); grad wait is the engine's gs_engine_wait; factor comm is the")
print("time the K-FAC step waits for factor all-reduces; the byte column counts payload")
print("bytes of K-FAC collectives per inverse update (factor all-reduces of every step")
print("in between plus the broadcasts), whose ratio to dkfac is the issue's dp target.\n")
