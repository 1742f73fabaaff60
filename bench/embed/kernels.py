#!/usr/bin/env python3
"""Embedding-bag kernels, gradsync against PyTorch, one thread, in one process
on the same tables and batches (issue 37's kernel targets).

For each (dim, pooling factor, id distribution): a table of ROWS rows, BATCH
bags of exactly L ids (uniform, or Zipf with exponent 1.15 as FBGEMM's
benchmarks draw them: (zipf(a) - 1) mod rows, then a fixed random
permutation so the hot rows scatter over the table).
  forward:  torch.nn.functional.embedding_bag(mode="sum") against
            gs_embed_forward (libgradsync through ctypes) on the same tensor;
  backward + row-wise Adagrad: PyTorch's sparse gradient (EmbeddingBag
            sparse=True, backward from a given output gradient) and the DLRM
            reference's rwsadagrad update (coalesce, mean of squares per row
            into one accumulator per row, w -= lr * g / (sqrt(G) + eps))
            against gs_embed_backward_update (sort, segment-sum, fused update).
The peer's forward is outside its timed backward. Times are medians over
REPS calls after a warm-up; the two sides alternate, each on its own fresh
batch per call (the same distribution), so that neither is timed on rows
the other has just brought into the cache; each backward follows its own
forward of the same batch, as in training.
Writes one JSON line per cell to stdout."""
import argparse
import ctypes
import json
import statistics
import time

import numpy as np
import torch


class Table(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("weights", ctypes.c_void_p),
                ("state", ctypes.c_void_p), ("rows", ctypes.c_size_t),
                ("dim", ctypes.c_size_t)]


class Bags(ctypes.Structure):
    _fields_ = [("nbags", ctypes.c_size_t), ("offsets", ctypes.c_void_p),
                ("ids", ctypes.c_void_p), ("ids64", ctypes.c_int),
                ("first_sample", ctypes.c_size_t)]


class Optim(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("lr", ctypes.c_float), ("eps", ctypes.c_float)]


def make_ids(rng, dist, n, rows, perm):
    if dist == "uniform":
        return rng.integers(0, rows, n, dtype=np.int64)
    z = rng.zipf(1.15, n).astype(np.uint64)
    return perm[((z - 1) % rows).astype(np.int64)]


def median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--dims", default="16,64,128")
    ap.add_argument("--pooling", default="1,10,55")
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(1)
    lib = ctypes.CDLL(a.lib)
    lib.gs_embed_forward.restype = ctypes.c_int
    lib.gs_embed_backward_update.restype = ctypes.c_int
    lib.gs_last_error.restype = ctypes.c_char_p
    work = ctypes.c_void_p(None)
    rng = np.random.default_rng(7)
    perm = rng.permutation(a.rows).astype(np.int64)
    print(json.dumps({"config": {"rows": a.rows, "batch": a.batch, "reps": a.reps,
                                 "torch": torch.__version__, "threads": 1}}), flush=True)
    for dim in [int(x) for x in a.dims.split(",")]:
        emb = torch.nn.EmbeddingBag(a.rows, dim, mode="sum", sparse=True)
        w = emb.weight
        state = torch.zeros(a.rows)
        gs_state = torch.zeros(a.rows)
        for L in [int(x) for x in a.pooling.split(",")]:
            for dist in ("uniform", "zipf1.15"):
                n = a.batch * L
                offsets = torch.arange(0, n + 1, L, dtype=torch.int64)
                dout = torch.randn(a.batch, dim)
                out = torch.empty(a.batch, dim)
                table = Table(b"bench", w.data.data_ptr(), gs_state.data_ptr(), a.rows, dim)
                opt = Optim(1, 0.01, 1e-10)
                # Each side its own fresh batch per call (same distribution), so
                # that neither finds the rows the other just read in the cache.
                batches = [torch.from_numpy(make_ids(rng, dist, n, a.rows, perm))
                           for _ in range(2 * a.reps + 2)]
                cur = {}

                def use(i):
                    cur["ids"] = batches[i]
                    cur["ids32"] = batches[i].to(torch.int32)
                    cur["bags"] = Bags(a.batch, offsets.data_ptr(), cur["ids32"].data_ptr(), 0, 0)

                def gs_fwd():
                    if lib.gs_embed_forward(ctypes.byref(table), ctypes.byref(cur["bags"]), 0,
                                            ctypes.c_void_p(out.data_ptr()),
                                            ctypes.c_size_t(dim), ctypes.c_size_t(0)) != 0:
                        raise RuntimeError(lib.gs_last_error().decode())

                def torch_fwd():
                    with torch.no_grad():
                        torch.nn.functional.embedding_bag(cur["ids"], w, offsets[:-1],
                                                          mode="sum")

                def gs_bwd():
                    if lib.gs_embed_backward_update(
                            ctypes.byref(table), ctypes.byref(cur["bags"]), 0,
                            ctypes.c_void_p(dout.data_ptr()), ctypes.c_size_t(dim),
                            ctypes.c_size_t(0), ctypes.byref(opt), ctypes.byref(work)) != 0:
                        raise RuntimeError(lib.gs_last_error().decode())

                pending = {}

                def torch_prep():
                    emb.zero_grad(set_to_none=True)
                    pending["y"] = emb(cur["ids"], offsets[:-1])

                def torch_bwd():
                    pending["y"].backward(dout)
                    g = w.grad.coalesce()
                    idx, vals = g.indices()[0], g.values()
                    with torch.no_grad():
                        state.index_add_(0, idx, vals.pow(2).mean(1))
                        std = state.index_select(0, idx).sqrt_().add_(1e-10)
                        w.index_add_(0, idx, vals / std.unsqueeze(1), alpha=-0.01)

                # Correctness of the forward against the peer on one batch.
                use(0)
                gs_fwd()
                ref = torch.nn.functional.embedding_bag(cur["ids"], w, offsets[:-1], mode="sum")
                err = float((out - ref).abs().max() / (ref.abs().max() + 1e-30))
                # Warm-up (code, allocator), then each side on its own batches.
                gs_bwd()
                use(1)
                torch_fwd()
                torch_prep()
                torch_bwd()
                tf = {"gs": [], "torch": []}
                tb = {"gs": [], "torch": []}
                for r in range(a.reps):
                    use(2 + 2 * r)
                    tf["gs"].append(median_time(gs_fwd, 1))
                    tb["gs"].append(median_time(gs_bwd, 1))
                    use(3 + 2 * r)
                    tf["torch"].append(median_time(torch_fwd, 1))
                    torch_prep()
                    tb["torch"].append(median_time(torch_bwd, 1))
                row = {"dim": dim, "pooling": L, "ids": dist, "lookups": n,
                       "fwd_gs_ms": 1e3 * statistics.median(tf["gs"]),
                       "fwd_torch_ms": 1e3 * statistics.median(tf["torch"]),
                       "bwd_gs_ms": 1e3 * statistics.median(tb["gs"]),
                       "bwd_torch_ms": 1e3 * statistics.median(tb["torch"]),
                       "fwd_rel_err": err}
                row["fwd_speedup"] = row["fwd_torch_ms"] / row["fwd_gs_ms"]
                row["bwd_speedup"] = row["bwd_torch_ms"] / row["bwd_gs_ms"]
                print(json.dumps(row), flush=True)
    lib.gs_embed_work_free(work)


if __name__ == "__main__":
    main()
