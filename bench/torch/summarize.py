#!/usr/bin/env python3
"""Turns bench/results/torch.jsonl (bench/torch/torch_vs_ddp.sh) into the
Markdown table of bench/results/torch.md; appends the hook-overhead figures
of bench/results/torch_hook.jsonl (bench/torch/hook_overhead.sh) if present.
Usage: summarize.py torch.jsonl NODES"""
import json
import os
import platform
import subprocess
import sys

path, nodes = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path) if l.startswith("{") and not l.startswith('{"stamp"')]
last = {}
for r in rows:  # the last epoch of each run
    key = (r["net"], r["example"], r["label"])
    if key not in last or r["epoch"] > last[key]["epoch"]:
        last[key] = r
spread = 1.0
for r in rows:
    if r["label"] in ("single", "ddp") and r["epoch"] == 2:
        first = next((q for q in rows if q["epoch"] == 1 and q["net"] == r["net"] and
                      q["example"] == r["example"] and q["label"] == r["label"]), None)
        if first:
            a, b = first["epoch_s"], r["epoch_s"]
            spread = max(spread, max(a, b) / min(a, b))
torch_v = next((r["torch"] for r in rows if "torch" in r), "?")
print("# gradsync.torch against PyTorch DDP and single-message fusion\n")
print(f"{nodes} ranks on {nodes} emulated nodes (`gradsync run --net RATE`), one thread per "
      f"rank, torch {torch_v} on CPU. Each configuration trains 2 epochs of a fixed number "
      "of steps; the table gives the last epoch (after the profiled policies have planned). "
      "The three peers run one after the other in the same processes (one launch per link "
      "rate, `bench/torch/compare.py`, driven by `bench/torch/torch_vs_ddp.sh`).\n")
print("Single runs, no best-of; the stamp gives the machine's load while this ran. Noise: "
      "the two epochs of one peer that changes nothing between them (single, DDP) differ "
      f"by up to {spread:.2f}x here (torch.jsonl), and a difference of that size between "
      "peers says nothing. Each rank computes on one thread of a 2-core machine shared by "
      "all 4 ranks, so compute dominates the steps at 1 Gbit/s (the CNN's 6.6 MB all-reduce "
      "takes about 0.08 s at the link rate) and the link only at 100 Mbit/s (about 0.8 s).\n")
print("| example | link | gradsync auto (plan, messages) img/s | single img/s | DDP (gloo) img/s "
      "| auto / DDP | auto / single | epoch s: auto / single / DDP |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for net in ("1gbit", "100mbit"):
    for ex in ("fashion_mnist_cnn", "resnet18_synthetic"):
        a, s, d = (last.get((net, ex, m)) for m in ("auto", "single", "ddp"))
        if not (a and s and d):
            continue
        print(f"| {ex} (batch {a['batch_per_rank']}/rank, {a['steps']} steps) | {net} | "
              f"{a['images_per_s']:.1f} ({a['chosen']}, {a['messages']}) | "
              f"{s['images_per_s']:.1f} | {d['images_per_s']:.1f} | "
              f"{a['images_per_s'] / d['images_per_s']:.2f}x | "
              f"{a['images_per_s'] / s['images_per_s']:.2f}x | "
              f"{a['epoch_s']:.1f} / {s['epoch_s']:.1f} / {d['epoch_s']:.1f} |")
missing = [f"{ex} at {net} ({m})" for net in ("1gbit", "100mbit")
           for ex in ("fashion_mnist_cnn", "resnet18_synthetic")
           for m in ("auto", "single", "ddp") if (net, ex, m) not in last]
if missing:
    print("\n**Not measured (the run was stopped at the session's deadline): "
          + ", ".join(missing) + ".**")
fm = [last.get((net, "fashion_mnist_cnn", m)) for net in ("1gbit", "100mbit")
      for m in ("auto", "single", "ddp")]
if all(fm):
    print("\nA full Fashion-MNIST epoch (60,000 images) at these rates would take, in seconds "
          "(60000 / images/s, not measured end to end): " + "; ".join(
              f"{r['net']} {r['label']} {60000 / r['images_per_s']:.0f}" for r in fm) + ".")
acc = [r for r in last.values() if r.get("test_accuracy") is not None]
if acc:
    print("\nTest accuracy after the 2 short epochs (not a convergence figure): " + "; ".join(
        f"{r['net']} {r['label']} {100 * r['test_accuracy']:.1f}%" for r in acc) + ".")
hook = os.path.join(os.path.dirname(path), "torch_hook.jsonl")
if os.path.exists(hook):
    h = [json.loads(l) for l in open(hook) if l.startswith("{") and not l.startswith('{"stamp"')]
    print("\n## Per-tensor cost of the Python hook path\n")
    print("`bench/torch/hook_overhead.sh` (one rank, result in `torch_hook.jsonl` with its own "
          "stamp): backward of a chain of tiny linear layers, with and without "
          "DistributedOptimizer's hooks, median of repeated passes; the difference divided by "
          "the number of gradient tensors is the hook path's cost (autograd's hook dispatch, "
          "the Python hook, engine.grad_ready).\n")
    print("| tensors | backward without hooks (ms) | with hooks (ms) | per tensor (us) |")
    print("|---:|---:|---:|---:|")
    for r in h:
        print(f"| {r['tensors']} | {1e3 * r['plain_s']:.2f} | {1e3 * r['hooked_s']:.2f} | "
              f"{1e6 * r['per_tensor_s']:.2f} |")
print(f"\nEnvironment: {platform.processor() or platform.machine()}, "
      f"{subprocess.getoutput('nproc')} cores, "
      f"{subprocess.getoutput('mpirun --version | head -1')}.")
