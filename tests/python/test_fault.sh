#!/usr/bin/env bash
# One rank of a gradsync.torch job fails alone; every rank must end, the job
# must exit non-zero, long before the watchdog's timeout, with a message
# naming the failing rank.
#   raise:  rank 1 raises an exception in Python (the excepthook ends the job)
#   fault:  rank 1's 12th collective fails inside the library
#           (GRADSYNC_FAULT): a GradsyncError on rank 1, then the same
#   exit0, exit3: rank 1 calls sys.exit(0) or sys.exit(3) at step 3 (no
#           exception reaches the hook: the binding's exit tells the others,
#           whose watchdogs end the job naming rank 1)
#   healthy: no failure, exit 0 (the check above can fail)
# Usage: test_fault.sh PYTHONPATH MPIEXEC CASE
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pypath=$1 mpiexec=$2 case=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# A watchdog far beyond the test's 300 s limit: only the failing rank's own
# abort can end the job in time.
export GRADSYNC_TIMEOUT=900 GRADSYNC_STALL_WARN=600
mode=none
case $case in
  raise) mode=raise ;;
  exit0|exit3) mode=$case ;;
  fault) export GRADSYNC_FAULT="rank=1,call=12" ;;
  healthy) ;;
  *) echo "FAIL unknown case $case"; exit 1 ;;
esac
start=$(date +%s)
"$here/run.sh" "$pypath" "$mpiexec" 3 "$here/fault_train.py" "$mode" >"$out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
cat "$out"
[ $rc -eq 77 ] && exit 77
echo "--- case $case: exit status $rc after ${took}s"
if [ "$case" = healthy ]; then
  [ $rc -eq 0 ] || { echo "FAIL healthy run exited $rc"; exit 1; }
  # Per rank, not by counting lines: mpirun may join two ranks' lines.
  for r in 0 1 2; do
    grep -q "rank $r: finished 40 steps" "$out" || { echo "FAIL rank $r did not finish"; exit 1; }
  done
  exit 0
fi
[ $rc -ne 0 ] || { echo "FAIL the job exited 0 although rank 1 failed"; exit 1; }
[ $took -lt 600 ] || { echo "FAIL the job took ${took}s to end: it waited for the watchdog"; exit 1; }
grep -q "has made no progress" "$out" && { echo "FAIL the watchdog, not the failing rank, ended the job"; exit 1; }
grep -q "finished 40 steps" "$out" && { echo "FAIL a rank finished training"; exit 1; }
case $case in exit*)
  grep -q "rank 1: sys.exit" "$out" || { echo "FAIL rank 1 did not reach sys.exit"; exit 1; }
  grep -Eq "rank [02]: fatal: rank 1 has left \(its program is ending: gs_comm_leave\) after issuing [0-9]+ collectives, and this rank waits for it in collective #[0-9]+" "$out" ||
    { echo "FAIL no 'rank 1 has left' message from rank 0 or 2"; exit 1; }
  echo "case $case: every rank ended, non-zero, with the rank that left named"
  exit 0 ;;
esac
grep -q "rank 1: fatal: uncaught Python exception on this rank" "$out" ||
  { echo "FAIL no 'rank 1: fatal' message"; exit 1; }
if [ "$case" = raise ]; then
  grep -q "ValueError: rank 1 failed on purpose" "$out" || { echo "FAIL no traceback"; exit 1; }
else
  grep -q "GradsyncError" "$out" || { echo "FAIL no GradsyncError"; exit 1; }
fi
echo "case $case: every rank ended, non-zero, with the failing rank named"
