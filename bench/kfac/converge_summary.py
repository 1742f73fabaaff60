#!/usr/bin/env python3
"""Prints the convergence section of kfac.md from kfac_converge_<name>.jsonl:
test accuracy after each evaluation round, and the first point (in passes
over the training set, and wall seconds) at or above 90%."""
import json
import os
import sys

steps, out, names = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
passes_per_round = steps * 256 / 60000.0
print("# Convergence on Fashion-MNIST: SGD and K-FAC\n")
together = os.environ.get("BENCH_PARALLEL") == "1"
print(f"cnn, 2 ranks x batch 128, lr 0.05, one evaluation every {steps} "
      f"steps ({passes_per_round:.3f} of a pass over the training set, a fresh shuffle each), "
      "warm-up 0.3 rounds then cosine decay over the run; momentum 0.9 for SGD (the main "
      "job's), K-FAC's default 0.5 for dkfac, spd and dp. "
      + ("All runs at once on the 2-core machine, so each wall time includes the other runs'."
         if together else "One run after another on the 2-core machine (bench/kfac/converge.sh).")
      + "\n")
rows, curves = [], {}
for n in names:
    path = os.path.join(out, f"kfac_converge_{n}.jsonl")
    if not os.path.exists(path):
        continue
    recs = [json.loads(l) for l in open(path) if l.startswith("{") and '"stamp"' not in l[:10]]
    eps = [r for r in recs if "epoch" in r and "test_accuracy" in r]
    ends = [r for r in recs if "exit" in r]
    cut = bool(ends and ends[-1]["exit"] == 124)
    at_target = bool(ends and ends[-1].get("stopped_at_target"))
    t, hit, curve = 0.0, None, []
    for r in eps:
        t += r.get("epoch_s", 0.0)
        curve.append(r["test_accuracy"])
        if hit is None and r["test_accuracy"] >= 0.90:
            hit = (r["epoch"] * passes_per_round, t)
    curves[n] = curve
    rows.append((n + (" (stopped at the time limit)" if cut else
                      " (stopped at 90%)" if at_target else ""), hit,
                 curve[-1] if curve else float("nan"), t))
print("| optimizer | passes to 90% | training s to 90% | final accuracy | training s (all rounds run) |")
print("|---|---:|---:|---:|---:|")
for n, hit, last, t in rows:
    hp = f"{hit[0]:.2f}" if hit else "not reached"
    ht = f"{hit[1]:.0f}" if hit else "-"
    print(f"| {n} | {hp} | {ht} | {100 * last:.2f}% | {t:.0f} |")
print("\nTest accuracy after each round:\n")
print("| round | passes | " + " | ".join(curves) + " |")
print("|---:|---:|" + "---:|" * len(curves))
for i in range(max((len(c) for c in curves.values()), default=0)):
    cells = [f"{100 * c[i]:.2f}%" if i < len(c) else "-" for c in curves.values()]
    print(f"| {i + 1} | {(i + 1) * passes_per_round:.2f} | " + " | ".join(cells) + " |")
print()
