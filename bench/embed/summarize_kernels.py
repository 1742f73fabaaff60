#!/usr/bin/env python3
"""Markdown table of bench/embed/kernels.py's JSON lines: per cell the
median times of gradsync's kernels and PyTorch's, and the speed-ups
(PyTorch's time over gradsync's; above 1 = gradsync faster)."""
import json
import sys


def main():
    cfg, rows = {}, []
    with open(sys.argv[1]) as f:
        for line in f:
            r = json.loads(line)
            if "config" in r:
                cfg = r["config"]
            elif "dim" in r:
                rows.append(r)
    print("# Embedding-bag kernels against PyTorch (one thread)\n")
    print(f"A table of {cfg.get('rows')} rows, batch {cfg.get('batch')} bags of exactly L "
          f"ids; median of {cfg.get('reps')} calls per side, each side on its own fresh "
          f"batch per call (PyTorch {cfg.get('torch')}, torch.set_num_threads(1)). "
          "**forward**: `torch.nn.functional.embedding_bag(mode='sum')` against "
          "`gs_embed_forward`; **backward + update**: PyTorch's sparse gradient "
          "(`EmbeddingBag(sparse=True)`, backward from the output gradient) and the DLRM "
          "reference's row-wise Adagrad (coalesce, one accumulator per row) against "
          "`gs_embed_backward_update` (radix sort by row, segment sum, fused update). "
          "Speed-up: PyTorch's time over gradsync's. Times on this machine vary from run "
          "to run.\n")
    print("| dim | L | ids | forward gs ms | forward torch ms | forward speed-up | "
          "bwd+update gs ms | bwd+update torch ms | bwd speed-up |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['dim']} | {r['pooling']} | {r['ids']} | {r['fwd_gs_ms']:.3f} | "
              f"{r['fwd_torch_ms']:.3f} | {r['fwd_speedup']:.2f}x | {r['bwd_gs_ms']:.3f} | "
              f"{r['bwd_torch_ms']:.3f} | {r['bwd_speedup']:.2f}x |")
    if rows:
        f = [r["fwd_speedup"] for r in rows]
        b = [r["bwd_speedup"] for r in rows]
        print(f"\nforward: {min(f):.2f}x to {max(f):.2f}x ({sum(x >= 1 for x in f)} of "
              f"{len(f)} cells at or above 1x); backward + update: {min(b):.2f}x to "
              f"{max(b):.2f}x ({sum(x >= 2 for x in b)} of {len(b)} at or above 2x).")


if __name__ == "__main__":
    main()
