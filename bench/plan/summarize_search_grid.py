#!/usr/bin/env python3
"""Summarises bench/plan/search_grid.sh's JSON lines (and the repeats of
bench/plan/search_grid_repeat.sh, when given too) as markdown.

Per case (profile, network): the search's recommendation, every grid cell
measured (median over its runs), and the recommended configuration's
measured throughput against the best cell's, with issue 40's targets:
within 10% of the best, and never more than 25% slower.
"""
import json
import statistics
import sys


def load(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if line and not line.startswith('{"stamp"'):
            rows.append(json.loads(line))
    return rows


def batch_of(profile):
    try:
        return json.load(open(f"profiles/{profile}.json")).get("batch_size") or 1
    except OSError:
        return 1


def main():
    rows = [r for path in sys.argv[1:] for r in load(path)]
    cases = []
    for r in rows:
        if r["kind"] == "search" and r["case"] not in cases:
            cases.append(r["case"])
    out = ["# `plan --search` against measurement: the recommended configuration and a grid",
           "",
           "Issue 40, item 2 (bench/plan/search_grid.sh). For each profile and network the "
           "search recommends a configuration for at most 4 workers on 4 emulated nodes (one "
           "per node, `gradsync run --net`); a grid of configurations is then run with "
           "`gradsync replay` (compute replayed by sleeping, scaled as in the search; the "
           "gradients really communicated through the engine, compressed ones holding seeded "
           "random values). Throughput is workers x the profile's batch over the measured "
           "iteration (the slowest rank's median); each launch runs its policies in turn for "
           "several rounds (odd rounds in reverse order) and a cell takes the median of its "
           "rounds, with the repeats of bench/plan/search_grid_repeat.sh where it ran (a case "
           "whose recommendation measured below 0.95 of the best cell: both cells run again, "
           "alternating). 'predicted' is the planner's time for the plan the engine ran under the "
           "costs it measured (dense plans only: the replay does not price compressed "
           "groups). Targets: the recommendation within "
           "10% of the best cell's throughput (ratio >= 0.90), and never more than 25% slower "
           "(>= 0.75). Parameter servers cannot be replayed (replay drives the engine's "
           "all-reduce), so the grid holds none.",
           ""]
    summary = ["| case | recommended (predicted iter) | measured iter | samples/s | best cell "
               "| its samples/s | ratio | within 10% | within 25% |",
               "|---|---|---:|---:|---|---:|---:|---|---|"]
    details = []
    for case in cases:
        srch = [r for r in rows if r["kind"] == "search" and r["case"] == case][-1]["search"]
        rec = srch["recommendation"]
        profile = case.split("/")[0]
        batch = batch_of(profile)
        cells = {}
        for r in rows:
            if r["kind"] != "cell" or r["case"] != case:
                continue
            key = (r["workers"], r["policy"], r["compress"])
            c = cells.setdefault(key, {"runs": [], "pred": [], "bytes": [], "chosen": set(),
                                       "roles": set(), "errors": 0})
            c["roles"].add(r["role"])
            if "iter_s" in r and r.get("rc", 0) == 0:
                c["runs"].append(r["iter_s"])
                c["pred"].append(r.get("predicted_s"))
                c["bytes"].append(r.get("bytes_per_step"))
                c["chosen"].add(r.get("chosen", "?"))
            else:
                c["errors"] += 1
        for key, c in cells.items():
            c["iter"] = statistics.median(c["runs"]) if c["runs"] else None
            c["tput"] = key[0] * batch / c["iter"] if c["iter"] else None
        ok = {k: c for k, c in cells.items() if c["tput"]}
        rkey = (rec["workers"], rec["policy"], rec["compress"])
        rdesc = (f"{rec['workers']} workers, {rec['policy']}, {rec['compress']}"
                 + (f", {rec['sync']} ({rec.get('servers')} servers)" if rec["sync"] == "ps"
                    else ""))
        if not ok:
            summary.append(f"| {case} | {rdesc} | - | - | no cell measured | - | - | - | - |")
            continue
        best = max(ok, key=lambda k: ok[k]["tput"])
        rc = ok.get(rkey) if rec["sync"] == "allreduce" else None
        fmt = lambda k: f"{k[0]} workers, {k[1]}, {k[2]}"
        if rc:
            ratio = rc["tput"] / ok[best]["tput"]
            summary.append(
                f"| {case} | {rdesc} ({rec['iter_s'] * 1e3:.0f} ms) | {rc['iter'] * 1e3:.0f} ms "
                f"| {rc['tput']:.1f} | {fmt(best)} | {ok[best]['tput']:.1f} | {ratio:.3f} | "
                f"{'yes' if ratio >= 0.9 else '**no**'} | {'yes' if ratio >= 0.75 else '**no**'} |")
        else:
            why = ("parameter servers: not replayable" if rec["sync"] == "ps"
                   else "not measured")
            summary.append(f"| {case} | {rdesc} ({rec['iter_s'] * 1e3:.0f} ms) | {why} | - | "
                           f"{fmt(best)} | {ok[best]['tput']:.1f} | - | - | - |")
        details += ["", f"### {case}", "",
                    f"Search: {rdesc}, predicted {rec['iter_s'] * 1e3:.1f} ms, efficiency "
                    f"{rec['efficiency']:.3f}, {rec['bytes_per_step'] / 1e6:.2f} MB per step"
                    + (f"; accuracy (measured): {rec['accuracy_warning']}"
                       if rec.get("accuracy_warning") else "") + ".",
                    "",
                    "| workers | policy (chosen) | compress | runs | iter ms (median) | runs ms "
                    "| predicted ms | MB/step | samples/s | vs best |",
                    "|---:|---|---|---:|---:|---|---:|---:|---:|---:|"]
        for key in sorted(cells, key=lambda k: (k[2] != "none", k[0], k[1])):
            c = cells[key]
            mark = " **(recommended)**" if key == rkey else ""
            if not c["tput"]:
                details.append(f"| {key[0]} | {key[1]}{mark} | {key[2]} | 0 | failed "
                               f"({c['errors']}) | - | - | - | - | - |")
                continue
            preds = [p for p in c["pred"] if p]
            byts = [b for b in c["bytes"] if b is not None]
            details.append(
                f"| {key[0]} | {key[1]} ({'/'.join(sorted(c['chosen']))}){mark} | {key[2]} | "
                f"{len(c['runs'])} | {c['iter'] * 1e3:.1f} | "
                f"{', '.join(f'{x * 1e3:.0f}' for x in c['runs'])} | "
                + (f"{statistics.median(preds) * 1e3:.1f}" if preds else "-") + " | "
                + (f"{statistics.median(byts) / 1e6:.2f}" if byts else "-")
                + f" | {c['tput']:.1f} | {c['tput'] / ok[best]['tput']:.3f} |")
    fails = [r for r in rows if r["kind"] == "failure"]
    out += ["## Recommended against the best of the grid", ""] + summary
    if fails:
        out += ["", "Failed launches:", ""] + [
            f"- {f['case']}: {f['workers']} workers, {f['policy']}, {f['compress']}: exit "
            f"{f['rc']}: `{f['stderr'].strip().splitlines()[-1] if f['stderr'].strip() else ''}`"
            for f in fails]
    out += ["", "## Every cell", ""] + details[1:] if details else []
    print("\n".join(out))


if __name__ == "__main__":
    main()
