#!/usr/bin/env python3
"""A trace of 20 gradsync training jobs for 8 nodes (gradsync's workload
format): each job a model of the speed table, a requested size of 1, 2, 4
or 8 nodes, a length of 5 to 30 minutes at that size, arrivals uniform over
the first 20 minutes. Deterministic for a seed.

Usage: gen_gradsync_trace.py SPEEDS.csv WORKLOAD.csv [SEED]"""
import csv
import random
import sys


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) == 4 else 1)
    tput = {}
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            tput[(r["model"], int(r["nodes"]))] = float(r["samples_per_step"]) / float(r["step_time_s"])
    models = sorted({m for m, _ in tput})
    jobs = []
    for i in range(20):
        m = rng.choice(models)
        n = rng.choice([1, 2, 4, 8])
        minutes = rng.uniform(5, 30)
        jobs.append((rng.uniform(0, 1200), m, n, tput[(m, n)] * minutes * 60))
    jobs.sort()
    with open(sys.argv[2], "w") as f:
        f.write("name,time,model,nodes,samples\n")
        for i, (t, m, n, s) in enumerate(jobs):
            f.write(f"{m}-{i},{t:.0f},{m},{n},{s:.0f}\n")


if __name__ == "__main__":
    main()
