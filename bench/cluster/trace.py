#!/usr/bin/env python3
"""A seeded trace of small gradsync training jobs for bench/cluster/real_trace.sh:
one JSON object a line, {"arrival_s", "name", "min", "max", "args"}, arrivals
over about --span seconds (default 120: exponential gaps, mean span/N s; the
same jobs and the same order at any span). Kinds: mlp on 8192
synthetic samples for 2 epochs (340 steps), mlp on Fashion-MNIST for 400
steps, and the CNN on Fashion-MNIST for 100 steps; each with a global batch of 48, so that
every size from 1 to 4 nodes divides it."""
import argparse
import json
import random

ap = argparse.ArgumentParser()
ap.add_argument("--jobs", type=int, default=20)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--span", type=float, default=120.0)
ap.add_argument("--cache", required=True)
a = ap.parse_args()
rng = random.Random(a.seed)
kinds = [
    ("mlp-syn", 0.45, ["--model", "mlp", "--synthetic", "8192", "--epochs", "2"]),
    ("mlp-fm", 0.35, ["--model", "mlp", "--epochs", "1", "--max-steps", "400",
                      "--data-cache", a.cache]),
    ("cnn-fm", 0.20, ["--model", "cnn", "--epochs", "1", "--max-steps", "100",
                      "--data-cache", a.cache]),
]
t = 0.0
for i in range(a.jobs):
    r, acc = rng.random(), 0.0
    for name, p, args in kinds:
        acc += p
        if r <= acc:
            break
    lo = rng.choice([1, 1, 1, 2])
    hi = rng.choice([lo, 2, 4]) if lo == 1 else rng.choice([2, 4])
    row = {"arrival_s": round(t, 2), "name": f"{name}-{i + 1}", "min": lo, "max": max(lo, hi),
           "args": args + ["--global-batch", "48", "--seed", str(i + 1), "--json"]}
    print(json.dumps(row))
    t += rng.expovariate(a.jobs / 120.0) * a.span / 120.0
