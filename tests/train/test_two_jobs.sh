#!/bin/sh
# Two training jobs on the two halves of one world (test_two_jobs.c): K-FAC
# beside parameter servers, then K-FAC beside the engine, each on its half
# while the other trains, end with the weights each job reaches alone on a
# world of its own (bitwise).
#   test_two_jobs.sh MPIEXEC TEST_TWO_JOBS
set -u
mpiexec=$1 bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL two jobs: $*"; fails=1; }
run() { # np mode
  timeout 240 "$mpiexec" -np "$1" --oversubscribe "$bin" "$2" "$tmp" || fail "$2 on $1 ranks: exit $?"
}
run 4 halves
run 4 halves2
for job in A B C; do run 2 $job; done
for job in A B C; do
  if [ ! -s "$tmp/$job-half.bin" ] || [ ! -s "$tmp/$job-alone.bin" ]; then
    fail "job $job: no weights ($(ls "$tmp"))"
  elif cmp -s "$tmp/$job-half.bin" "$tmp/$job-alone.bin"; then
    echo "ok   job $job on half of the world = alone"
  else
    fail "job $job: the weights on half of the world differ from the job alone"
  fi
done
exit $fails
