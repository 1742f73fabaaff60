#!/usr/bin/env bash
# DLRM training's timeline (GRADSYNC_TIMELINE: a Chrome trace per rank):
# on 2 ranks with background commits, each rank's file is valid JSON with
# the compute, comm, steps, checkpoint and checkpoint writer tracks, one
# span a step, each step's all-to-alls and the writer's commits; with the
# MLP gradients through the engine (--policy wfbp) the file is still the
# DLRM run's (the engine writes none beside it); a path that cannot be
# written fails every rank at the start (exit 2, each rank's path named
# once), no hang.
# usage: test_dlrm_timeline.sh GRADSYNC
set -u
G=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fails=0
pass() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; fails=$((fails + 1)); }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
run() { # OUT TIMELINE args...
  local out=$1 tl=$2
  shift 2
  GRADSYNC_TIMELINE=$tl timeout 120 "$G" run -np 2 -- "$G" train --model dlrm \
    --tables kaggle:0.001 --sharding rw --epochs 1 --steps 12 --batch 32 --eval 64 \
    --lookup 4e-8,4e-10 "$@" >"$out" 2>&1
}
# check FILE STEPS WRITER: the tracks, a span a step, the all-to-alls, the
# writer's spans (WRITER: at least that many)
check() {
  "$PY" - "$@" <<'PY'
import json, sys
path, steps, writer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = json.load(open(path))
ev = t["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
spans = [(names.get(e["tid"]), e["name"], e["dur"]) for e in ev if e["ph"] == "X"]
def count(track, prefix):
    return sum(1 for k, n, _ in spans if k == track and n.startswith(prefix))
want = {"compute", "comm", "steps", "checkpoint"}
problems = []
if not want <= set(names.values()):
    problems.append(f"tracks {sorted(names.values())}")
if count("steps", "step ") != steps:
    problems.append(f"{count('steps', 'step ')} step spans, expected {steps}")
for p in ("ids all-to-all", "pooled all-to-all", "gradients all-to-all"):
    if count("comm", p) < steps:
        problems.append(f"{count('comm', p)} '{p}' spans for {steps} steps")
if count("compute", "lookup") < steps:
    problems.append("lookups missing")
if count("checkpoint writer", "commit") < writer:
    problems.append(f"{count('checkpoint writer', 'commit')} writer spans, expected {writer}+")
if any(d < 0 for _, _, d in spans) or t["otherData"]["dropped_events"]:
    problems.append("negative spans or dropped events")
print("; ".join(problems) or "fine")
sys.exit(1 if problems else 0)
PY
}

# 1. Background commits every 4 steps (at 4 and 8 in the background, 12 the
# run's last in the foreground): both ranks' files.
run "$tmp/o1" "$tmp/t.json" --checkpoint "$tmp/ck1" --commit-every 4
rc=$?
w0=$(check "$tmp/t.rank0.json" 12 2 2>&1)
r0=$?
w1=$(check "$tmp/t.rank1.json" 12 2 2>&1)
r1=$?
if [ $rc = 0 ] && [ $r0 = 0 ] && [ $r1 = 0 ]; then
  pass "2 ranks' timelines: every step and its all-to-alls, the writer's commits"
else fail "exit $rc; rank 0: $w0; rank 1: $w1 ($(tail -3 "$tmp/o1"))"; fi

# 2. The MLP gradients through the engine: the DLRM run's file, whole.
run "$tmp/o2" "$tmp/e.json" --policy wfbp
rc=$?
w0=$(check "$tmp/e.rank0.json" 12 0 2>&1)
r0=$?
if [ $rc = 0 ] && [ $r0 = 0 ] && grep -q '"all-reduce wait"' "$tmp/e.rank0.json"; then
  pass "--policy wfbp: the DLRM run's timeline"
else fail "--policy wfbp: exit $rc; $w0 ($(tail -3 "$tmp/o2"))"; fi

# 3. A path that cannot be written: every rank fails at the start.
run "$tmp/o3" "$tmp/no/such/dir/t.json"
rc=$?
if [ $rc = 2 ] && [ "$(grep -c "rank [01]: DLRM training: cannot write the timeline '$tmp/no/such/dir/t.rank[01].json'" "$tmp/o3")" = 2 ] &&
   ! grep -q "step 1" "$tmp/o3"; then
  pass "an unwritable timeline: exit 2 before a step, each rank's path named once"
else fail "an unwritable timeline: exit $rc ($(tail -3 "$tmp/o3"))"; fi

[ $fails = 0 ] || exit 1
