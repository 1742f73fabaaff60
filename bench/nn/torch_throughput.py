#!/usr/bin/env python3
"""PyTorch peer of bench/nn/nn_throughput.c: the same CNN and small ResNet,
one thread, SGD with momentum, batch 64, synthetic 28x28 inputs. Prints one
JSON line per model: {"model", "params", "batch", "images_per_s", ...}."""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.proj is None else self.proj(x)))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


MODELS = {"mlp": MLP, "cnn": CNN, "resnet": ResNet}


def bench(name, batch, warmup, seconds):
    torch.manual_seed(1)
    model = MODELS[name]()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    for _ in range(warmup):
        step()
    iters, t0 = 0, time.perf_counter()
    while True:
        step()
        iters += 1
        dt = time.perf_counter() - t0
        if dt >= seconds and iters >= 5:
            break
    return {"model": name, "impl": "pytorch",
            "params": sum(p.numel() for p in model.parameters()),
            "batch": batch, "iters": iters, "seconds": dt,
            "images_per_s": iters * batch / dt}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="cnn,resnet")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    for m in a.models.split(","):
        r = bench(m, a.batch, a.warmup, a.seconds)
        r.update(torch=torch.__version__, threads=torch.get_num_threads(),
                 mkldnn=torch.backends.mkldnn.is_available(),
                 openblas_coretype=os.environ.get("OPENBLAS_CORETYPE", ""))
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
