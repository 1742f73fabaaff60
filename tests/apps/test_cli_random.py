#!/usr/bin/python3
"""Random argument vectors for every verb of gradsync (seeded, reproducible).

For each verb, argument vectors are drawn from its option list: valid and
invalid values, missing values, repeated options, unknown options and
garbage words, in random order. Each run must end within a bound (killed
otherwise, which fails) with exit status 0, 1 or 2, without a signal and
without a sanitizer report (bound: 20 s, 60 s for train and run). The seed is printed first; a failure prints the
argv that caused it, so that

    test_cli_random.py GRADSYNC --seed S --runs N

reproduces it. Usage: test_cli_random.py GRADSYNC [--seed S] [--runs N]
"""
import os
import random
import subprocess
import sys
import tempfile
import time

# Each run's bound: 20 s; 60 s for train (it trains a few steps) and run
# (mpirun starts the ranks), which take 5-10 s alone on a machine shared by
# many builds.
BOUND_S = {"train": 60.0, "run": 60.0}
DEFAULT_BOUND_S = 20.0
SANITIZER = (b"ERROR: AddressSanitizer", b"runtime error:", b"WARNING: ThreadSanitizer",
             b"ERROR: LeakSanitizer")
GARBAGE = ["", "-", "--", "x", "-1", "0", "1.5", "nan", "inf", "1e999", "0x10", "010",
           "\xff", "  1", "+1", "4K7", "--json", "é", "a" * 300]


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    gs = os.path.abspath(args[0])
    seed = int(os.environ.get("CLI_RANDOM_SEED", int(time.time()) % 100000))
    runs = 150
    if "--seed" in args:
        seed = int(args[args.index("--seed") + 1])
    if "--runs" in args:
        runs = int(args[args.index("--runs") + 1])
    print(f"seed {seed}, {runs} runs (reproduce: {sys.argv[0]} GRADSYNC --seed {seed} "
          f"--runs {runs})", flush=True)
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="gs-cli-random-")
    prof = os.path.join(tmp, "small.json")
    with open(prof, "w") as f:
        f.write('{"name": "small", "forward_s": 0.001, "tensors": ['
                '{"name": "w", "numel": 256, "backward_s": 0.0005},'
                '{"name": "b", "numel": 8, "backward_s": 0.0002}]}')
    bad_prof = os.path.join(tmp, "bad.json")
    with open(bad_prof, "wb") as f:
        f.write(b'{"name": "b\xff\\u0001", "forward_s": -1, "tensors": []}')

    # gradsync cluster simulate's inputs: a workload of 3 jobs and its speeds.
    cwork = os.path.join(tmp, "cw.csv")
    cspeed = os.path.join(tmp, "cs.csv")
    with open(cwork, "w") as f:
        f.write("name,time,model,nodes,samples\nA,0,m,2,200\nB,1,m,1,100\nC,2,m,4,50\n")
    with open(cspeed, "w") as f:
        f.write("model,nodes,step_time_s,samples_per_step\nm,1,1,10\nm,2,1,18\nm,4,1,30\n")

    # Per verb: (base argv that keeps valid runs short, {option: values}); a
    # value of None means a flag. Values mix valid and invalid ones.
    policies = ["wfbp", "single", "bucket", "bucket:1", "bucket:0", "mgwfbp", "optimal",
                "dear", "auto", "all", "fast"]
    paths = [prof, bad_prof, os.path.join(tmp, "none.json"), tmp, "/proc/x.json"]
    verbs = {
        "bench": (["--max-bytes", "16K", "--iters", "2", "--warmup", "0", "--budget", "0.5"], {
            "--op": ["allreduce", "reduce_scatter", "allgather", "bcast", "alltoall", "sum"],
            "--algo": ["all", "auto", "mpi", "ring", "rd", "rabenseifner", "hier",
                       "pipeline", "binomial", "pairwise", "best"],
            "--min-bytes": ["1", "4", "1K", "4K", "0", "-4", "1.5K", "64G", "65G"],
            "--max-bytes": ["8K", "1T"],
            "--step": ["2", "4", "1024", "1", "0", "1025", "2.0"],
            "--dtype": ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "f8"],
            "--redop": ["sum", "avg", "min", "max", "prod", "xor"],
            "--iters": ["1", "3", "0"], "--warmup": ["1", "-1"],
            "--budget": ["0.1", "0", "86401", "nan"],
            "--json": None, "--no-calibrate": None,
            "--cost-out": [os.path.join(tmp, "cost.json"), os.path.join(tmp, "no/x.json"),
                           tmp, ""],
        }),
        "plan": ([], {
            "--profile": paths, "--policy": policies,
            "--a": ["0", "1e-5", "3600", "3601", "-1", "nan"],
            "--b": ["0", "1e-9", "1", "2", "inf"],
            "--net": ["1GbE", "10GbE", "25GbE", "100GbIB", "shm", "2GbE"],
            "--workers": ["1", "4", "16", "0", "16777217"], "--nodes": ["1", "2", "3", "0"],
            "--algo": ["auto", "ring", "rd", "rabenseifner", "hier", "x"],
            "--compute-scale": ["0.5", "1e6", "0", "1e7"],
            "--json": None, "--verbose": None,
        }),
        "replay": (["--iters", "1", "--warmup", "0", "--profile", prof], {
            "--policy": policies, "--rounds": ["1", "2", "0", "1001"],
            "--time-scale": ["0.5", "1", "2", "0", "1e-7", "1e4", "-1"],
            "--json": None, "--profile": paths,
        }),
        "train": (["--synthetic", "64", "--epochs", "1", "--batch", "32", "--max-steps", "2",
                   "--model", "mlp"], {
            "--model": ["mlp", "cnn", "resnet", "vgg"], "--lr": ["0.01", "0", "-1", "nan"],
            "--momentum": ["0.9", "1.5"], "--nesterov": None, "--weight-decay": ["0", "-1"],
            "--schedule": ["const", "step", "cosine", "linear"],
            "--warmup-epochs": ["0", "1", "-1"], "--policy": policies,
            "--seed": ["1", "-1", "x"], "--dropout": ["0", "0.5", "1.5"], "--json": None,
            "--checkpoint": [os.path.join(tmp, "ck"), "/proc/ck"], "--resume": None,
            "--data": [tmp, os.path.join(tmp, "none")],
        }),
        "simulate": (["--workers", "4"], {
            "--profile": paths, "--policy": policies,
            "--workers": ["1", "8", "0", "1048577", "2.5"], "--per-node": ["1", "2", "3", "0"],
            "--net": ["1GbE", "10GbE", "shm", "2GbE"],
            "--intra": ["1e-6,1e-10", "1e-6", "x,y", "-1,0"],
            "--inter": ["5e-5,8e-9", "nan,1"],
            "--cost": [os.path.join(tmp, "none.json"), prof],
            "--algo": ["auto", "ring", "rd", "hier", "x"],
            "--compress": ["topk:0.01", "fp16", "auto:topk:0.01", "topk:2", "zz"],
            "--iters": ["1", "3", "0"], "--jitter": ["0", "0.1", "11", "nan"],
            "--jitter-dist": ["lognormal", "normal", "cauchy"],
            "--jitter-scope": ["iteration", "op", "x"], "--seed": ["1", "-1", "x"],
            "--compute-scale": ["0.5", "0", "1e7"], "--json": None,
            "--trace": [os.path.join(tmp, "t.json"), os.path.join(tmp, "no/t.json"), tmp],
        }),
        "shard": (["--tables", "kaggle", "--ranks", "4"], {
            "--tables": ["kaggle", "terabyte", "mlperf", prof, os.path.join(tmp, "none.json")],
            "--scale": ["0.01", "0", "2", "x"], "--pooling": ["1", "10", "-1"],
            "--ranks": ["1", "8", "0", "65537"], "--per-node": ["1", "2", "3", "0"],
            "--batch": ["1", "8192", "0", "1.5"], "--net": ["1gbit", "shm", "2xbit"],
            "--mem-cap": ["1M", "1G", "0", "x"],
            "--sharding": ["auto", "tw", "rw", "cw", "twrw", "dp", "x"],
            "--precision": ["fp16", "fp8"], "--lookup": ["4e-8,4e-10", "x", "-1,0"],
            "--out": [os.path.join(tmp, "plan.json"), "/proc/x.json"], "--json": None,
        }),
        "cluster": (["simulate", "--workload", cwork, "--tables", cspeed, "--nodes", "4"], {
            "--workload": [cwork, prof, os.path.join(tmp, "none.csv"), tmp],
            "--tables": [cspeed, cwork, os.path.join(tmp, "none.csv"), tmp],
            "--nodes": ["1", "4", "0", "1048577", "x"], "--gpus-per-node": ["4", "0", "10"],
            "--policy": ["static", "dorm", "goodput", "all", "fifo"],
            "--restart-penalty": ["0", "30", "-1", "nan"], "--interval": ["0", "60", "x"],
            "--time-limit": ["0.01", "0", "1e9"], "--fairness-weight": ["0", "2", "-1"],
            "--adjust-weight": ["0.1", "x"], "--node-loss": ["5:1", "5:4", "x", "1:0"],
            "--trace-out": [os.path.join(tmp, "ct.csv"), "/proc/x.csv", tmp], "--json": None,
        }),
        "run": (["-np", "1"], {
            "--per-node": ["1", "2", "0", "x"], "--net": ["bogus", "0bit", "1e3gbit"],
            "--mpirun": ["/nonexistent/mpirun", ""], "-v": None,
            "--hosts": ["localhost:2", "h1:0", "a,,b", ""], "--hostfile": ["/nonexistent", ""],
            "--iface": ["lo", "a;b"], "--oversubscribe": None, "--dry-run": None,
            "--elastic": ["1:2", "1", "2:1", "0:1", "x"], "--max-restarts": ["0", "1", "-1"],
            "--discover": ["/nonexistent", ""], "--discover-every": ["0.5", "0", "x"],
            "--resize-interval": ["0", "1", "-1"], "--min-wait": ["0", "1", "x"],
            "--events": [os.path.join(tmp, "events.json"), "/proc/x.json", ""],
        }),
    }

    failures = 0
    t0 = time.time()
    names = sorted(verbs)
    for i in range(runs):
        verb = names[i % len(names)]
        base, opts = verbs[verb]
        argv = list(base)
        for _ in range(rng.randint(0, 4)):
            kind = rng.random()
            name = rng.choice(sorted(opts))
            values = opts[name]
            if kind < 0.75:  # an option (valid or invalid value; a repeat if drawn twice)
                argv.append(name)
                if values is not None:
                    argv.append(rng.choice(values))
            elif kind < 0.85:  # a missing value (last word)
                argv.append(name)
            elif kind < 0.93:  # an unknown option
                argv.append(rng.choice(["--frob", "-z", "--json=1", "--" + name.strip("-")[:2]]))
            else:  # garbage
                argv.append(rng.choice(GARBAGE))
        if verb == "run":
            argv += ["--", gs, "plan", "--profile", prof, "--a", "0", "--b", "0"]
        cmd = [gs, verb] + argv
        shown = " ".join(repr(a) if (not a or " " in a) else a for a in cmd[1:])
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=BOUND_S.get(verb, DEFAULT_BOUND_S), cwd=tmp)
        except subprocess.TimeoutExpired:
            print(f"FAIL run {i}: did not end within {BOUND_S.get(verb, DEFAULT_BOUND_S):.0f} s: "
                  f"gradsync {shown}")
            failures += 1
            continue
        out = p.stdout + p.stderr
        problem = None
        if p.returncode < 0:
            problem = f"killed by signal {-p.returncode}"
        elif p.returncode not in (0, 1, 2):
            problem = f"exit status {p.returncode}"
        elif any(s in out for s in SANITIZER):
            problem = "sanitizer report"
        if problem:
            failures += 1
            print(f"FAIL run {i}: {problem}: gradsync {shown}\n     "
                  + out.decode("utf-8", "replace")[-600:].replace("\n", "\n     "))
        else:
            print(f"ok   run {i}: exit {p.returncode}: gradsync {shown}"[:200])
    print(f"{runs - failures} passed, {failures} failed in {time.time() - t0:.0f} s "
          f"(seed {seed})")
    subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
