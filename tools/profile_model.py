#!/usr/bin/env python3
"""Write a gradsync model profile (JSON, see docs/PLANNING.md) for a PyTorch model.

The profile lists every parameter tensor in registration (forward) order with
its exact element count, and the per-tensor backward time measured with a
gradient hook on each parameter: a tensor's ``backward_s`` is the time from the
previous gradient being ready (the tensor after it in forward order) to its own
gradient being ready; the first gradient of backward is measured from the start
of ``loss.backward()``. ``forward_s`` is the forward pass including the loss.

Times are means over the measured iterations after warm-up, on the device
this script runs on (CPU here, with a fixed thread count). Nothing is
downloaded: torchvision models are built with ``weights=None`` and BERT-base
is built from ``torch.nn`` modules with the exact tensor shapes of Hugging
Face's ``bert-base-uncased`` (109,482,240 parameters including the pooler).

Usage:
  /usr/bin/python3 tools/profile_model.py resnet50 -o profiles/resnet50.json
  /usr/bin/python3 tools/profile_model.py --list

To profile your own model, import ``profile`` from this file and call it with
the module and a function that returns a scalar loss for one batch.
"""
import argparse
import json
import math
import platform
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Known totals, checked after building each model (from the architectures'
# published definitions as implemented by torchvision 0.14 and HF).
KNOWN_TOTALS = {
    "resnet50": 25_557_032,
    "resnet152": 60_192_808,
    "vgg16": 138_357_544,
    "googlenet": 6_624_904,
    "densenet201": 20_013_928,
    "inception_v3": 23_834_568,
    "bert_base": 109_482_240,
}


# ---------------------------------------------------------------- BERT-base
class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, s, h)


class BertDenseLN(nn.Module):
    """HF's BertSelfOutput / BertOutput: dense, dropout, residual LayerNorm."""

    def __init__(self, fan_in, hidden):
        super().__init__()
        self.dense = nn.Linear(fan_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.self = BertSelfAttention(hidden, heads)
        self.output = BertDenseLN(hidden, hidden)

    def forward(self, x):
        return self.output(self.self(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.dense = nn.Linear(hidden, inter)

    def forward(self, x):
        return F.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.attention = BertAttention(hidden, heads)
        self.intermediate = BertIntermediate(hidden, inter)
        self.output = BertDenseLN(inter, hidden)

    def forward(self, x):
        a = self.attention(x)
        return self.output(self.intermediate(a), a)


class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden, max_pos, types):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, ids, types):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        e = (self.word_embeddings(ids) + self.position_embeddings(pos) +
             self.token_type_embeddings(types))
        return self.LayerNorm(e)


class BertEncoder(nn.Module):
    def __init__(self, n, hidden, heads, inter):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(hidden, heads, inter) for _ in range(n))

    def forward(self, x):
        for l in self.layer:
            x = l(x)
        return x


