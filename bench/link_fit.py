#!/usr/bin/env python3
"""Fits T = a + b*M to link_p2p's JSON lines (median one-way time by size) and
prints a Markdown table: measured, fitted, relative deviation, and a line with
a, b (as a rate) and the worst deviation. Least squares on relative error
(weights 1/T^2), since the target is a relative bound.

usage: link_fit.py FILE.jsonl [TITLE]"""
import json
import sys


def fit(rows):
    # Weighted least squares, weight 1/t^2: minimises the sum of squared
    # relative errors of a + b*m against t.
    sw = swx = swy = swxx = swxy = 0.0
    for m, t in rows:
        w = 1.0 / (t * t)
        sw += w; swx += w * m; swy += w * t; swxx += w * m * m; swxy += w * m * t
    det = sw * swxx - swx * swx
    b = (sw * swxy - swx * swy) / det
    a = (swy - b * swx) / sw
    return a, b


def main():
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            d = json.loads(line)
            if "bytes" in d:
                rows.append((float(d["bytes"]), float(d["median_s"])))
    title = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    a, b = fit(rows)
    print(f"### {title}\n")
    print("| bytes | measured (ms) | a + b*M (ms) | deviation |")
    print("| ---: | ---: | ---: | ---: |")
    worst = 0.0
    for m, t in rows:
        p = a + b * m
        dev = (t - p) / p
        worst = max(worst, abs(dev))
        print(f"| {int(m)} | {t*1e3:.3f} | {p*1e3:.3f} | {dev*100:+.1f}% |")
    print(f"\nfit: a = {a*1e6:.1f} us, b = {b*1e9:.3f} ns/B "
          f"({8/b/1e6:.0f} Mbit/s), worst deviation {worst*100:.1f}%\n")


if __name__ == "__main__":
    main()
