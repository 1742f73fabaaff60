#!/usr/bin/env python3
"""Turns bench/train/compress_sweep.sh's JSON lines into bench/results/compress.md.

Every figure comes from the runs in the file; ratios are against the dense
run of the same part, measured in the same invocation."""
import json
import subprocess
import sys

path, epochs, table_epochs, table_steps, epochs_1g = sys.argv[1:6]
# Part 1's evaluation rounds (4 per epoch unless the runs were capped).
head_rounds = int(sys.argv[6]) if len(sys.argv) > 6 else int(epochs)
per_epoch = head_rounds // int(epochs) if int(epochs) else 1
rows = [json.loads(l) for l in open(path) if l.startswith("{") and '"stamp"' not in l[:10]]


def runs(part):
    out = {}
    for r in rows:
        if r.get("part") != part:
            continue
        d = out.setdefault(r["label"], {"epochs": [], "summary": None, "failed": None,
                                        "net": r.get("net")})
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
      "`bench/train/compress_sweep.sh`, one after the other on a 2-core machine whose "
      "load the stamp records: absolute times carry that load; the ratios compare runs "
      "of the same invocation. Times are the sum of the epochs' training times "
      "(evaluation excluded). "
      + (f"Part 1 measures test accuracy every 1/{per_epoch} epoch (rounds of 59 steps "
         "of a fresh shuffle, `--epochs` rounds `--max-steps 59`; the cosine decay spans "
         "them all), so 'time to 88%' is the end of the first round at or above 88%. "
         if per_epoch > 1 else
         "Test accuracy is measured once per epoch, so 'time to 88%' is the end of the "
         "first epoch at or above 88%. ")
      + "'bytes/step' is what one rank "
      "put on the wire for gradients per step (payloads for compressed messages, full "
      "size for dense ones), averaged over the run.\n")

h = runs("headline")
if h:
    print(f"## Dense vs top-k 1% with error feedback, 100 Mbit/s, {epochs} epoch(s)\n")
    print("'warm-up N': the density starts at 25% and falls exponentially to 1% over the "
          "first N steps (DGC's warm-up, `--compress-warmup-steps N`). 'dgc': DGC's top-k "
          "1% of the momentum-corrected residual (the optimizer's momentum 0.9 moves into "
          "the compressor; momentum factor masking), with error feedback as the others.\n")
    print("| run | time to 88% (s) | vs dense | accuracy after the last epoch | vs dense "
          "(points) | train time (s) | bytes/step | compression | groups compressed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    dd = h.get("dense")
    a = time_to(dd, 0.88) if dd else None
    dacc = dd["summary"]["test_accuracy"] if dd and dd["summary"] else None
    verdicts = []
    for label, d in h.items():
        if not d["summary"]:
            print(f"| {label} | failed | | | | | | | |")
            continue
        s = d["summary"]
        b = time_to(d, 0.88)
        ratio = b / a if a and b else None
        diff = 100 * (s["test_accuracy"] - dacc) if dacc is not None else None
        print(f"| {label} | {fmt(b)} | {fmt(ratio, '{:.2f}x')} | "
              f"{100 * s['test_accuracy']:.2f}% | {fmt(diff, '{:+.2f}')} | "
              f"{s['train_s']:.1f} | {fmt(per_step(d), '{:,.0f}')} | "
              f"{fmt(s.get('compression_ratio'), '{:.1f}x')} | "
              f"{s.get('compressed_groups', 0)}/{s.get('groups', '-')} |")
        if label != "dense":
            verdicts.append(
                f"- {label}: time to 88% "
                + (f"**{ratio:.2f}x** dense's" if ratio else
                   "not measured (" + ", ".join(n for n, v in (("dense", a), (label, b))
                                                if v is None) + " did not reach 88%)")
                + " (target <= 0.5x); accuracy after the last epoch "
                + (f"**{diff:+.2f} points**" if diff is not None else "-")
                + " against dense (target within 1 point).")
    print("\n" + "\n".join(verdicts) + "\n")
    print("Per " + ("round" if per_epoch > 1 else "epoch") + " (s, test accuracy):\n")
    for label, d in h.items():
        print(f"- {label}: " + ", ".join(f"{e['epoch_s']:.1f} s {100 * e['test_accuracy']:.2f}%"
                                        for e in d["epochs"]))
    print()

t = runs("table")
if t:
    net = next(iter(t.values()))["net"]
    shaped = net != "none"
    print(f"## Every compressor, with and without error feedback, "
          f"{'at ' + net if shaped else 'without link shaping'}\n")
    if int(table_steps) > 0:
        print(f"Shorter runs: {table_epochs} epoch(s) of at most {table_steps} steps each; "
              f"accuracy is after that run, not after {epochs} epochs. ", end="")
    else:
        print(f"{table_epochs} whole epoch(s) each; accuracy after them. ", end="")
    if not shaped:
        print("These runs had no emulated link (4 ranks over loopback on 2 cores): the "
              "accuracy and bytes per step are what the compressor gives, but the times "
              "are compute and loopback only and say nothing about a slow link. ", end="")
    print("Compressors pick their exchange by the plan "
          "(all-gather, gTop-k, all-reduce, PowerSGD's two all-reduces).\n")
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
