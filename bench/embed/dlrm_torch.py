#!/usr/bin/env python3
"""The PyTorch peer of `gradsync train --model dlrm` (issue 37, item 7a): a
DLRM written in the DLRM reference's style (dlrm_s_pytorch.py): tables as
nn.EmbeddingBag(mode="sum", sparse=True) placed on ranks, the pooled
vectors exchanged with all_to_all_single over gloo (its backward the
reverse all-to-all), the MLPs replicated under DistributedDataParallel
(gloo, default buckets), the reference's dot interaction (the strictly
lower triangle of the vectors' Gram matrix, then the bottom MLP's output),
or cat, or DCN-v2's low-rank cross layers (TorchRec's LowRankCrossNet) as
the dump's model has,
SGD on the MLPs and the reference's row-wise Adagrad on the tables (one
accumulator per row: acc += mean(g^2) over the row, w -= lr g / (sqrt(acc)
+ eps)).

It trains on the same batches from the same initial weights as gradsync:
bench/embed/dlrm_dump.c writes the samples gs_dlrm_synth makes (global
step s: samples s*G .. (s+1)*G-1, rank r the r-th slice of G/P, every
epoch over the same samples; held-out samples from 2^40) and the model
gs_dlrm_create makes from the run's seed. It follows the same plan
(`gradsync shard --out`): a table sharded "tw" lives whole on its rank, a
"cw" table's column blocks each on theirs (a bag each; their owners add
the rows' sums of squares in one all-reduce a step, so that the row-wise
state is the whole row's, as gradsync's and one process's; TorchRec's
column-wise shards would keep their own), a "dp" table is
replicated (a dense EmbeddingBag inside DDP, its gradient all-reduced);
plans that split rows (rw, twrw) are refused. As the reference, each rank
reads the whole global batch's ids of its own tables (gradsync exchanges
them: an id all-to-all the peer does not pay for).

The loss is each rank's mean over its samples; DDP averages the MLPs'
gradients over ranks and a table owner's gradient is scaled by 1/P, so a
step is the one-process step on the global batch's mean loss, as
gradsync's. Launched by bench/embed/dlrm_vs_torch.sh under `gradsync run`
(OMPI_COMM_WORLD_RANK/SIZE); ranks meet through a file store and talk over
the emulated network's interface (gs0) when there is one.

Prints one JSON line per epoch on rank 0."""
import argparse
import collections
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def read_data(path):
    """The header and the train / eval sets: (dense, labels, ids[T, n*L])."""
    with open(path, "rb") as f:
        head = json.loads(f.readline())
        off = f.tell()
    T, Fd, L = len(head["tables"]), head["ndense"], head["pooling"]
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=off)
    sets, at = [], 0
    for n in (head["train"], head["eval"]):
        def take(count, dtype):
            nonlocal at
            a = np.frombuffer(raw, dtype=dtype, count=count, offset=at)
            at += count * np.dtype(dtype).itemsize
            return torch.from_numpy(a.copy())
        dense = take(n * Fd, np.float32).view(n, Fd)
        labels = take(n, np.float32)
        ids = take(T * n * L, np.int32).view(T, n * L).long()
        sets.append((dense, labels, ids))
    # The initial model gradsync starts from (gs_dlrm_create, its seed).
    params = {q["name"]: take(q["count"], np.float32) for q in head["params"]}
    tables = [take(t["rows"] * t["dim"], np.float32).view(t["rows"], t["dim"])
              for t in head["tables"]]
    if at != len(raw):
        raise SystemExit(f"dlrm_torch: {path}: {len(raw) - at} bytes left over: not a dlrm_dump file")
    return head, sets[0], sets[1], params, tables


def mlp(widths, last_relu):
    layers = []
    for i in range(len(widths) - 1):
        lin = nn.Linear(widths[i], widths[i + 1])
        # The reference's create_mlp initialisation.
        m, n = widths[i + 1], widths[i]
        nn.init.normal_(lin.weight, 0.0, np.sqrt(2.0 / (m + n)))
        nn.init.normal_(lin.bias, 0.0, np.sqrt(1.0 / m))
        layers.append(lin)
        if i < len(widths) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def make_bag(rows, dim, sparse):
    e = nn.EmbeddingBag(rows, dim, mode="sum", sparse=sparse)
    # The reference's create_emb: uniform in +-sqrt(1/rows).
    b = np.sqrt(1.0 / rows)
    nn.init.uniform_(e.weight, -b, b)
    return e


