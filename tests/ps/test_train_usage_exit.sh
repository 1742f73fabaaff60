#!/bin/sh
# A parameter-server job whose workers refuse the run alike as bad usage
# after the servers have started serving (--stop-at-step past the run's
# steps, a check only the workers can make) ends with exit 2 on every rank,
# the servers included, and the servers add no "stopping: ranks ... failed"
# line. Until 2026-12-07 the servers ended with 1 after that line, and the
# job's exit was 1 or 2 by whichever rank mpirun reported first.
# Usage: test_train_usage_exit.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
fails=0
bad() { echo "FAIL $*"; fails=1; }
TRAIN="train --synthetic 512 --model mlp --batch 16 --max-steps 4 --epochs 2"
for spec in "3 1 bsp" "4 2 bsp" "4 3 bsp"; do
  set -- $spec
  np=$1 ps=$2 sync=$3
  for k in 1 2 3; do
    timeout -k 5 120 "$gs" run -np "$np" -- "$gs" $TRAIN --ps "$ps" --sync "$sync" \
      --checkpoint "$tmp/ck" --stop-at-step 999 >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -ne 2 ]; then
      bad "np $np --ps $ps --sync $sync --stop-at-step 999 (try $k): exit $rc, expected 2"
    elif grep -q 'stopping: rank' "$tmp/out"; then
      bad "np $np --ps $ps --sync $sync (try $k): a server said: $(grep 'stopping: rank' "$tmp/out")"
    elif ! grep -q 'it would never stop there.*(see --help)' "$tmp/out"; then
      bad "np $np --ps $ps --sync $sync (try $k): no usage message: $(head -5 "$tmp/out")"
    else
      echo "ok   np $np --ps $ps --sync $sync (try $k): exit 2"
    fi
  done
done
exit $fails
