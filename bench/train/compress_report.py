#!/usr/bin/env python3
"""Turns bench/train/compress_sweep.sh's JSON lines into bench/results/compress.md.

Every figure comes from the runs in the file; ratios are against the dense
run of the same part, measured in the same invocation."""
import json
import subprocess
import sys

path, epochs, table_epochs, table_steps, epochs_1g = sys.argv[1:6]
rows = [json.loads(l) for l in open(path) if l.startswith("{") and '"stamp"' not in l[:10]]


def runs(part):
    out = {}
    for r in rows:
        if r.get("part") != part:
            continue
        d = out.setdefault(r["label"], {"epochs": [], "summary": None, "failed": None})
        if "epoch" in r:
            d["epochs"].append(r)
        elif "summary" in r:
            d["summary"] = r["summary"]
        elif "failed" in r:
            d["failed"] = r
    return out


def time_to(d, acc):
    t = 0.0
    for e in d["epochs"]:
        t += e["epoch_s"]
        if e["test_accuracy"] >= acc:
            return t
    return None


def fmt(v, f="{:.1f}", none="-"):
    return none if v is None else f.format(v)


def per_step(d):
    s = d["summary"]
    if not s:
        return None
    return s.get("bytes_per_step")


print("# Gradient compression inside the engine: training at 100 Mbit/s and 1 Gbit/s\n")
print("CNN (1.66 M parameters), Fashion-MNIST, batch 64 per rank, 4 ranks on 4 emulated "
      "nodes (`gradsync run --net`), SGD lr 0.05 momentum 0.9, 0.3 epoch warm-up, cosine "
      "decay, policy auto; every run of this file by one invocation of "
      "`bench/train/compress_sweep.sh`, one after the other. **The machine (2 cores) was "
      "shared with other jobs during these runs**: absolute times carry their load; the "
      "ratios compare runs of the same invocation. Times are the sum of the epochs' "
      "training times (evaluation excluded); 'bytes/step' is what one rank put on the wire "
      "for gradients per step (payloads for compressed messages, full size for dense ones).\n")

h = runs("headline")
if h:
    print(f"## Dense vs top-k 1% with error feedback, 100 Mbit/s, {epochs} epoch(s)\n")
    print("| run | time to 88% (s) | accuracy after the last epoch | train time (s) | "
          "bytes/step | compression | groups compressed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label in ("dense", "topk:0.01"):
        d = h.get(label)
        if not d or not d["summary"]:
            print(f"| {label} | failed | | | | | |")
            continue
        s = d["summary"]
        print(f"| {label} | {fmt(time_to(d, 0.88))} | {100 * s['test_accuracy']:.2f}% | "
              f"{s['train_s']:.1f} | {fmt(per_step(d), '{:,.0f}')} | "
              f"{fmt(s.get('compression_ratio'), '{:.1f}x')} | "
              f"{s.get('compressed_groups', 0)}/{s.get('groups', '-')} |")
    dd, tt = h.get("dense"), h.get("topk:0.01")
    if dd and tt and dd["summary"] and tt["summary"]:
        a, b = time_to(dd, 0.88), time_to(tt, 0.88)
        if a and b:
            print(f"\nTime to 88%: top-k / dense = **{b / a:.2f}x** (target <= 0.5x).")
        else:
            print("\nTime to 88%: not reached by "
                  + ", ".join(l for l, v in (("dense", a), ("top-k", b)) if v is None) + ".")
        print(f"Accuracy after {epochs} epoch(s): top-k {100 * tt['summary']['test_accuracy']:.2f}%"
              f" vs dense {100 * dd['summary']['test_accuracy']:.2f}% "
              f"(difference {100 * (tt['summary']['test_accuracy'] - dd['summary']['test_accuracy']):+.2f} "
              "points; target within 1 point).\n")
    print("Per epoch (s, test accuracy):\n")
    for label, d in h.items():
        print(f"- {label}: " + ", ".join(f"{e['epoch_s']:.1f} s {100 * e['test_accuracy']:.2f}%"
                                        for e in d["epochs"]))
    print()

t = runs("table")
if t:
    print(f"## Every compressor, with and without error feedback, 100 Mbit/s\n")
    print(f"Shorter runs: {table_epochs} epoch(s) of at most {table_steps} steps each "
          f"(the full 4-epoch table did not fit the session's time); accuracy is after "
          f"that run, not after 4 epochs. Compressors pick their exchange by the plan "
          f"(all-gather, gTop-k, all-reduce, PowerSGD's two all-reduces).\n")
    print("| compressor | error feedback | test accuracy | train time (s) | time vs dense | "
          "bytes/step | compression | exchange |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    dense = t.get("dense")
    dense_s = dense["summary"]["train_s"] if dense and dense["summary"] else None
    for label, d in t.items():
        spec = label.replace(" --no-ef", "")
        ef = "no" if "--no-ef" in label else ("-" if label in ("dense", "fp16", "bf16") else "yes")
        s = d["summary"]
        if not s:
            why = (d["failed"] or {}).get("stderr", "").strip().splitlines()
            print(f"| {spec} | {ef} | failed: {why[-1][:80] if why else '?'} | | | | | |")
            continue
        ratio = f"{s['train_s'] / dense_s:.2f}x" if dense_s else "-"
        print(f"| {spec} | {ef} | {100 * s['test_accuracy']:.2f}% | {s['train_s']:.1f} | "
              f"{ratio} | {fmt(per_step(d), '{:,.0f}')} | "
              f"{fmt(s.get('compression_ratio'), '{:.1f}x')} | {s.get('exchanges', 'dense')} |")
    print()

f = runs("fast")
if f:
    print(f"## 1 Gbit/s: auto with compression allowed vs dense, {epochs_1g} epoch(s)\n")
    print("| run | train time (s) | accuracy | groups compressed | bytes/step |")
    print("|---|---:|---:|---:|---:|")
    for label, d in f.items():
        s = d["summary"]
        if not s:
            print(f"| {label} | failed | | | |")
            continue
        print(f"| {label} | {s['train_s']:.1f} | {100 * s['test_accuracy']:.2f}% | "
              f"{s.get('compressed_groups', 0)}/{s.get('groups', '-')} | "
              f"{fmt(per_step(d), '{:,.0f}')} |")
    a, b = f.get("dense"), f.get("auto:topk:0.01")
    if a and b and a["summary"] and b["summary"]:
        r = b["summary"]["train_s"] / a["summary"]["train_s"]
        print(f"\nauto:topk / dense = **{r:.3f}x** training time (target: never more than "
              "1.03x).\n")

print(f"Environment: {subprocess.getoutput('nproc')} cores, "
      f"{subprocess.getoutput('mpirun --version | head -1')}.")
