#!/usr/bin/env bash
# gradsync.torch.elastic across restarts (tests/python/elastic_train.py):
#   1. 2 ranks; one rank alone gets SIGUSR1 (a supervisor's resize request):
#      every rank stops at the next commit, exit 3;
#   2. 3 ranks resume it (the reset callbacks run: another world size) and
#      SIGKILL takes one rank mid-epoch: the job ends, non-zero, no hang;
#   3. 2 ranks resume the last commit and finish: every epoch used each
#      sample of its permutation's trained prefix exactly once;
# and the progress and profile reports a cluster manager reads.
# Usage: test_elastic.sh PYTHONPATH MPIEXEC
set -u
pypath=$1 mpiexec=$2
py=${GRADSYNC_TEST_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $py cannot import torch (scripts/install-deps.sh --with-torch)"
  exit 77
fi
export PYTHONPATH=$pypath${PYTHONPATH:+:$PYTHONPATH}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
run() { # run NP MODE LOG
  timeout 240 "$mpiexec" -np "$1" --oversubscribe "$py" "$here/elastic_train.py" "$tmp/state" \
    "$2" > "$tmp/$3.log" 2>&1
}

run 2 usr1-at:4 first; rc=$?
if [ $rc = 3 ] && grep -q "stopped at commit 2 for a resize" "$tmp/first.log"; then
  ok "SIGUSR1 on one rank: every rank stopped at the next commit (the 2nd), exit 3"
else
  bad "SIGUSR1: exit $rc: $(tail -5 "$tmp/first.log")"
fi
# The progress report beside the commit (State.set_progress): commit 2's
# epoch 0, sample 48 of 240, 2 epochs.
report() { "$py" -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r["epoch"], r["samples_in_epoch"], r["epoch_samples"], r["epochs"])' "$tmp/state/progress.json"; }
got=$(report 2>&1)
[ "$got" = "0 48 240 2" ] && ok "progress.json at commit 2: epoch 0, sample 48 of 240, 2 epochs" ||
  bad "progress.json at commit 2: '$got' (want '0 48 240 2')"
run 3 kill-at:5 second; rc=$?
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "restored commit 2 of 2 ranks at epoch 0, sample 48, now 3 ranks" "$tmp/second.log"; then
  ok "3 ranks resumed commit 2 (sample 48); a rank killed mid-epoch ended the job (exit $rc)"
else
  bad "resume on 3 ranks, then SIGKILL: exit $rc: $(tail -5 "$tmp/second.log")"
fi
run 2 "" third; rc=$?
if [ $rc = 0 ] && [ "$(grep -c "^ELASTIC OK" "$tmp/third.log")" = 2 ] &&
   grep -q "now 2 ranks" "$tmp/third.log" && grep -q "reset callbacks ran for sizes \[2\]" "$tmp/third.log"; then
  ok "2 ranks finished from the last commit: $(grep "^ELASTIC OK" "$tmp/third.log" | tr '\n' ' ')"
else
  bad "the last run: exit $rc: $(tail -5 "$tmp/third.log")"
fi
got=$(report 2>&1)
[ "$got" = "2 0 240 2" ] && ok "progress.json at the last commit: both epochs done" ||
  bad "progress.json at the last commit: '$got' (want '2 0 240 2')"
# The engine's profile beside it (set_progress(..., batch=4)): the plan's
# measurements in gradsync plan's format, at 4 samples a rank, for the
# manager's prediction: the Linear(8, 2)'s two gradients (16 and 2 floats).
got=$("$py" -c 'import json, sys; p = json.load(open(sys.argv[1]))
ok = p["forward_s"] >= 0 and all(t["backward_s"] >= 0 for t in p["tensors"])
print(p["name"], p["batch_size"], sorted(t["numel"] for t in p["tensors"]), ok,
      "rank 0 of 2" in p["source"])' "$tmp/state/profile.json" 2>&1)
[ "$got" = "Linear 4 [2, 16] True True" ] &&
  ok "profile.json: the engine's profile of the Linear at 4 samples a rank, from rank 0 of 2" ||
  bad "profile.json: '$got' (want 'Linear 4 [2, 16] True True')"
[ $fails = 0 ]