class A2A(torch.autograd.Function):
    """all_to_all_single forward, the reverse exchange backward."""

    group = None  # its own process group: DDP's all-reduces run on the default one

    @staticmethod
    def forward(ctx, x, in_splits, out_splits):
        ctx.splits = (in_splits, out_splits)
        out = x.new_empty(sum(out_splits))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=A2A.group)
        return out

    @staticmethod
    def backward(ctx, g):
        in_splits, out_splits = ctx.splits
        back = g.new_empty(sum(in_splits))
        dist.all_to_all_single(back, g.contiguous(), in_splits, out_splits, group=A2A.group)
        return back, None, None


class CrossNet(nn.Module):
    """DCN-v2's low-rank cross layers, as TorchRec's LowRankCrossNet:
    x_{l+1} = x0 * (W_l (V_l x_l) + b_l) + x_l."""

    def __init__(self, width, layers, rank):
        super().__init__()
        self.V = nn.ModuleList(nn.Linear(width, rank, bias=False) for _ in range(layers))
        self.W = nn.ModuleList(nn.Linear(rank, width) for _ in range(layers))

    def forward(self, x0):
        x = x0
        for v, w in zip(self.V, self.W):
            x = x0 * w(v(x)) + x
        return x


class Replicated(nn.Module):
    """What DDP holds: the MLPs (and dcn's cross layers) and the dp tables."""

    def __init__(self, bottom, top, dp_tables, dim, interaction="dot", cross=None):
        super().__init__()
        self.bottom = mlp(bottom, True)
        self.top = mlp(top, False)
        self.interaction = interaction
        self.cross = CrossNet(*cross) if interaction == "dcn" else None
        self.dp = nn.ModuleDict({str(t): make_bag(rows, dim, False) for t, rows in dp_tables})

    def forward(self, dense, pooled_mp, dp_ids, T, L):
        x = self.bottom(dense)                      # B x D
        B, D = x.shape
        pooled = pooled_mp.clone()                  # B x T x D (mp tables filled)
        offs = torch.arange(0, B * L, L)
        for t, bag in self.dp.items():
            pooled[:, int(t)] = bag(dp_ids[int(t)], offs)
        z = torch.cat([x.unsqueeze(1), pooled], 1)  # B x (T+1) x D
        if self.interaction != "dot":  # cat, and dcn's x0
            inter = z.reshape(B, (T + 1) * D)
            if self.cross is not None:
                inter = self.cross(inter)
            return self.top(inter).squeeze(1)
        gram = torch.bmm(z, z.transpose(1, 2))
        li, lj = torch.tril_indices(T + 1, T + 1, offset=-1)
        inter = torch.cat([x, gram[:, li, lj]], 1)
        return self.top(inter).squeeze(1)


