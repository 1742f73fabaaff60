#!/usr/bin/env python3
"""Driver of bench/nn/throughput.sh: runs the C benchmark (nn_throughput) and
the PyTorch peer (torch_throughput.py) alternately for several rounds, so
that both see the same machine conditions, and writes the median and best
images/s of each, their ratio and the environment as Markdown and JSON."""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=env).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=60).stdout.strip()
    except Exception:
        return ""


def environment():
    cpu, extra = "", []
    for line in sh("lscpu").splitlines():
        key, _, val = line.partition(":")
        if key == "Model name":
            cpu = val.strip()
        elif key in ("CPU family", "Model", "Thread(s) per core", "L2 cache", "L3 cache"):
            extra.append(f"{key.lower()} {val.strip()}")
    flags = sh("grep -m1 -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\\n' ' '")
    if extra or flags:
        cpu += " (" + ", ".join(extra + ([flags.strip()] if flags else [])) + ")"
    torch_info = run_json([sys.executable, "-c",
                           "import json,torch;print(json.dumps({'torch': torch.__version__,"
                           "'mkldnn': torch.backends.mkldnn.is_available()}))"])[0]
    return {
        "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "loadavg_start": sh("cut -d' ' -f1-3 /proc/loadavg"),
        "kernel": platform.release(),
        "compiler": sh("cc --version | head -1"),
        "openblas": sh("pkg-config --modversion openblas") or sh(
            "dpkg-query -W -f='${Version}' libopenblas0-pthread"),
        "torch": torch_info["torch"],
        "torch_mkldnn": torch_info["mkldnn"],
        "python": platform.python_version(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        # dirty as bench/lib.sh counts it: results rewritten by drivers aside
        "git": sh("git rev-parse --short HEAD")
        + (" (dirty)" if sh("git status --porcelain --untracked-files=no -- . "
                            "':(exclude)bench/results'") else ""),
    }


# The C models' variants measured beside the default (where they apply:
# see main): name, the binary's extra arguments and environment, and the
# sentence that introduces their table.
VARIANTS = [
    {"name": "nchw", "args": [], "env": {"GRADSYNC_NN_BLOCKED": "0"},
     "text": "The same C models on oneDNN without blocked passes "
             "(`GRADSYNC_NN_BLOCKED=0`: activations NCHW between layers, each "
             "convolution reordering its input and output, batch-norm on the "
             "loops), in the same rounds; the ratio is NCHW / PyTorch."},
    {"name": "blas", "args": ["--backend", "blas"], "env": {},
     "text": "The same C models on the BLAS backend (`--backend blas`), in the same "
             "rounds; the ratio is BLAS / PyTorch."},
    {"name": "bf16", "args": ["--precision", "bf16"], "env": {},
     "text": "The same C models in bf16 (`--precision bf16`: convolutions and linear "
             "layers in bfloat16 on oneDNN, fp32 weights, gradients and everything "
             "else), in the same rounds; the ratio is bf16 / PyTorch fp32."},
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", default="cnn,resnet")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    env = environment()
    models = a.models.split(",")
    # The C models on the build's default backend ("gradsync": oneDNN where
    # the build has it) and variants of them (VARIANTS, where they apply), in
    # the same rounds as PyTorch.
    probe = run_json([a.bin, "--batch", "2", "--seconds", "0", "--warmup", "0",
                      "--models", models[0]])[0]
    env["gradsync_backend"] = probe.get("backend", "blas")
    # bf16 (train --precision bf16) where this CPU computes it natively; the
    # probe's error says why not elsewhere.
    bf16 = subprocess.run([a.bin, "--batch", "2", "--seconds", "0", "--warmup", "0",
                           "--models", models[0], "--precision", "bf16"],
                          capture_output=True, text=True)
    env["gradsync_bf16"] = ("yes" if bf16.returncode == 0 else
                            "no: " + bf16.stderr.strip().splitlines()[-1])
    applies = {"blas": env["gradsync_backend"] != "blas",
               "nchw": env["gradsync_backend"] == "dnnl",
               "bf16": bf16.returncode == 0}
    variants = [v for v in VARIANTS if applies[v["name"]]]
    impls = ["gradsync"] + ["gradsync_" + v["name"] for v in variants] + ["pytorch"]
    samples = {m: {i: [] for i in impls} for m in models}
    ratios = {m: {i: [] for i in impls if i != "pytorch"} for m in models}
    c_cmd = [a.bin, "--batch", str(a.batch), "--seconds", str(a.seconds)]
    t_cmd = [sys.executable, os.path.join(HERE, "torch_throughput.py"),
             "--batch", str(a.batch), "--seconds", str(a.seconds)]
    detail = {}
    for r in range(a.rounds):
        for m in models:
            # Alternate who goes first, so neither always gets the cooler
            # (or the busier) half of a round.
            order = impls if r % 2 == 0 else impls[::-1]
            got = {}
            for impl in order:
                run_env = None
                if impl == "pytorch":
                    cmd = t_cmd + ["--models", m]
                else:
                    cmd = c_cmd + ["--models", m]
                    for v in variants:
                        if impl == "gradsync_" + v["name"]:
                            cmd += v["args"]
                            run_env = dict(os.environ, **v["env"])
                res = run_json(cmd, run_env)[0]
                got[impl] = res["images_per_s"]
                samples[m][impl].append(res["images_per_s"])
                detail.setdefault(m, {})[impl] = res
            for i in ratios[m]:
                ratios[m][i].append(got[i] / got["pytorch"])
            print(f"round {r + 1}/{a.rounds} {m}: " + ", ".join(
                f"{i} {got[i]:.1f}" for i in impls) + " images/s, ratio "
                  f"{ratios[m]['gradsync'][-1]:.3f}", file=sys.stderr, flush=True)
    env["loadavg_end"] = sh("cut -d' ' -f1-3 /proc/loadavg")
    summary = []
    for m in models:
        g, t = samples[m]["gradsync"], samples[m]["pytorch"]
        summary.append({
            "model": m,
            "params": detail[m]["gradsync"]["params"],
            "params_pytorch": detail[m]["pytorch"]["params"],
            "batch": a.batch,
            "gradsync_median": statistics.median(g), "gradsync_best": max(g),
            "pytorch_median": statistics.median(t), "pytorch_best": max(t),
            "ratio_median_of_rounds": statistics.median(ratios[m]["gradsync"]),
            "ratio_best": max(g) / max(t),
            "gradsync_samples": g, "pytorch_samples": t, "ratios": ratios[m]["gradsync"],
        })
        for v in variants:
            n = v["name"]
            gv, rv = samples[m]["gradsync_" + n], ratios[m]["gradsync_" + n]
            summary[-1].update({
                f"gradsync_{n}_median": statistics.median(gv),
                f"gradsync_{n}_best": max(gv),
                f"ratio_{n}_median_of_rounds": statistics.median(rv),
                f"gradsync_{n}_samples": gv, f"ratios_{n}": rv,
            })
    with open(a.out + ".json", "w") as f:
        json.dump({"env": env, "rounds": a.rounds, "seconds_per_run": a.seconds,
                   "results": summary}, f, indent=2)
        f.write("\n")
    lines = [
        "# nn training throughput: gradsync vs PyTorch (one process, one thread)",
        "",
        f"Batch {a.batch}; forward, softmax cross-entropy, backward and an SGD "
        "step with momentum on a fixed synthetic 1x28x28 batch. "
        f"{a.rounds} rounds of {a.seconds:g} s per implementation and model, "
        "alternating which goes first; images/s. The ratio is gradsync / "
        "PyTorch (> 1: gradsync is faster), the median of the per-round ratios.",
        "Produced by `bench/nn/throughput.sh`. The machine may be shared: the "
        "load averages below, against the core count, say how busy it was, and "
        "the per-round ratios show the spread that caused.",
        "",
        "| model | params | gradsync median | gradsync best | PyTorch median | "
        "PyTorch best | ratio (median of rounds) | ratio (best/best) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summary:
        lines.append(
            f"| {s['model']} | {s['params']:,} | {s['gradsync_median']:.1f} | "
            f"{s['gradsync_best']:.1f} | {s['pytorch_median']:.1f} | "
            f"{s['pytorch_best']:.1f} | {s['ratio_median_of_rounds']:.3f} | "
            f"{s['ratio_best']:.3f} |")
    lines += ["", f"gradsync's backend: {env['gradsync_backend']} (docs/COMPUTE.md).",
              "", "Per-round ratios: " + "; ".join(
        f"{s['model']}: " + ", ".join(f"{x:.3f}" for x in s["ratios"]) for s in summary)]
    for v in variants:
        n = v["name"]
        lines += [
            "", v["text"], "",
            f"| model | {n} median | {n} best | ratio (median of rounds) |",
            "|---|---:|---:|---:|"]
        for s in summary:
            lines.append(
                f"| {s['model']} | {s[f'gradsync_{n}_median']:.1f} | "
                f"{s[f'gradsync_{n}_best']:.1f} | {s[f'ratio_{n}_median_of_rounds']:.3f} |")
        lines += ["", f"Per-round ratios ({n}): " + "; ".join(
            f"{s['model']}: " + ", ".join(f"{x:.3f}" for x in s[f"ratios_{n}"])
            for s in summary)]
    lines += ["", "## Environment", ""]
    for k, v in env.items():
        lines.append(f"- {k}: {v}")
    lines.append("")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
