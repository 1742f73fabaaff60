#!/usr/bin/env python3
"""Turns bench/results/torch.jsonl (bench/torch/torch_vs_ddp.sh) into the
Markdown tables of bench/results/torch.md (medians over the rounds, and the
per-round ratios' median and range); appends the hook-overhead figures
of bench/results/torch_hook.jsonl (bench/torch/hook_overhead.sh) if present.
Usage: summarize.py torch.jsonl NODES"""
import json
import os
import platform
import statistics
import subprocess
import sys

path, nodes = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path) if l.startswith("{") and not l.startswith('{"stamp"')]
rows = [r for r in rows if "example" in r]  # not the allreduce_algorithm row
NETS = ("1gbit", "100mbit")
EXAMPLES = ("fashion_mnist_cnn", "resnet18_synthetic")
PEERS = ("auto", "auto-overlap", "single", "ddp")
runs = {}  # (net, example, label, round) -> the run's last epoch
for r in rows:
    key = (r["net"], r["example"], r["label"], r.get("round", 0))
    if key not in runs or r["epoch"] > runs[key]["epoch"]:
        runs[key] = r
rounds = sorted({k[3] for k in runs})


def rates(net, ex, label):
    return [runs[(net, ex, label, k)]["images_per_s"] for k in rounds
            if (net, ex, label, k) in runs]


def paired(net, ex, a, b):
    """a's rate over b's, round by round (the two ran minutes apart)."""
    return [runs[(net, ex, a, k)]["images_per_s"] / runs[(net, ex, b, k)]["images_per_s"]
            for k in rounds if (net, ex, a, k) in runs and (net, ex, b, k) in runs]


def med_range(v, fmt):
    if not v:
        return "-"
    m = statistics.median(v)
    return fmt.format(m) if len(v) == 1 else f"{fmt.format(m)} ({fmt.format(min(v))}-" \
        f"{fmt.format(max(v))})"


last = {}  # (net, example, label) -> the last round's run (plan, messages, steps)
for (net, ex, label, k), r in sorted(runs.items(), key=lambda kv: kv[0][3]):
    last[(net, ex, label)] = r
spread = 1.0
for r in rows:
    if r["label"] in ("single", "ddp") and r["epoch"] == 2:
        first = next((q for q in rows if q["epoch"] == 1 and q["net"] == r["net"] and
                      q["example"] == r["example"] and q["label"] == r["label"] and
                      q.get("round", 0) == r.get("round", 0)), None)
        if first:
            a, b = first["epoch_s"], r["epoch_s"]
            spread = max(spread, max(a, b) / min(a, b))
torch_v = next((r["torch"] for r in rows if "torch" in r), "?")
print("# gradsync.torch against PyTorch DDP and single-message fusion\n")
print(f"{nodes} ranks on {nodes} emulated nodes (`gradsync run --net RATE`), one thread per "
      f"rank, torch {torch_v} on CPU. Each peer trains 2 epochs of a fixed number of steps "
      "from the same initialisation; a run's figure is its last epoch (after the profiled "
      "policies have planned). The peers run one after the other in the same processes (one "
      "launch per link rate, `bench/torch/compare.py`, driven by "
      f"`bench/torch/torch_vs_ddp.sh`), {len(rounds)} round(s), the order reversed on odd "
      "rounds. Peers: `auto` is `DistributedOptimizer(policy=\"auto\")`; `auto-overlap` adds "
      "`model=model`, with which the plan may be DeAR's (reduce-scatter in backward, each "
      "layer's all-gather overlapping the next forward up to that layer); `single` is "
      "Horovod-style fusion into one message; DDP is PyTorch's, gloo, default buckets.\n")
print("Figures are medians over the rounds with the range in brackets; a ratio is the median "
      "of the per-round ratios (peers of one round ran minutes apart). No best-of; the "
      "stamp gives the machine's load while this ran. Noise: the two epochs of one peer that "
      "changes nothing between them (single, DDP) differ by up to "
      f"{spread:.2f}x here (torch.jsonl). Each rank computes on one thread of a 2-core "
      "machine shared by all 4 ranks, so compute dominates the steps at 1 Gbit/s (the CNN's "
      "6.6 MB all-reduce takes about 0.08 s at the link rate) and the link only at "
      "100 Mbit/s (about 0.8 s).\n")