def auc_of(scores, labels):
    """Exact AUC with tied scores sharing their mean rank."""
    s, order = torch.sort(scores.double())
    y = labels.double()[order]
    ranks = torch.empty_like(s)
    uniq, inv, counts = torch.unique_consecutive(s, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    mean_rank = ends - (counts.double() - 1) / 2
    ranks = mean_rank[inv]
    npos = y.sum()
    nneg = len(y) - npos
    return float((ranks[y > 0].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="a dlrm_dump file")
    ap.add_argument("--plan", required=True, help="a plan of gradsync shard --out")
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--eval", type=int, default=16384)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--embed-lr", type=float, default=0.05)
    ap.add_argument("--store", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    P = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    # (/sys/class/net shows the host's interfaces, not this namespace's.)
    if "gs0" in (name for _, name in socket.if_nameindex()):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "gs0")
    dist.init_process_group("gloo", init_method=f"file://{a.store}", rank=rank, world_size=P)
    A2A.group = dist.new_group(list(range(P)))
    head, (xtr, ytr, itr), (xev, yev, iev), init_params, init_tables = read_data(a.data)
    plan = json.load(open(a.plan))
    T, L = len(head["tables"]), head["pooling"]
    G = a.global_batch
    if G % P:
        raise SystemExit(f"dlrm_torch: --global-batch {G} does not split over {P} ranks")
    B = G // P
    if plan["ranks"] != P or len(plan["tables"]) != T:
        raise SystemExit(f"dlrm_torch: the plan is for {plan['ranks']} ranks and "
                         f"{len(plan['tables'])} tables, this job has {P} and {T}")
    if a.steps * G > head["train"] or a.eval > head["eval"]:
        raise SystemExit("dlrm_torch: the data file has fewer samples than the run needs")
    dim = head["tables"][0]["dim"]
    # A shard (table, first column, last column + 1) of whole rows lives on
    # one rank: tw is one shard of every column, cw column blocks, each its
    # own bag (embed_update sums their rows' squares); dp tables are
    # replicated.
    shards, dp, kinds = [], [], collections.Counter()
    for t, tab in enumerate(plan["tables"]):
        if tab["rows"] != head["tables"][t]["rows"]:
            raise SystemExit(f"dlrm_torch: table {tab['name']}: {tab['rows']} rows in the plan, "
                             f"{head['tables'][t]['rows']} in the data")
        kinds[tab["sharding"]] += 1
        if tab["sharding"] == "dp":
            dp.append((t, tab["rows"]))
            continue
        if tab["sharding"] not in ("tw", "cw"):
            raise SystemExit(f"dlrm_torch: table {tab['name']}: sharding {tab['sharding']} "
                             "(this peer follows tw, cw and dp plans)")
        for sh in plan["shards"]:
            if sh["table"] == t:
                shards.append((sh["rank"], t, sh["col_lo"], sh["col_hi"]))
    shards.sort()
    mine = [(t, lo, hi) for q, t, lo, hi in shards if q == rank]
    width = [sum(hi - lo for q2, _, lo, hi in shards if q2 == q) for q in range(P)]
    torch.manual_seed(1)  # the same replicated MLPs on every rank
    bottom = [int(w) for w in head["bottom"].split("-")]
    inter = head.get("interaction", "dot")
    iwidth = bottom[-1] + (T + 1) * T // 2 if inter == "dot" else (T + 1) * dim
    top = [iwidth] + [int(w) for w in head["top"].split("-")]
    cross = None
    if inter == "dcn":  # its layers and rank from the dump's tensors
        nl = sum(1 for q in head["params"] if q["name"].endswith(".V"))
        rk = next(q["count"] for q in head["params"] if q["name"] == "cross.0.V") // iwidth
        cross = (iwidth, nl, rk)
    rep = nn.parallel.DistributedDataParallel(Replicated(bottom, top, dp, dim, inter, cross))
    torch.manual_seed(100 + rank)
    bags = {sh: make_bag(head["tables"][sh[0]]["rows"], sh[2] - sh[1], True) for sh in mine}
    acc = {sh: torch.zeros(head["tables"][sh[0]]["rows"]) for sh in mine}
    # gradsync's initial weights, so that both start alike (the
    # initialisers above only shape the tensors).
    with torch.no_grad():
        for part in ("bottom", "top"):
            linears = [m for m in getattr(rep.module, part) if isinstance(m, nn.Linear)]
            for i, lin in enumerate(linears):
                lin.weight.copy_(init_params[f"{part}.{i}.weight"].view_as(lin.weight))
                lin.bias.copy_(init_params[f"{part}.{i}.bias"])
        if rep.module.cross is not None:
            for i, (v, w) in enumerate(zip(rep.module.cross.V, rep.module.cross.W)):
                v.weight.copy_(init_params[f"cross.{i}.V"].view_as(v.weight))
                w.weight.copy_(init_params[f"cross.{i}.W"].view_as(w.weight))
                w.bias.copy_(init_params[f"cross.{i}.bias"])
        for sh, bag in bags.items():
            bag.weight.copy_(init_tables[sh[0]][:, sh[1]:sh[2]])
        for t, m in rep.module.dp.items():
            m.weight.copy_(init_tables[int(t)])
    dp_acc = {t: torch.zeros(rows) for t, rows in dp}
    opt = torch.optim.SGD([p for n, p in rep.named_parameters() if ".dp." not in n], lr=a.lr)
    eps = 1e-8
    goffs = torch.arange(0, G * L, L)
    # Where each received column goes in the B x (T * dim) pooled matrix.
    mp_cols = torch.tensor([t * dim + c for _, t, lo, hi in shards for c in range(lo, hi)],
                           dtype=torch.long)

    def forward(dense, ids, first, nglob):
        """Logits of this rank's B samples of the global batch at `first`."""
        n = nglob // P
        sl = slice((first + rank * n) * L, (first + (rank + 1) * n) * L)
        parts = [bags[sh](ids[sh[0], first * L:(first + nglob) * L], goffs[:nglob])
                 for sh in mine]
        send = torch.cat(parts, 1) if parts else torch.zeros(nglob, 0)
        send = send.view(P, n, width[rank]).reshape(-1)  # by destination rank
        if torch.is_grad_enabled() and not send.requires_grad:
            send.requires_grad_()  # a rank without shards still joins the backward exchange
        got = A2A.apply(send, [n * width[rank]] * P, [n * width[q] for q in range(P)])
        # Each source rank's block (n x its columns) into their columns;
        # index_copy carries the gradient back to `got`.
        chunks, at = [], 0
        for q in range(P):
            if width[q]:
                chunks.append(got[at:at + n * width[q]].view(n, width[q]))
                at += n * width[q]
        pooled = torch.zeros(n, T * dim)
        if chunks:
            pooled = pooled.index_copy(1, mp_cols, torch.cat(chunks, 1))
        dp_ids = {t: ids[t, sl] for t, _ in dp}
        return rep(dense[first + rank * n:first + (rank + 1) * n], pooled.view(n, T, dim),
                   dp_ids, T, L)

    def touched(g):
        """A gradient's touched rows and their gradients."""
        if g.is_sparse:
            g = g.coalesce()
            return g.indices()[0], g.values()
        rows = torch.nonzero(g.abs().sum(1)).squeeze(1)
        return rows, g[rows]

    def rowwise_adagrad(w, state, rows, v, lr, inc=None):
        state.index_add_(0, rows, (v * v).mean(1) if inc is None else inc)
        w.index_add_(0, rows, -lr * v / (state[rows].sqrt() + eps).unsqueeze(1))

    # Row-wise Adagrad's accumulator takes the mean of g^2 over a whole row,
    # so the column blocks of a cw table add their sums of squares of its
    # touched rows (gradsync's blocks exchange theirs): every rank knows
    # those rows (it reads the whole batch's ids), so one all-reduce a step
    # of every split table's rows, zero where a rank holds no block, sums them.
    split = sorted({t for _, t, lo, hi in shards if hi - lo < dim})

    def embed_update(s):
        where, at = {}, 0
        for t in split:
            u = torch.unique(itr[t, s * G * L:(s + 1) * G * L])
            where[t] = (at, u.numel())
            at += u.numel()
        sq = torch.zeros(at)
        grads = {}
        for sh, b in bags.items():
            if b.weight.grad is None:
                continue
            rows, v = touched(b.weight.grad / P)
            grads[sh] = (rows, v)
            if sh[0] in where:
                o, n = where[sh[0]]
                if rows.numel() != n:
                    raise SystemExit(f"dlrm_torch: table {sh[0]}: {rows.numel()} touched rows "
                                     f"in a block's gradient, {n} ids in the batch")
                sq[o:o + n] += (v * v).sum(1)
        if split:
            dist.all_reduce(sq)
        for sh, (rows, v) in grads.items():
            inc = None
            if sh[0] in where:
                o, n = where[sh[0]]
                inc = sq[o:o + n] / dim
            rowwise_adagrad(bags[sh].weight, acc[sh], rows, v, a.embed_lr, inc)

    def evaluate():
        rounds = (a.eval + G - 1) // G
        logits, labels = [], []
        with torch.no_grad():
            for k in range(rounds):
                logits.append(forward(xev, iev, k * G, G))
                labels.append(yev[k * G + rank * B:k * G + (rank + 1) * B])
        mine_l = torch.cat(logits)
        mine_y = torch.cat(labels)
        all_l = [torch.empty_like(mine_l) for _ in range(P)]
        all_y = [torch.empty_like(mine_y) for _ in range(P)]
        dist.all_gather(all_l, mine_l)
        dist.all_gather(all_y, mine_y)
        lg, y = torch.cat(all_l), torch.cat(all_y)
        ll = F.binary_cross_entropy_with_logits(lg, y).item()
        return auc_of(lg, y), ll

    for epoch in range(1, a.epochs + 1):
        dist.barrier()
        t0 = time.time()
        lsum = 0.0
        for s in range(a.steps):
            for b in bags.values():
                b.weight.grad = None
            opt.zero_grad(set_to_none=True)
            for m in rep.module.dp.values():
                m.weight.grad = None
            z = forward(xtr, itr, s * G, G)
            y = ytr[s * G + rank * B:s * G + (rank + 1) * B]
            loss = F.binary_cross_entropy_with_logits(z, y)
            loss.backward()
            opt.step()
            with torch.no_grad():
                embed_update(s)
                for t, m in rep.module.dp.items():
                    if m.weight.grad is not None:
                        rows, v = touched(m.weight.grad)
                        rowwise_adagrad(m.weight, dp_acc[int(t)], rows, v, a.embed_lr)
            lsum += loss.item()
        dist.barrier()
        dt = time.time() - t0
        local = torch.tensor([lsum / a.steps])
        dist.all_reduce(local)
        auc, ll = evaluate()
        if rank == 0:
            print(json.dumps({"peer": "pytorch-dlrm-gloo", "torch": torch.__version__,
                              "ranks": P, "global_batch": G, "epoch": epoch,
                              "epoch_s": dt, "samples_per_s": a.steps * G / dt,
                              "step_ms": 1e3 * dt / a.steps,
                              "train_loss": local.item() / P, "auc": auc, "log_loss": ll,
                              "teacher_auc": head["teacher_auc"],
                              "tables": dict(kinds)}), flush=True)
    # gloo's teardown (destroy_process_group, or the pairs' destructors at
    # exit) hung after both epochs had printed in 2 of 6 runs here, every
    # rank idle: every rank has finished its last collective at the
    # barrier, so each leaves without tearing gloo down.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
