#!/usr/bin/env python3
"""Summarizes bench/elastic/elastic_main.sh's elastic.jsonl as Markdown:
each run's accuracy per epoch, time and samples per epoch; the elastic run's
restart (kill -> failure detected -> relaunched -> its first epoch line) and
resize lines; the commits' share of training time.
Usage: summarize_elastic.py elastic.jsonl"""
import json
import sys


def load(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "stamp" in r:
            continue
        rows.append(r)
    return rows


def main():
    rows = load(sys.argv[1])
    runs = {}
    for r in rows:
        runs.setdefault(r.get("run", "?"), []).append(r)
    print("# Elastic training on emulated hosts at 1 Gbit/s\n")
    print("4 hosts in network namespaces, each with its own sshd and a 1 Gbit/s link "
          "shaped both ways (`scripts/emulated-hosts.sh up 4 DIR 1gbit`); the main job's "
          "model and schedule (CNN on Fashion-MNIST, warm-up 0.3 epoch, cosine decay, "
          "policy auto) with a global batch of 240 (60 per rank on 4 ranks, 80 on 3) and "
          "a commit every 50 steps. `ref`: `gradsync run --hosts` uninterrupted; `net`: "
          "the same on `gradsync run --net 1gbit`; `elastic`: `gradsync run --hosts "
          "--elastic 2:4`, with one rank SIGKILLed once the job had committed inside "
          "epoch 2. The host has 2 cores for 4 ranks: times are the host's, compare "
          "them within this file only.\n")
    print("| run | epoch | test accuracy | epoch s | samples (of dataset) |")
    print("|---|---:|---:|---:|---|")
    final = {}
    for name in ("ref", "net", "elastic"):
        for r in runs.get(name, []):
            if "summary" in r:
                final[name] = r["summary"]
            if "epoch" in r and "test_accuracy" in r and "event" not in r:
                print(f"| {name} | {r['epoch']} | "
                      f"{100 * r['test_accuracy']:.2f}% | {r.get('epoch_s', 0):.1f} | "
                      f"{r.get('samples', '?')} of {r.get('dataset_samples', '?')} |")
    print()
    print("| run | final accuracy | vs ref (points) | wall s | train s (last launch) | "
          "commits | commit s | commit share |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ref_acc = final.get("ref", {}).get("test_accuracy")
    for name in ("ref", "net", "elastic"):
        s = final.get(name)
        wall = next((r["wall_s"] for r in runs.get(name, []) if "wall_s" in r), None)
        exits = [r["exit"] for r in runs.get(name, []) if "exit" in r]
        if s is None:
            print(f"| {name} | (no summary; exit {exits}) | | {wall} | | | | |")
            continue
        acc = s["test_accuracy"]
        d = f"{100 * (acc - ref_acc):+.2f}" if ref_acc is not None else ""
        share = s.get("commit_s", 0) / s["train_s"] if s.get("train_s") else 0
        print(f"| {name} | {100 * acc:.2f}% | {d} | {wall:.1f} | {s['train_s']:.1f} | "
              f"{s.get('commits', 0)} | {s.get('commit_s', 0):.2f} | {100 * share:.2f}% |")
    ev = [r for r in runs.get("elastic", []) if "event" in r]
    kill = next((r["kill_unix"] for r in runs.get("elastic", []) if "kill_unix" in r), None)
    print("\n## The elastic run's events\n")
    print("| t s | event | detail |")
    print("|---:|---|---|")
    for e in ev:
        detail = {k: v for k, v in e.items() if k not in ("event", "t", "time", "run")}
        print(f"| {e.get('t', 0):.2f} | {e['event']} | `{json.dumps(detail)[:200]}` |")
    fail = next((e for e in ev if e["event"] == "failure"), None)
    launches = [e for e in ev if e["event"] == "launch"]
    resize = next((e for e in ev if e["event"] == "resize"), None)
    if kill and fail:
        t0 = fail["time"] - fail.get("t", 0)  # the supervisor's start, Unix time
        lines = ["\n## Restart, kill to training again\n"]
        kill_t = kill - t0
        lines.append(f"- kill -9 of a rank at t = {kill_t:.2f} s")
        lines.append(f"- failure seen by the supervisor (mpirun's exit) at t = {fail['t']:.2f} s "
                     f"({fail['t'] - kill_t:.2f} s after the kill)")
        if len(launches) > 1:
            lines.append(f"- relaunch on {launches[1].get('size', '?')} ranks at t = "
                         f"{launches[1]['t']:.2f} s ({launches[1]['t'] - fail['t']:.2f} s later)")
        if resize:
            lines.append(f"- resumed from the commit at epoch {resize.get('commit_epoch')}, "
                         f"sample {resize.get('commit_samples_in_epoch')} of the epoch; steps "
                         f"redone {resize.get('steps_redone')}; seconds lost "
                         f"{resize.get('seconds_lost')}")
        print("\n".join(lines))
    text = [r["line"] for r in runs.get("elastic", []) if "line" in r]
    if text:
        print("\n## What the supervisor printed\n\n```")
        print("\n".join(text))
        print("```")


main()
