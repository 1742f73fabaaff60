#!/usr/bin/env python3
"""bench/cluster/sim_vs_real.sh's tables.

  sim_vs_real.py measure --spool DIR --solo FILE --trace TRACE --speeds CSV --workload CSV
      from the solo runs (FILE: "kind nodes job-id" lines) under the manager
      at SPOOL: the speed table (model,nodes,step_time_s,samples_per_step,
      start_s: the job's training time (its summary's train_s) over its
      steps, and the rest of its completion time; until 2026-12-07 wall_s,
      its whole time inside the program, which left the program's own
      set-up out of the start-up a resize pays again) and the real trace as the simulator's
      workload (name,time,model,nodes,samples,min_nodes,max_nodes,weight,
      commit_samples), and
      each run beside the table (CSV.solo.jsonl).
  sim_vs_real.py table --speeds CSV
      rebuilds the speed table CSV from the solo runs beside it
      (CSV.solo.jsonl; the kinds' samples per step from CSV itself), as
      measure writes it.
  sim_vs_real.py settings --speeds CSV --real JSONL...
      prints the mean start-up of the solo runs (CSV.solo.jsonl) and the time
      from the manager's start of a job to its supervisor's launch, the
      median over the real runs' static jobs (one launch each) of their run
      time less their launch's (node-seconds over their nodes), in seconds.
  sim_vs_real.py report --sim JSONL --oracle JSONL --at-once JSONL --speeds CSV --start S
                        --launch S --real JSONL...
      the simulated mean JCTs and resizes (curves learned as the manager
      learns them; the oracle's; resizes at once) beside the real runs' as
      Markdown, with the real jobs that cannot have trained to their end."""
import argparse
import csv
import json
import math
import os
import statistics
import sys

COMMIT_EVERY = 20  # the manager's --commit-every in the real runs (real_trace.sh)
COMMIT_EVERY_S = 10  # its default by time (CLUSTER_COMMITS=time: serve's own, 10 s)


def opts(args):
    return dict(zip(args[::2], args[1::2]))


def batch_of(args):
    """A trace job's global batch (trace.py gives every job one)."""
    return int(opts(args)["--global-batch"])


def steps_of(args):
    """The steps a trace job runs (trace.py's kinds)."""
    a = opts(args)
    if "--max-steps" in args:
        return int(a["--max-steps"])
    n = int(a["--synthetic"]) // batch_of(args)
    return n * int(a.get("--epochs", "1"))


def commit_samples_of(args, commits="steps"):
    """The samples between a trace job's commits: its own --commit-every,
    else the manager's, times its global batch; by time, none ("": the
    simulator's --commit-time)."""
    if commits == "time":
        return ""
    return int(opts(args).get("--commit-every", COMMIT_EVERY)) * batch_of(args)


def summary_of(jobdir):
    s = None
    for line in open(os.path.join(jobdir, "out.log"), errors="replace"):
        if line.startswith('{"summary"'):
            s = json.loads(line)["summary"]
    return s


def write_workload(trace, path, commits="steps"):
    """The simulator's workload CSV of a trace (trace.py's jobs)."""
    with open(path, "w") as f:
        f.write("name,time,model,nodes,samples,min_nodes,max_nodes,weight,commit_samples\n")
        for j in trace:
            kind = j["name"].rsplit("-", 1)[0]
            f.write(f"{j['name']},{j['arrival_s']},{kind},{j['max']},"
                    f"{steps_of(j['args']) * batch_of(j['args'])},{j['min']},{j['max']},1,"
                    f"{commit_samples_of(j['args'], commits)}\n")


def workload(a):
    write_workload([json.loads(l) for l in open(a.trace)], a.workload, a.commits)


def measure(a):
    snap = {j["id"]: j for j in json.load(open(os.path.join(a.spool, "jobs.json")))["jobs"]}
    trace = [json.loads(l) for l in open(a.trace)]
    args_of = {}
    for j in trace:
        args_of.setdefault(j["name"].rsplit("-", 1)[0], j["args"])
    rows, solo = {}, []
    for line in open(a.solo):
        kind, n, jid = line.split()
        j = snap[int(jid)]
        if j["state"] != "done":
            sys.exit(f"sim_vs_real: {kind} on {n} node(s) (job {jid}) ended {j['state']}")
        s = summary_of(j["dir"])
        steps = steps_of(args_of[kind])
        jct = j["end_time"] - j["submit_time"]
        solo.append({"kind": kind, "nodes": int(n), "jct_s": round(jct, 2),
                     "wall_s": s["wall_s"], "train_s": s["train_s"], "steps": steps})
    write_table(a.speeds, solo, {k: batch_of(v) for k, v in args_of.items()})
    write_workload(trace, a.workload, a.commits)
    with open(a.speeds + ".solo.jsonl", "w") as f:
        for r in solo:
            f.write(json.dumps(r) + "\n")


