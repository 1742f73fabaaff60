#!/bin/sh
# A rank failing alone inside K-FAC's factor exchange or inverse broadcast
# (GRADSYNC_FAULT: an error, or a stall) ends every rank with a non-zero
# status within the watchdog's GRADSYNC_TIMEOUT, and the failing rank names
# the collective.
#   test_kfac_fault.sh MPIEXEC TEST_KFAC_MPI
set -u
mpiexec=$1
bin=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fails=0
for dist in dkfac spd; do
  # call 1 is the first factor all-reduce of either scheme; call 4 is an
  # inverse broadcast (dkfac) or a factor message of the first pass (spd)
  for fault in "rank=1,call=1" "rank=2,call=4,kind=stall"; do
    start=$(date +%s)
    GRADSYNC_TIMEOUT=5 GRADSYNC_FAULT=$fault timeout -k 5 90 \
      "$mpiexec" -n 3 --oversubscribe "$bin" fault "$dist" >"$out" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    echo "$dist $fault: exit $rc after $took s"
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      echo "FAIL $dist $fault: expected a non-zero exit before the time limit, got $rc"
      fails=1
    fi
    if grep -q "no fault happened" "$out"; then
      echo "FAIL $dist $fault: a rank finished training"
      fails=1
    fi
    r=$(echo "$fault" | sed 's/rank=\([0-9]*\).*/\1/')
    if ! grep -Eq "rank $r: .*(injected fault|stalls)" "$out"; then
      echo "FAIL $dist $fault: rank $r did not name its failed collective"
      fails=1
    fi
    if [ "$fails" -ne 0 ]; then cat "$out"; fi
  done
done
exit $fails
