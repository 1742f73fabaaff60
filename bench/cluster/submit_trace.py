#!/usr/bin/env python3
"""Submits a trace (trace.py's lines) to a cluster manager at the arrival
times, counted from START (Unix time): submit_trace.py GRADSYNC SPOOL TRACE START."""
import json
import subprocess
import sys
import time

gs, spool, trace, start = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
for line in open(trace):
    job = json.loads(line)
    wait = start + job["arrival_s"] - time.time()
    if wait > 0:
        time.sleep(wait)
    cmd = [gs, "submit", "--spool", spool, "--min", str(job["min"]), "--max", str(job["max"]),
           "--name", job["name"], "--"] + job["args"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
