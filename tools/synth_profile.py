#!/usr/bin/env python3
"""Write synthetic model profiles (JSON, the format of docs/PLANNING.md).

Two kinds, both deterministic:

  uniform COUNT NUMEL       COUNT tensors of NUMEL f32 elements and no compute:
                            under wfbp every tensor is one message of the same
                            size, so a replay measures what one message of that
                            size costs the engine (bench/net_calibrate.sh).
  mixed COUNT SEED          COUNT tensors whose sizes are log-uniform between
                            256 and 1M elements (seeded), each with backward
                            time proportional to its size (5 ns an element,
                            at least 0.2 ms) and a forward pass of 0.8 times
                            the backward: a model no preset was fitted on.

Usage: tools/synth_profile.py uniform 128 16384 -o FILE
       tools/synth_profile.py mixed 150 36 -o FILE
"""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=("uniform", "mixed"))
    ap.add_argument("count", type=int)
    ap.add_argument("arg", type=int, help="NUMEL (uniform) or SEED (mixed)")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    tensors = []
    if a.kind == "uniform":
        name = f"uniform_{a.count}x{a.arg}"
        for i in range(a.count):
            tensors.append({"name": f"t{i}", "numel": a.arg, "dtype": "f32", "backward_s": 0.0})
        forward = 0.0
        source = (f"tools/synth_profile.py uniform {a.count} {a.arg}: {a.count} tensors of "
                  f"{a.arg} f32 elements, no compute")
    else:
        name = f"mixed_{a.count}_seed{a.arg}"
        rng = random.Random(a.arg)
        for i in range(a.count):
            numel = int(round(256 * (1024 * 1024 / 256) ** rng.random()))
            tensors.append({"name": f"t{i}", "numel": numel, "dtype": "f32",
                            "backward_s": max(2e-4, 5e-9 * numel)})
        forward = 0.8 * sum(t["backward_s"] for t in tensors)
        source = (f"tools/synth_profile.py mixed {a.count} {a.arg}: sizes log-uniform in "
                  "256..1M elements (Python's random, seeded), backward 5 ns an element "
                  "(at least 0.2 ms), forward 0.8 x backward")
    prof = {"name": name, "batch_size": 1, "device": "synthetic (no device)",
            "source": source, "forward_s": forward, "tensors": tensors}
    with open(a.out, "w") as f:
        json.dump(prof, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
