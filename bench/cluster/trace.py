#!/usr/bin/env python3
"""A seeded trace of small gradsync training jobs for bench/cluster/real_trace.sh:
one JSON object a line, {"arrival_s", "name", "min", "max", "args"}, arrivals
over about --span seconds (default 120: exponential gaps, mean span/N s; the
same jobs and the same order at any span). Kinds: mlp on 8192
synthetic samples for 2 epochs (340 steps), mlp on Fashion-MNIST for 400
steps, and the CNN on Fashion-MNIST for 100 steps; each with a global batch of 48, so that
every size from 1 to 4 nodes divides it.

--mix scaling: jobs that scale with their nodes, as the jobs of Dorm's and
Pollux's evaluations do, beside some that do not: the CNN at a global batch
of 1536 for 16 steps and the ResNet at 384 for 32 (each about 45 s of one
quarter-core node, 2-3.3x faster on 4), committing every 4 and 8 steps so
that a resize takes effect within seconds; 1 to 6 nodes (both batches divide
by 1, 2, 3, 4 and 6); and mlp on Fashion-MNIST at a global batch of 48,
which is bound by its all-reduce over 1 Gbit/s and so asks for one node.
--mix uneven: the scaling mix's jobs (the same kinds, minimums and arrivals),
each asking for 3 nodes where scaling's asks for 2 or 4 (6 stays 6: sizes
the batches divide): sizes that do not
tile a pool of 8, so that a partitioning manager that gives every job what
it asked for leaves nodes idle that another job could use (the
fragmentation behind Dorm's utilisation gain over static partitions)."""
import argparse
import json
import random

ap = argparse.ArgumentParser()
ap.add_argument("--jobs", type=int, default=20)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--span", type=float, default=120.0)
ap.add_argument("--cache", required=True)
ap.add_argument("--mix", choices=["light", "scaling", "uneven"], default="light")
# The jobs' own --commit-every left out: they commit as the manager asks
# (by time), and a stop is taken at their checks, not at their commits.
ap.add_argument("--time-commits", action="store_true")
a = ap.parse_args()
rng = random.Random(a.seed)


def pick(rng, kinds):
    """One of kinds ((name, probability, args), ...), drawn by probability."""
    r, acc = rng.random(), 0.0
    for name, p, args in kinds:
        acc += p
        if r <= acc:
            break
    return name, args


def light(rng):
    kinds = [
        ("mlp-syn", 0.45, ["--model", "mlp", "--synthetic", "8192", "--epochs", "2"]),
        ("mlp-fm", 0.35, ["--model", "mlp", "--epochs", "1", "--max-steps", "400",
                          "--data-cache", a.cache]),
        ("cnn-fm", 0.20, ["--model", "cnn", "--epochs", "1", "--max-steps", "100",
                          "--data-cache", a.cache]),
    ]
    name, args = pick(rng, kinds)
    lo = rng.choice([1, 1, 1, 2])
    hi = rng.choice([lo, 2, 4]) if lo == 1 else rng.choice([2, 4])
    return name, lo, max(lo, hi), args + ["--global-batch", "48"]


def scaling_sized(rng, sizes):
    fm = ["--epochs", "1", "--data-cache", a.cache]
    kinds = [
        ("cnn-big", 0.40, ["--model", "cnn", "--max-steps", "16", "--global-batch", "1536",
                           "--commit-every", "4"] + fm),
        ("resnet", 0.35, ["--model", "resnet", "--max-steps", "32", "--global-batch", "384",
                          "--commit-every", "8"] + fm),
        ("mlp-fm", 0.25, ["--model", "mlp", "--max-steps", "400", "--global-batch", "48"] + fm),
    ]
    name, args = pick(rng, kinds)
    if name == "mlp-fm":
        return name, 1, 1, args
    lo = rng.choice([1, 1, 2])
    return name, lo, sizes[rng.choice([2, 4, 4, 6])], args


def scaling(rng):
    return scaling_sized(rng, {2: 2, 4: 4, 6: 6})


def uneven(rng):
    # the same draws as scaling's, a size of 2 or 4 asked as 3
    return scaling_sized(rng, {2: 3, 4: 3, 6: 6})


t = 0.0
for i in range(a.jobs):
    name, lo, hi, args = {"light": light, "scaling": scaling, "uneven": uneven}[a.mix](rng)
    row = {"arrival_s": round(t, 2), "name": f"{name}-{i + 1}", "min": lo, "max": hi,
           "args": args + ["--seed", str(i + 1), "--json"]}
    if a.time_commits and "--commit-every" in row["args"]:
        k = row["args"].index("--commit-every")
        del row["args"][k:k + 2]
    print(json.dumps(row))
    t += rng.expovariate(a.jobs / 120.0) * a.span / 120.0