def write_table(path, solo, batch):
    """The speed table from the solo runs, the mean of each kind's runs on a
    size: a step is the training's time (train_s, its commits and checks
    included) over the steps; the time inside the program after the
    training (wall_s - train_s: the final evaluation on the test set and
    the last save) is the end, end_s, which a job pays once, at its end;
    everything else of the completion time (jct_s - wall_s: the manager's
    round, the launch, the program's own set-up: data, model, the engine's
    calibration and profiling; the exit) is the start-up, start_s, which
    every launch pays again, a resize's relaunch too. (Until 2026-12-08
    the end was part of the start-up, so every resize paid the final
    evaluation again: 6-35 s a resize of a resnet job.)"""
    rows = {}
    for r in solo:
        rows.setdefault((r["kind"], r["nodes"]), []).append(
            (r["train_s"] / r["steps"], r["jct_s"] - r["wall_s"], r["wall_s"] - r["train_s"]))
    with open(path, "w") as f:
        f.write("model,nodes,step_time_s,samples_per_step,start_s,end_s\n")
        for (kind, n), v in rows.items():
            st = statistics.mean(x[0] for x in v)
            start = statistics.mean(x[1] for x in v)
            end = statistics.mean(x[2] for x in v)
            f.write(f"{kind},{n},{st:.6f},{batch[kind]},{start:.3f},{end:.3f}\n")


def table(a):
    batch = {r["model"]: int(r["samples_per_step"]) for r in csv.DictReader(open(a.speeds))}
    solo = [json.loads(l) for l in open(a.speeds + ".solo.jsonl")]
    write_table(a.speeds, solo, batch)


def real_runs(paths):
    """{policy: [(file name, run)]} of the real runs' JSONL files."""
    real = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        for l in open(path):
            if not l.startswith("{"):
                continue
            r = json.loads(l)
            if "policy" not in r or "mean_jct_s" not in r:
                continue
            # A run in which jobs failed (a host that did not answer over
            # ssh, say) measured something else: left out, and said.
            if "jobs" in r and r.get("done", len(r["jobs"])) < len(r["jobs"]):
                print(f"sim_vs_real: {os.path.basename(path)}: {r['policy']} left out: "
                      f"{r['done']} of {len(r['jobs'])} jobs done", file=sys.stderr)
                continue
            real.setdefault(r["policy"], []).append((os.path.basename(path), r))
    return real


def settings(a):
    solo = [json.loads(l) for l in open(a.speeds + ".solo.jsonl")]
    start = statistics.mean(r["jct_s"] - r["wall_s"] for r in solo)
    # static never resizes: each job one launch on its requested size (max)
    pre = [j["end"] - j["start"] - j["node_s"] / j["max"]
           for _, r in real_runs(a.real).get("static", []) for j in r["jobs"]
           if j["state"] == "done" and not j["resizes"] and not j["restarts"]]
    print(f"{start:.2f} {statistics.median(pre) if pre else 0:.2f}")


def in_program(solo):
    """{kind: {nodes: mean seconds inside the program}} of the solo runs."""
    t = {}
    for r in solo:
        t.setdefault(r["kind"], {}).setdefault(r["nodes"], []).append(r["wall_s"])
    return {k: {n: statistics.mean(v) for n, v in d.items()} for k, d in t.items()}


def cut_short(run, prog):
    """The jobs of a real run that cannot have trained to their end: one
    launch (no resize, no restart) shorter than the least time their
    program takes alone on as many nodes as their node-seconds imply (at
    least node_s / run) or more, yet done."""
    out = []
    for j in run["jobs"]:
        if j["state"] != "done" or j["resizes"] or j["restarts"]:
            continue
        kind, span = j["name"].rsplit("-", 1)[0], j["end"] - j["start"]
        n = max(j["min"], math.ceil(j["node_s"] / span - 1e-9))
        need = min((prog[kind][m] for m in range(n, j["max"] + 1) if m in prog.get(kind, {})),
                   default=0)
        if span < need:
            out.append(f"{j['name']} ({span:.1f} s on {n}+ nodes, whose program alone takes "
                       f"{need:.1f} s)")
    return out


