#!/usr/bin/env python3
"""Turns bench/results/torch_interleaved.jsonl (bench/torch/torch_vs_ddp.sh
with INTERLEAVE=1: every peer alive at once, trained in turns of a few
steps, compare.py --interleave) into the Markdown of
bench/results/torch_interleaved.md: per peer the median images/s over the
chunks, and per pair of peers the median and quartiles of the ratio within a
chunk (the two ran seconds apart).
Usage: summarize_interleaved.py torch_interleaved.jsonl NODES"""
import json
import platform
import statistics
import subprocess
import sys

path, nodes = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path) if l.startswith("{") and not l.startswith('{"stamp"')]
NETS = ("1gbit", "100mbit")
EXAMPLES = ("fashion_mnist_cnn", "resnet18_synthetic")
PEERS = ("auto", "auto-overlap", "single", "ddp")
PAIRS = (("auto", "ddp"), ("auto-overlap", "ddp"), ("auto", "single"))
runs = {(r["net"], r["example"], r["label"], r["chunk"]): r for r in rows if "chunk" in r}


def chunks(net, ex):
    return sorted({k[3] for k in runs if k[:2] == (net, ex)})


def quartiles(v):
    if len(v) < 4:
        return min(v), statistics.median(v), max(v)
    q = statistics.quantiles(v, n=4)
    return q[0], q[1], q[2]


def rate(net, ex, m):
    return [runs[(net, ex, m, c)]["images_per_s"] for c in chunks(net, ex)
            if (net, ex, m, c) in runs]


def ratios(net, ex, a, b):
    return [runs[(net, ex, a, c)]["images_per_s"] / runs[(net, ex, b, c)]["images_per_s"]
            for c in chunks(net, ex) if (net, ex, a, c) in runs and (net, ex, b, c) in runs]


print("# gradsync.torch against PyTorch DDP, the peers interleaved\n")
print(f"{nodes} ranks on {nodes} emulated nodes (`gradsync run --net RATE`), one thread per "
      "rank. Every peer is alive at once in the same processes, each with its own copy of "
      "the model from the same initialisation (`bench/torch/compare.py --interleave`): "
      "after a few warm-up steps each (the profiled policies plan there), the run is cut "
      "into chunks, and in every chunk each peer trains the same few steps on the same "
      "batches in turn, the order rotating from chunk to chunk. A chunk's peers run seconds "
      "apart, so their ratio measures the peers rather than the 2-core host's drift over "
      "minutes, which moved the figures of `torch.md` (peers minutes apart) by up to 1.3x. "
      "A DeAR peer applies its last updates before its turn ends. Peers: `auto` is "
      "`DistributedOptimizer(policy=\"auto\")`; `auto-overlap` adds `model=model` (the plan "
      "may then be DeAR's); `single` is Horovod-style fusion into one message; DDP is "
      "PyTorch's, gloo, default buckets.\n")
print("Images/s: median over the chunks. Ratios: the per-chunk ratio's median with its "
      "quartiles in brackets, and in how many chunks the first peer was at least as fast. "
      "CPU: rank 0's process (all its threads), seconds per step, median over the chunks.\n")
print("| example | link | chunks x steps | " + " | ".join(f"{m} img/s" for m in PEERS) + " | "
      + " | ".join(f"{a} / {b}" for a, b in PAIRS) + " | CPU s/step " + "/".join(PEERS)
      + " |")
print("|---|---|---:|" + "---:|" * (len(PEERS) + len(PAIRS) + 1))
verdicts = []
for net in NETS:
    for ex in EXAMPLES:
        cs = chunks(net, ex)
        if not cs or not all(rate(net, ex, m) for m in ("auto", "ddp")):
            continue
        a = next(r for k, r in runs.items() if k[:3] == (net, ex, "auto"))
        cells = [ex, net, f"{len(cs)} x {a['steps']}"]
        cells += [f"{statistics.median(rate(net, ex, m)):.1f}" if rate(net, ex, m) else "-"
                  for m in PEERS]
        for x, y in PAIRS:
            v = ratios(net, ex, x, y)
            if not v:
                cells.append("-")
                continue
            lo, med, hi = quartiles(v)
            wins = sum(1 for r in v if r >= 1.0)
            cells.append(f"{med:.3f}x ({lo:.3f}-{hi:.3f}; {wins}/{len(v)})")
            if y == "ddp":
                verdicts.append((net, ex, x, med, lo, hi, wins, len(v)))
        cells.append(" / ".join(
            f"{statistics.median(runs[(net, ex, m, c)]['cpu_s_per_step'] for c in cs if (net, ex, m, c) in runs):.3f}"
            if rate(net, ex, m) else "-" for m in PEERS))
        print("| " + " | ".join(cells) + " |")
plans = sorted({(n, e, l, r["chosen"], r["messages"]) for (n, e, l, c), r in runs.items()
                if "chosen" in r and c == chunks(n, e)[-1]})
if plans:
    print("\nPlans in the last chunk (the engine's choice and its number of messages): " + "; ".join(
        f"{n} {e} {l}: {c}, {m}" for n, e, l, c, m in plans) + ".")
algos = [(r["net"], r["allreduce_algorithm"]) for r in rows if "allreduce_algorithm" in r]
if algos:
    # The start-up fit draws the algorithm of every allreduce for the whole
    # launch: a draw that took a slow one shows here.
    print("\nThe allreduce algorithm that the start-up fit chose, by size (one draw per "
          "launch; every gradsync peer of the launch uses it): " + "; ".join(
              f"{n}: " + ", ".join(f"{k} {v}" for k, v in a.items()) for n, a in algos) + ".")
if verdicts:
    print("\n## Against issue 12's dense target (never slower than DDP)\n")
    for net, ex, x, med, lo, hi, wins, n in verdicts:
        print(f"- {ex} at {net}, `{x}`: {med:.3f}x DDP's images/s (quartiles {lo:.3f}-"
              f"{hi:.3f}), at least as fast in {wins} of {n} chunks.")
print(f"\nEnvironment: {platform.processor() or platform.machine()}, "
      f"{subprocess.getoutput('nproc')} cores, "
      f"{subprocess.getoutput('mpirun --version | head -1')}.")
