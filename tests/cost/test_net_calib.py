#!/usr/bin/env python3
"""The calibrated network presets against their committed measurement.

net_calib[] in src/cost/cost.c copies the constants bench/net_calibrate.sh
fitted on the emulated link (bench/results/net_calibrate.json). This fails
when the two disagree (a constant edited by hand, or a new calibration
committed without its constants, or the reverse), when the commit the
source names is not the one the result was measured at, and when
`gradsync simulate` or `gradsync plan` stop printing what the preset
assumes (its source and each cluster's constants).

usage: test_net_calib.py GRADSYNC SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys

gs, src = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


code = open(os.path.join(src, "src/cost/cost.c")).read()
m = re.search(r"net_calib\[\] = \{(.*?)\n\};", code, re.S)
check(m is not None, "net_calib[] found in src/cost/cost.c")
rows = []
for r in re.findall(r"\{([^{}]*)\}", m.group(1) if m else ""):
    v = [x.strip() for x in r.split(",")]
    rows.append([int(v[0])] + [float(x) for x in v[1:]])
commit = re.search(r'#define NET_CALIB_COMMIT "([0-9a-f]+)"', code)
check(commit is not None, "NET_CALIB_COMMIT names a commit")

res = json.load(open(os.path.join(src, "bench/results/net_calibrate.json")))
stamp = res.get("stamp", {})
check(commit is not None and stamp.get("commit", "").startswith(commit.group(1)),
      f"the source's commit {commit.group(1) if commit else '?'} is the result's "
      f"{stamp.get('commit', '?')[:10]}")
check(stamp.get("clean") is True, "the calibration was measured on a clean tree")
clusters = res["clusters"]
check(sorted(int(n) for n in clusters) == [r[0] for r in rows],
      f"the same cluster sizes: source {[r[0] for r in rows]}, result {sorted(clusters)}")


def close(a, b):
    # The source keeps 3 significant digits.
    return abs(a - b) <= 5e-3 * max(abs(a), abs(b)) + 1e-12


for r in rows:
    c = clusters.get(str(r[0]))
    if c is None:
        continue
    want = [c["engine_msg_s"],
            c["algos"]["ring"]["alpha"], c["algos"]["ring"]["beta"],
            c["algos"]["rd"]["alpha"], c["algos"]["rd"]["beta"],
            c["algos"]["rabenseifner"]["alpha"], c["algos"]["rabenseifner"]["beta"]]
    names = ["engine per message", "ring alpha", "ring beta", "rd alpha", "rd beta",
             "rabenseifner alpha", "rabenseifner beta"]
    for name, got, w in zip(names, r[1:], want):
        check(close(got, w), f"{r[0]} nodes: {name}: source {got:.4g}, result {w:.4g}")

# simulate and plan say what the preset assumes.
prof = os.path.join(src, "profiles/googlenet.json")
for argv in ([gs, "simulate", "--profile", prof, "--workers", "4", "--net", "1gbit",
              "--policy", "wfbp"],
             [gs, "plan", "--profile", prof, "--workers", "4", "--net", "1gbit",
              "--policy", "wfbp"]):
    out = subprocess.run(argv, capture_output=True, text=True)
    line = next((l for l in out.stdout.splitlines() if l.startswith("network 1gbit: ")), "")
    ok = out.returncode == 0 and "bench/results/net_calibrate.md" in line
    for r in rows:
        ok = ok and f"on {r[0]} nodes a step costs {r[2] * 1e6:.0f} us (ring)" in line
        ok = ok and f"the engine {r[1] * 1e6:.0f} us a message" in line
    check(ok, f"{argv[1]} --net 1gbit prints the preset's assumptions: {line[:160]!r}")
out = subprocess.run([gs, "simulate", "--profile", prof, "--workers", "8", "--net", "1gbit",
                      "--policy", "wfbp", "--json"], capture_output=True, text=True)
try:
    j = json.loads(out.stdout)
except ValueError:
    j = {}
check("net_calibrate" in j.get("network_assumes", ""), "simulate --json: network_assumes")
sys.exit(1 if failures else 0)
