#!/bin/sh
# A rank that never marks a tensor ready and stays inside its iteration
# (test_engine_fault stall): with GRADSYNC_STALL_WARN=1 and GRADSYNC_TIMEOUT=4
# every rank must end non-zero within a bound, the stalled rank's warning must
# name the tensor it did not mark, and the waiting ranks' warnings the
# collective and its tensor.
#
# usage: test_engine_stall.sh MPIEXEC NP TEST_ENGINE_FAULT
set -u
mpiexec=$1 np=$2 bin=$3
bound=30
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
GRADSYNC_STALL_WARN=1 GRADSYNC_TIMEOUT=4 GRADSYNC_CALIBRATE=0 \
  timeout 90 "$mpiexec" -np "$np" --oversubscribe "$bin" stall 1 >"$out" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$out"
fail() {
  echo "FAIL engine stall, $np ranks: $*"
  exit 1
}
[ "$rc" -ne 0 ] || fail "the job ended with status 0"
[ "$rc" -ne 124 ] || fail "the job was still running after 90 s"
grep -q "^FAIL" "$out" && fail "a rank reported a failure"
[ "$elapsed" -le "$bound" ] || fail "every rank ended only after $elapsed s (bound $bound s)"
grep -q "rank 1: stall: .*'fc.weight'.* not marked ready on this rank" "$out" ||
  fail "rank 1's warning does not name the tensor it did not mark"
r=0
while [ "$r" -lt "$np" ]; do
  if [ "$r" -ne 1 ]; then
    grep -q "rank $r: stall: gs_engine_wait .*fc\.weight.*waiting for the other ranks" "$out" ||
      fail "rank $r's warning does not name the stalled collective and its tensor"
  fi
  r=$((r + 1))
done
grep -q "fatal: gradsync engine: .*fc\.weight" "$out" ||
  fail "no fatal message naming the tensor"
echo "engine stall, $np ranks: every rank ended (status $rc) after $elapsed s"
