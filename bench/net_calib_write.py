"""The calibration's two files, written once for bench/net_calibrate.sh
(measured) and bench/net_calib_refit.sh (refitted from committed runs):
net_calibrate.json (what net_calib[] in src/cost/cost.c copies;
tests/cost/test_net_calib.py compares them) and net_calibrate.md (md's
lines, then net_calib[]'s rows)."""
import json
import os

ALGOS = ("ring", "rd", "rabenseifner")


def write_calibration(out, cal, md, nodes):
    md = md + ["The rows of `net_calib[]` in src/cost/cost.c (nodes, the engine's cost per message,",
               "then alpha and beta of ring, rd, rabenseifner):", "", "```c"]
    for n in nodes:
        c = cal["clusters"][str(n)]
        v = [c["engine_msg_s"]] + [c["algos"][a][k] for a in ALGOS for k in ("alpha", "beta")]
        md.append(f"    {{{n}, " + ", ".join(f"{x:.3g}" for x in v) + "},")
    md += ["```", ""]
    with open(os.path.join(out, "net_calibrate.json"), "w") as f:
        json.dump(cal, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "net_calibrate.md"), "w") as f:
        f.write("\n".join(md) + "\n")
