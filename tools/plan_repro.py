#!/usr/bin/env python3
"""Reproduction table for docs/PLANNING.md: predicted speedups of mgwfbp and
optimal (and dear) over wfbp and single from `gradsync plan`, with the
MG-WFBP paper's fitted all-reduce costs (TPDS 2021, Table of test beds).

usage: tools/plan_repro.py [path/to/gradsync] [profiles dir]
Prints a Markdown table.
"""
import json
import subprocess
import sys

GRADSYNC = sys.argv[1] if len(sys.argv) > 1 else "build/gradsync"
PROFILES = sys.argv[2] if len(sys.argv) > 2 else "profiles"
CLUSTERS = [
    ("8xK80, 10GbE", 9.72e-4, 1.97e-9),
    ("16xV100, 10GbE", 9.08e-4, 7.40e-10),
    ("16xV100, 56Gb IB", 2.36e-4, 4.06e-10),
]
MODELS = ["googlenet", "resnet50", "resnet152", "densenet201", "vgg16", "bert_base"]


SCALES = [1.0, 0.05]


def plan(model, a, b, scale):
    out = subprocess.run([GRADSYNC, "plan", "--profile", f"{PROFILES}/{model}.json",
                          "--a", repr(a), "--b", repr(b), "--json",
                          "--compute-scale", repr(scale)],
                         check=True, capture_output=True, text=True).stdout
    return {r["policy"]: r for r in map(json.loads, out.splitlines())}


print("| compute | cost (a, b) | model | wfbp ms | single ms | mgwfbp groups | mgwfbp ms "
      "| optimal groups | optimal ms | mgwfbp/wfbp | mgwfbp/single | optimal/wfbp "
      "| optimal/single | dear/wfbp |")
print("|" + "---|" * 14)
for scale in SCALES:
  for name, a, b in CLUSTERS:
    for m in MODELS:
        r = plan(m, a, b, scale)
        ms = lambda p: r[p]["predicted_iter_s"] * 1e3
        print(f"| x{scale:g} | {name} | {m} | {ms('wfbp'):.1f} | {ms('single'):.1f} "
              f"| {r['mgwfbp']['ngroups']} | {ms('mgwfbp'):.1f} "
              f"| {r['optimal']['ngroups']} | {ms('optimal'):.1f} "
              f"| {r['mgwfbp']['speedup_vs_wfbp']:.3f} "
              f"| {r['mgwfbp']['speedup_vs_single']:.3f} "
              f"| {r['optimal']['speedup_vs_wfbp']:.3f} "
              f"| {r['optimal']['speedup_vs_single']:.3f} "
              f"| {r['dear']['speedup_vs_wfbp']:.3f} |")