class BertPooler(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class BertBase(nn.Module):
    """bert-base-uncased's BertModel: the same tensors, names and order."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, inter=3072,
                 max_pos=512, types=2):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, max_pos, types)
        self.encoder = BertEncoder(layers, hidden, heads, inter)
        self.pooler = BertPooler(hidden)

    def forward(self, ids, types):
        seq = self.encoder(self.embeddings(ids, types))
        return seq, self.pooler(seq)


# ------------------------------------------------------------- the profiler
def profile(model, step, warmup=2, iters=5):
    """Times forward and per-parameter gradient readiness.

    step() runs a forward pass and returns a scalar loss. Returns
    (forward_s, tensors, reordered) with tensors in registration order.
    """
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    stamps = [0.0] * len(named)

    def make_hook(i):
        def hook(grad):
            stamps[i] = time.perf_counter()
            return grad
        return hook

    handles = [p.register_hook(make_hook(i)) for i, (_, p) in enumerate(named)]
    fwd_total = 0.0
    rel_total = [0.0] * len(named)
    for it in range(warmup + iters):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss = step()
        t1 = time.perf_counter()
        loss.backward()
        if it >= warmup:
            fwd_total += t1 - t0
            for i in range(len(named)):
                rel_total[i] += stamps[i] - t1
    for h in handles:
        h.remove()
    rel = [r / iters for r in rel_total]
    # gradsync's model assumes backward produces gradients in reverse
    # registration order. Where autograd produced one earlier than a tensor
    # registered after it, clamp its ready time up to that later tensor's,
    # so ready times are monotone and the backward total is unchanged.
    tensors = [None] * len(named)
    prev = 0.0
    reordered = 0
    for i in range(len(named) - 1, -1, -1):
        ready = rel[i]
        if ready < prev:
            reordered += 1
            ready = prev
        name, p = named[i]
        tensors[i] = {"name": name, "numel": p.numel(), "dtype": "f32",
                      "backward_s": round(ready - prev, 9)}
        prev = ready
    return fwd_total / iters, tensors, reordered


def build(name, batch):
    import torchvision.models as tvm
    if name == "bert_base":
        model = BertBase()
        seq = 128
        ids = torch.randint(0, 30522, (batch, seq))
        types = torch.zeros(batch, seq, dtype=torch.long)

        def step():
            seqout, pooled = model(ids, types)
            return pooled.pow(2).mean() + seqout.pow(2).mean()
        return model, step, "sequence length 128, loss = mean squares of outputs"
    kwargs = {"weights": None}
    size = 224
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    if name == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=True)
        size = 299
    model = getattr(tvm, name)(**kwargs)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 1000, (batch,))

    def step():
        return F.cross_entropy(model(x), y)
    note = f"{size}x{size} random images, cross-entropy on random labels"
    if name in ("googlenet", "inception_v3"):
        note += ", aux_logits=False"
    return model, step, note


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", help="torchvision model name or bert_base")
    ap.add_argument("-o", "--output", help="profile JSON to write (default stdout)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--list", action="store_true", help="list the checked models")
    a = ap.parse_args()
    if a.list:
        print("\n".join(sorted(KNOWN_TOTALS)))
        return 0
    if not a.model:
        ap.error("a model name is required")
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model, step, note = build(a.model, a.batch)
    model.train()
    total = sum(p.numel() for p in model.parameters())
    if a.model in KNOWN_TOTALS and total != KNOWN_TOTALS[a.model]:
        print(f"{a.model}: {total} parameters, expected {KNOWN_TOTALS[a.model]}",
              file=sys.stderr)
        return 1
    t = time.time()
    fwd, tensors, reordered = profile(model, step, a.warmup, a.iters)
    wall = time.time() - t
    bwd = sum(x["backward_s"] for x in tensors)
    out = {
        "name": a.model,
        "batch_size": a.batch,
        "device": f"{cpu_model()}, {a.threads} thread(s), PyTorch {torch.__version__}",
        "source": (f"tools/profile_model.py: {note}; batch {a.batch}; means of "
                   f"{a.iters} iterations after {a.warmup} warm-up; forward_s timed "
                   f"to the loss; backward_s from per-parameter gradient hooks "
                   f"(time.perf_counter); {reordered} of {len(tensors)} tensors had "
                   f"gradients ready before a later-registered tensor and were "
                   f"clamped to it; {total} parameters (checked against the "
                   f"published total); profiled in {wall:.0f} s"),
        "total_numel": total,
        "forward_s": round(fwd, 9),
        "backward_s_total": round(bwd, 9),
        "tensors": tensors,
    }
    # One tensor per line keeps the file readable and diffable.
    head = {k: v for k, v in out.items() if k != "tensors"}
    lines = [json.dumps(head)[:-1] + ', "tensors": [']
    lines.append(",\n".join("  " + json.dumps(x) for x in tensors))
    lines.append("]}")
    text = "\n".join(lines)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    print(f"{a.model}: {len(tensors)} tensors, {total} params, forward "
          f"{fwd*1e3:.1f} ms, backward {bwd*1e3:.1f} ms, {wall:.0f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
