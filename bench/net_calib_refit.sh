#!/usr/bin/env bash
# The calibration of the 1gbit preset from measurements already committed
# (issue 36, item 2), for when the host cannot give a quiet new one: a
# bench/net_calibrate.sh run on this shared host at load 25-31 measured the
# emulated link at 9-41% of its rate (bench/results/net_calibrate_loaded/),
# which describes the other sessions' traffic, not the link.
#
# Per cluster of N nodes (one rank each), on the AMD host and the faithful
# link (16 KiB packets, one-packet bucket), at load 3-8:
#   - each all-reduce algorithm's alpha (one step) and beta (a byte on a
#     link): the median over the three rounds of bench/link_share.sh
#     (bench/results/link_share_<N>nodes.jsonl) of the fit gradsync bench
#     makes at start-up (gs_comm_calibrate: each algorithm timed up to 64 MB
#     and fitted by gs_cost_fit_algo, the cost module's own fit);
#   - the engine's cost per message beyond its algorithm's steps: from the
#     replays of 2026-11-28 (bench/results/replay_2026-11-28/, the files of
#     commit f769580), per profile the communication time wfbp spends beyond
#     single's (the same bytes in more messages; both the engine's own
#     comm_s), per extra message, less the lg N steps of recursive doubling
#     that carry a small message; the median over the profiles. This part
#     is fitted to replays that bench/net_preset.sh also compares with:
#     their wfbp and single cells are not independent of it (the held-out
#     profiles are).
# Writes $BENCH_OUT/net_calibrate.json (what net_calib[] in src/cost/cost.c
# copies; tests/cost/test_net_calib.py compares them) and net_calibrate.md.
#
# Usage: bench/net_calib_refit.sh
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
out=$BENCH_OUT
python3 - "$out" <<'PY'
import glob, json, math, os, statistics, sys

out = sys.argv[1]
sys.path.insert(0, "bench")
from net_calib_write import ALGOS, write_calibration  # noqa: E402
cal = {"rate_bps": 1e9, "name": "1gbit", "method": "refit of committed measurements",
       "clusters": {}}
md = ["# The 1gbit preset's calibration", "",
      "The constants of `net_calib[]` in src/cost/cost.c, refitted by `bench/net_calib_refit.sh`",
      "from measurements committed before (the AMD host, the faithful link, load 3-8): each",
      "algorithm's alpha and beta from the three rounds of `bench/link_share.sh` (the fit",
      "`gradsync bench` makes at start-up with the cost module's gs_cost_fit_algo), the engine's",
      "cost per message from the 2026-11-28 replays (wfbp's communication beyond single's, per",
      "extra message, less recursive doubling's lg N steps). A new measurement with",
      "`bench/net_calibrate.sh` at load 25-31 (other sessions' emulated clusters and builds on",
      "the same 2 cores) found the link at 9-41% of its rate and is kept apart, not used:",
      "`net_calibrate_loaded/net_calibrate.md`.", ""]
for n in (4, 8):
    path = f"bench/results/link_share_{n}nodes.jsonl"
    recs = [json.loads(l) for l in open(path)]
    stamp = next(r["stamp"] for r in recs if "stamp" in r)
    fits = [r["cost_model"] for r in recs if "cost_model" in r and r.get("nodes") == n]
    c = {"nodes": n, "algos": {}, "rounds": [], "engine": [],
         "sources": {"algos": path, "algos_stamp": stamp}}
    for a in ALGOS:
        al = [f[a]["alpha_s"] for f in fits]
        be = [f[a]["beta_s_per_B"] for f in fits]
        c["algos"][a] = {"alpha": statistics.median(al), "beta": statistics.median(be),
                         "alpha_rounds": al, "beta_rounds": be}
    c["gamma_rounds"] = [f["gamma_s_per_B"] for f in fits]
    # The engine's cost per message.
    steps = math.ceil(math.log2(n))
    small = steps * c["algos"]["rd"]["alpha"]
    for f in sorted(glob.glob(f"bench/results/replay_2026-11-28/replay_*_{n}nodes.jsonl")):
        rows = [json.loads(l) for l in open(f)]
        st = next(r["stamp"] for r in rows if "stamp" in r)
        if st["env"]["cpu"] != stamp["env"]["cpu"]:
            continue  # another host
        by = {}
        for r in rows:
            if "policy" in r:
                by.setdefault(r["policy"], []).append(r)
        w, s = by["wfbp"][0], by["single"][0]
        extra = w["ngroups"] - s["ngroups"]
        per = (w["comm_s"] - s["comm_s"]) / extra
        c["engine"].append({"file": os.path.basename(f), "profile": w["profile"],
                            "messages": w["ngroups"], "wfbp_comm_s": w["comm_s"],
                            "single_comm_s": s["comm_s"], "per_extra_message_s": per,
                            "rd_steps_s": small, "overhead_s": per - small,
                            "load": st["env"]["loadavg"]})
    c["engine_msg_s"] = max(0.0, statistics.median(e["overhead_s"] for e in c["engine"]))
    cal["clusters"][str(n)] = c
    md += [f"## {n} nodes", "",
           f"From `{path}` ({stamp['date']}, {stamp['env']['cpu']}, load {stamp['env']['loadavg']}),",
           "each round's fit and their median:", "",
           "| algorithm | alpha per round (us) | median | beta per round (ns/B) | median | share of 1 Gbit/s |",
           "|---|---|---:|---|---:|---:|"]
    for a in ALGOS:
        g = c["algos"][a]
        md.append(f"| {a} | {', '.join(f'{x * 1e6:.0f}' for x in g['alpha_rounds'])} | "
                  f"{g['alpha'] * 1e6:.0f} | {', '.join(f'{x * 1e9:.2f}' for x in g['beta_rounds'])} | "
                  f"{g['beta'] * 1e9:.2f} | {8 / g['beta'] / 1e9:.0%} |")
    md += ["", f"The engine's cost per message: {c['engine_msg_s'] * 1e6:.0f} us, the median of:", "",
           "| replay | messages (wfbp) | wfbp comm (s) | single comm (s) | per extra message (us) | less rd's steps (us) | load |",
           "|---|---:|---:|---:|---:|---:|---|"]
    for e in c["engine"]:
        md.append(f"| {e['file']} | {e['messages']} | {e['wfbp_comm_s']:.3f} | "
                  f"{e['single_comm_s']:.3f} | {e['per_extra_message_s'] * 1e6:.0f} | "
                  f"{e['overhead_s'] * 1e6:.0f} | {e['load']} |")
    md.append("")
write_calibration(out, cal, md, (4, 8))
PY
bench_stamp "$out/net_calibrate.json" "bench/net_calib_refit.sh"
bench_stamp "$out/net_calibrate.md" "bench/net_calib_refit.sh"
cat "$out/net_calibrate.md"