def report(a):
    def rows(path):
        return {r["policy"]: r for r in (json.loads(l) for l in open(path) if l.startswith("{"))
                if "policy" in r}
    sim, oracle, at_once = rows(a.sim), rows(a.oracle), rows(a.at_once)
    real = real_runs(a.real)
    solo = [json.loads(l) for l in open(a.speeds + ".solo.jsonl")]
    prog = in_program(solo)
    print("# The cluster simulator against the manager's real runs\n")
    kinds = sorted({r["kind"] for r in solo})
    sizes = sorted({r["nodes"] for r in solo})
    pool = max(4, max(sizes))
    # Each kind's commits, from the workload (commit_samples) and the speed
    # table (samples_per_step).
    batch = {r["model"]: int(r["samples_per_step"]) for r in csv.DictReader(open(a.speeds))}
    # (a workload without the column: the manager's commits, the run's --commit-work)
    every = {r["model"]: int(float(r.get("commit_samples") or COMMIT_EVERY * batch[r["model"]]))
             for r in csv.DictReader(open(a.workload))}
    commits = ", ".join(f"{k}: {every[k] // batch[k]} steps of {batch[k]} samples"
                        for k in sorted(every))
    if a.commits == "time":
        protocol = (
            f"(`--commit-time {COMMIT_EVERY_S}`: the manager's default since 2026-12-05, "
            f"serve's own `--commit-every {COMMIT_EVERY_S}s`, the jobs without commits of "
            "their own): a job whose partition changes is told so at its supervisor's next "
            "discovery (every second) and stops at its next check (every 0.5 s of training, "
            "at least a step: "
            + ", ".join(f"{k} {batch[k]} samples" for k in sorted(batch))
            + "; after its start-up if it is in one), where it commits, losing no work; it "
            f"commits every {COMMIT_EVERY_S} s of training besides, what a preemption goes "
            "back to")
        learning = ("after two of its checks in one launch there (its progress reports, "
                    "`--learn-curves 1s`: two checks and at least a second), as the manager "
                    "measures it, and price a resize as the manager does before the job's own "
                    "is measured (`--restart-prior`: its measured start-up plus the stop part "
                    "of the pool's measured resizes, else the pool's mean resize)")
        real_commits = "committing by time"
    else:
        protocol = (
            "(`--commit-work 960`, and each job's own commits, the workload's "
            "commit_samples): a job whose partition changes is told so at "
            "its supervisor's next discovery (every second) and moves at its next commit "
            "(every " + commits + ", after its start-up if it is in one)")
        learning = ("after two of its commits in one launch there, as the manager measures it "
                    "(`--learn-curves 1920`: two commits)")
        real_commits = "their own commits"
    print(f"The real trace (bench/cluster/trace.py --mix {a.mix} --span {a.span:g}, seed 1: 20 "
          f"gradsync train jobs of {len(kinds)} kinds ({', '.join(kinds)}) on 1 to "
          f"{max(sizes)} of 8 emulated nodes at 1 Gbit/s, each capped at {a.node_cpus:g} core) replayed by "
          "`gradsync cluster simulate` (bench/cluster/sim_vs_real.sh). Its inputs were measured "
          "under the manager itself, each kind alone at each size its jobs may run on "
          f"(`--min N --max N` on {pool} "
          "emulated nodes, every size run twice and the two means taken; the table below lists "
          "each run; "
          "the real runs' settings): a step's time is the job's training time "
          "(its summary's train_s) over its steps; the time inside the program after the "
          "training (wall_s less train_s: the final evaluation on the test set and the last "
          "save) is the end, which a job pays once, when its last step is done, holding its "
          "nodes and taking no stop (the table's end_s); the rest of its completion time "
          "(the manager's round, the launch over ssh, the program's own set-up: the data, the "
          "model, the engine's calibration and profiling; the exit) is the start-up, "
          "which every launch pays again, a resize's relaunch too (until 2026-12-07 the step "
          "was the whole time inside the program, wall_s, over the steps, and the "
          "program's set-up was spread over the steps instead; until 2026-12-08 the end was "
          "part of the start-up, so every resize paid the final evaluation again); the "
          "speed table's start_s column gives it per kind and size, and the simulator "
          "charges it at every start and every resize on that many nodes (the mean, "
          f"{a.start:.1f} s, is the penalty where the table has none). The simulator resizes as "
          "the manager does " + protocol + ", running on its old "
          "nodes until then, or ends first; the nodes it gives up are free only once it has "
          "relaunched, so a job given them waits; a change before a job's first launch "
          f"(`--launch-delay {a.launch:.1f}`: the manager's start to the supervisor's launch, "
          "the median over the real static runs' jobs of their run time less their launch's) "
          "costs nothing. The policies know a "
          "job's speed on a size only " + learning + ", and "
          "before that none (linear speed-up, unknown work); the oracle's column is the same "
          "simulation on the table's curves from the start, and the last the simulator's "
          "earlier model (a resize, and its nodes, move at once). The real runs: "
          + ", ".join(sorted({os.path.basename(p) for p in a.real if os.path.exists(p)}))
          + " (bench/results; real_trace.sh, the same trace and settings, "
          + real_commits + ")."
          + (f" The emulated nodes' interference, measured apart (bench/cluster/interference.sh, "
             f"cluster_interference.md): `--interference {a.interference:g}`, a job on n of the 8 "
             f"nodes running at 1 / (1 + {a.interference:g} (B - n) / (8 - n)) of the table's "
             "speed while B nodes compute (the table was measured with the pool idle)."
             if a.interference > 0 else
             " No interference between the emulated nodes is modelled (`--interference 0`).")
          + "\n")
    print("| kind | nodes | completion s | in the program s | training s | start-up s | "
          "end s | step ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in solo:
        print(f"| {r['kind']} | {r['nodes']} | {r['jct_s']:.1f} | {r['wall_s']:.1f} | "
              f"{r['train_s']:.1f} | {r['jct_s'] - r['wall_s']:.1f} | "
              f"{r['wall_s'] - r['train_s']:.1f} | {1e3 * r['train_s'] / r['steps']:.1f} |")
    print()
    print("| policy | simulated mean JCT s | real mean JCT s (runs) | real mean | simulated / real "
          "| within 10% | simulated resizes | real resizes (runs) | simulated makespan s "
          "| real makespan s | oracle's mean JCT s (/ real) | resizes at once: mean JCT s "
          "(/ real), resizes |")
    print("|---|---:|---|---:|---:|---|---:|---|---:|---|---:|---:|")
    short = []
    for p in ("static", "dorm", "goodput"):
        if p not in sim or p not in real:
            continue
        runs = real[p]
        if p == "goodput":  # run 1's goodput assumed linear speed-up; the simulator has curves
            runs = [x for x in runs if x[0] != "cluster_real.jsonl"] or runs
        m = statistics.mean(r["mean_jct_s"] for _, r in runs)
        ratio = sim[p]["jct_mean_s"] / m
        print(f"| {p} | {sim[p]['jct_mean_s']:.1f} | "
              f"{', '.join('%.1f' % r['mean_jct_s'] for _, r in runs)} | {m:.1f} | "
              f"{ratio:.2f} | {'yes' if abs(ratio - 1) <= 0.10 else 'no'} | "
              f"{sim[p]['resizes']} | {', '.join(str(r['resizes']) for _, r in runs)} | "
              f"{sim[p]['makespan_s']:.0f} | "
              f"{', '.join('%.0f' % r['makespan_s'] for _, r in runs)} | "
              f"{oracle[p]['jct_mean_s']:.1f} ({oracle[p]['jct_mean_s'] / m:.2f}) | "
              f"{at_once[p]['jct_mean_s']:.1f} ({at_once[p]['jct_mean_s'] / m:.2f}), "
              f"{at_once[p]['resizes']} |")
        for name, r in runs:
            cut = cut_short(r, prog)
            if cut:
                short.append(f"- {p}, {name}: {'; '.join(cut)}")
    if short:
        print("\nReal jobs reported done that cannot have trained to their end (one launch, "
              "shorter than their program alone takes on as many nodes as their node-seconds "
              "imply): their mean JCT is below what the work takes (docs/CLUSTER_MANAGER.md, "
              "\"Known problems\": a stop asked while mpirun starts its daemons ends the "
              "launch with status 0).\n")
        print("\n".join(short))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    for k in ("--spool", "--solo", "--trace", "--speeds", "--workload"):
        m.add_argument(k, required=True)
    w = sub.add_parser("workload")
    for k in ("--trace", "--workload"):
        w.add_argument(k, required=True)
    for x in (m, w):
        x.add_argument("--commits", choices=("steps", "time"), default="steps")
    tb = sub.add_parser("table")
    tb.add_argument("--speeds", required=True)
    st = sub.add_parser("settings")
    st.add_argument("--speeds", required=True)
    st.add_argument("--real", nargs="+", required=True)
    r = sub.add_parser("report")
    r.add_argument("--sim", required=True)
    r.add_argument("--oracle", required=True)
    r.add_argument("--at-once", required=True)
    r.add_argument("--speeds", required=True)
    r.add_argument("--start", type=float, required=True)
    r.add_argument("--launch", type=float, required=True)
    r.add_argument("--real", nargs="+", required=True)
    r.add_argument("--workload", required=True)
    r.add_argument("--mix", default="light")
    r.add_argument("--span", type=float, default=120)
    r.add_argument("--node-cpus", type=float, default=0.25)
    r.add_argument("--interference", type=float, default=0)
    r.add_argument("--commits", choices=("steps", "time"), default="steps")
    a = ap.parse_args()
    {"measure": measure, "workload": workload, "table": table, "settings": settings,
     "report": report}[a.cmd](a)


if __name__ == "__main__":
    main()