print("| example | link | auto img/s (plan, messages) | auto-overlap img/s (plan, messages) "
      "| single img/s | DDP (gloo) img/s | auto / DDP | auto-overlap / DDP | auto / single |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for net in NETS:
    for ex in EXAMPLES:
        if not all(rates(net, ex, m) for m in ("auto", "ddp")):
            continue
        a = last[(net, ex, "auto")]
        o = last.get((net, ex, "auto-overlap"))
        cells = [f"{ex} (batch {a['batch_per_rank']}/rank, {a['steps']} steps)", net,
                 f"{med_range(rates(net, ex, 'auto'), '{:.1f}')} ({a['chosen']}, "
                 f"{a['messages']})",
                 f"{med_range(rates(net, ex, 'auto-overlap'), '{:.1f}')} ({o['chosen']}, "
                 f"{o['messages']})" if o else "-",
                 med_range(rates(net, ex, "single"), "{:.1f}"),
                 med_range(rates(net, ex, "ddp"), "{:.1f}"),
                 med_range(paired(net, ex, "auto", "ddp"), "{:.2f}x"),
                 med_range(paired(net, ex, "auto-overlap", "ddp"), "{:.2f}x"),
                 med_range(paired(net, ex, "auto", "single"), "{:.2f}x")]
        print("| " + " | ".join(cells) + " |")
missing = [f"{ex} at {net} ({m})" for net in NETS for ex in EXAMPLES for m in PEERS
           if not rates(net, ex, m)]
if missing:
    print("\n**Not measured: " + ", ".join(missing) + ".**")
print("\nEpoch time (s), median over the rounds:\n")
print("| example | link | " + " | ".join(PEERS) + " |")
print("|---|---|" + "---:|" * len(PEERS))
for net in NETS:
    for ex in EXAMPLES:
        secs = [[runs[(net, ex, m, k)]["epoch_s"] for k in rounds if (net, ex, m, k) in runs]
                for m in PEERS]
        if any(secs):
            print(f"| {ex} | {net} | " + " | ".join(
                f"{statistics.median(v):.1f}" if v else "-" for v in secs) + " |")
cost = [(net, ex) for net in NETS for ex in EXAMPLES
        if any("cpu_s_per_step" in runs.get((net, ex, m, k), {}) for m in PEERS for k in rounds)]
if cost:
    print("\nWhat a step costs the host (rank 0's process, all its threads; median over the "
          "rounds): CPU seconds per step, and context switches per step (voluntary and "
          "involuntary), which on 2 cores shared by 4 ranks are time some rank's computation "
          "waits:\n")
    print("| example | link | " + " | ".join(f"{m} CPU s / switches" for m in PEERS) + " |")
    print("|---|---|" + "---:|" * len(PEERS))
    for net, ex in cost:
        cells = []
        for m in PEERS:
            rs = [runs[(net, ex, m, k)] for k in rounds if (net, ex, m, k) in runs and
                  "cpu_s_per_step" in runs[(net, ex, m, k)]]
            cells.append(f"{statistics.median(r['cpu_s_per_step'] for r in rs):.3f} / "
                         f"{statistics.median(r['ctx_switches_per_step'] for r in rs):.0f}"
                         if rs else "-")
        print(f"| {ex} | {net} | " + " | ".join(cells) + " |")
fm = [(net, m, rates(net, "fashion_mnist_cnn", m)) for net in NETS for m in PEERS]
if all(v for _, _, v in fm):
    print("\nA full Fashion-MNIST epoch (60,000 images) at the median rates would take, in "
          "seconds (60000 / images/s, not measured end to end): " + "; ".join(
              f"{net} {m} {60000 / statistics.median(v):.0f}" for net, m, v in fm) + ".")
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
