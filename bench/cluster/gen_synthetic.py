#!/usr/bin/env python3
"""A synthetic job trace for the cluster simulator at scale (gradsync's own
workload format, docs/CLUSTER.md): JOBS jobs on a pool of NODES nodes, and a
speed table of four model classes.

Speeds: each class's step time on n nodes at a fixed global batch is
compute/n + sync*log2(2n) (strong scaling with a tree-like synchronisation
cost), measured at n = 1, 2, 4, ..., up to NODES; the simulator interpolates
between them. Requested sizes are powers of two from 1 to 64, lengths
log-uniform from 10 minutes to 10 hours at the requested size, arrivals a
Poisson process whose rate keeps the requested node-hours near the pool's
capacity (load 0.9). Deterministic for a seed.

Usage: gen_synthetic.py JOBS NODES WORKLOAD.csv SPEEDS.csv [SEED]
"""
import math
import random
import sys


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    jobs, nodes = int(sys.argv[1]), int(sys.argv[2])
    wpath, spath = sys.argv[3], sys.argv[4]
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) == 6 else 1)
    # class: (compute s per step on one node, sync s per level, samples per step)
    classes = {"cnn": (1.0, 0.004, 256), "resnet": (2.0, 0.03, 256),
               "bert": (3.0, 0.12, 128), "dlrm": (0.5, 0.08, 4096)}
    sizes = []
    n = 1
    while n <= nodes:
        sizes.append(n)
        n *= 2
    if sizes[-1] != nodes:
        sizes.append(nodes)

    def step(c, n):
        comp, sync, _ = classes[c]
        return comp / n + sync * math.log2(2 * n)

    with open(spath, "w") as f:
        f.write("model,nodes,step_time_s,samples_per_step\n")
        for c, (_, _, sps) in classes.items():
            for n in sizes:
                f.write(f"{c},{n},{step(c, n):.6g},{sps}\n")
    req_sizes = [s for s in (1, 2, 4, 8, 16, 32, 64) if s <= nodes]
    rows, work_node_s = [], 0.0
    for i in range(jobs):
        c = rng.choice(list(classes))
        req = rng.choice(req_sizes)
        hours = math.exp(rng.uniform(math.log(1 / 6), math.log(10)))
        secs = hours * 3600
        samples = secs / step(c, req) * classes[c][2]
        rows.append((c, req, samples))
        work_node_s += secs * req
    rate = 0.9 * nodes / (work_node_s / jobs)  # jobs per second at load 0.9
    t = 0.0
    with open(wpath, "w") as f:
        f.write("name,time,model,nodes,samples\n")
        for i, (c, req, samples) in enumerate(rows):
            f.write(f"j{i},{t:.1f},{c},{req},{samples:.0f}\n")
            t += rng.expovariate(rate)


if __name__ == "__main__":
    main()
