#!/bin/sh
# Failure tests of the communicator: one case per ctest entry.
#   test_faults.sh MPIEXEC TEST_FAULTS_BINARY CASE
# A case runs a job in which one rank fails, stalls or is configured
# differently, and asserts on the job's exit status, its messages and, for
# the watchdog cases, how long it took to end every rank. Each job runs
# under `timeout`, so a hang fails the case instead of the whole suite.
set -u
mpiexec=$1
bin=$2
case=$3
here=$(cd "$(dirname "$0")" && pwd)
wrap="$here/rank_env.sh"
out=$(mktemp)
trap 'rm -f "$out" "$out.a" "$out.b"' EXIT
fails=0

fail() {
  echo "FAIL $case: $*"
  echo "---- job output ----"
  cat "$out"
  fails=1
}

# job NP ARGS...: runs the job, sets $rc and $elapsed (seconds).
job() {
  np=$1
  shift
  start=$(date +%s.%N)
  timeout -k 5 100 "$mpiexec" -n "$np" --oversubscribe "$@" >"$out" 2>&1
  rc=$?
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  echo "$case: exit $rc after $elapsed s"
}

expect_rc() { # nonzero | zero
  if [ "$1" = nonzero ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
    fail "expected a non-zero exit before the test's own time limit, got $rc"
  fi
  if [ "$1" = zero ] && [ "$rc" -ne 0 ]; then fail "expected exit 0, got $rc"; fi
}

expect_out() { # extended regular expression
  grep -Eq -- "$1" "$out" || fail "no line matching: $1"
}

expect_no() {
  if grep -Eq -- "$1" "$out"; then fail "unexpected line matching: $1"; fi
}

expect_count() { # N regex: at least N lines
  n=$(grep -Ec -- "$2" "$out")
  [ "$n" -ge "$1" ] || fail "$n lines match '$2', expected $1 or more"
}

expect_within() {
  if [ "$(echo "$elapsed > $1" | bc)" -eq 1 ]; then
    fail "took $elapsed s, expected at most $1 s"
  fi
}

# The first line matching $1 comes before the first matching $2.
expect_order() {
  a=$(grep -En -- "$1" "$out" | head -1 | cut -d: -f1)
  b=$(grep -En -- "$2" "$out" | head -1 | cut -d: -f1)
  if [ -z "$a" ] || [ -z "$b" ] || [ "$a" -ge "$b" ]; then
    fail "expected '$1' (line ${a:-none}) before '$2' (line ${b:-none})"
  fi
}

# Watchdog cases: GRADSYNC_TIMEOUT=5 and GRADSYNC_STALL_WARN=1; no start-up
# fit, so the job's first seconds are not spent calibrating.
export GRADSYNC_TIMEOUT=5 GRADSYNC_STALL_WARN=1 GRADSYNC_CALIBRATE=0
LIMIT=30 # seconds for every rank to end, start-up included, on a loaded box

case $case in
  error_np2) # rank 1's third collective fails inside its progress thread
    job 2 -x GRADSYNC_FAULT=rank=1,call=3,kind=error "$bin" run ring 20
    expect_rc nonzero
    expect_out 'rank 1: gs_allreduce #3 failed \(MPI error\): rank 1 of 2: collective #3, allreduce\(count=1024, dtype=f32, algo=ring\) failed: injected fault'
    expect_out 'rank 0: fatal: collective #3, allreduce\(count=1024, dtype=f32, algo=ring\) made no progress for [0-9.]+ s \(GRADSYNC_TIMEOUT=5 s\)'
    expect_no 'all 20 collectives completed'
    expect_within $LIMIT ;;
  error_np3_mpi) # MPI's own collective, which blocks inside MPI
    job 3 -x GRADSYNC_FAULT=rank=2,call=2 "$bin" run mpi 20
    expect_rc nonzero
    expect_out 'rank 2: gs_allreduce #2 failed \(MPI error\): .*injected fault'
    expect_out 'rank [01]: fatal: collective #2, allreduce\(count=1024, dtype=f32, algo=mpi\) made no progress'
    expect_within $LIMIT ;;
  error_exit_np2) # the failing rank exits at once: mpirun ends the job
    job 2 -x GRADSYNC_FAULT=rank=0,call=1 "$bin" run rd 20 exit
    expect_rc nonzero
    expect_out 'rank 0: gs_allreduce #1 failed \(MPI error\): .*algo=rd\) failed: injected fault'
    expect_within 20 ;;
  stall_np2) # rank 1's second collective never completes
    job 2 -x GRADSYNC_FAULT=rank=1,call=2,kind=stall "$bin" run ring 20
    expect_rc nonzero
    expect_out 'rank 1: GRADSYNC_FAULT=.*collective #2, allreduce.* stalls'
    expect_out 'rank [01]: warning: collective #2, allreduce\(count=1024, dtype=f32, algo=ring\) has made no progress for [0-9.]+ s \(GRADSYNC_STALL_WARN=1 s\)'
    expect_out 'rank [01]: fatal: collective #2, allreduce\(count=1024, dtype=f32, algo=ring\) made no progress'
    expect_order 'warning: collective #2' 'fatal: collective #2'
    expect_within $LIMIT ;;
  abort2_np3) # two threads of rank 1 end the job at the same moment: one
    # calls MPI_Abort, the other waits for it (two at once crashed in MPI)
    job 3 "$bin" abort2 1
    expect_rc nonzero
    expect_out 'rank 1: fatal: two threads end the job at once: thread A'
    expect_out 'rank 1: fatal: two threads end the job at once: thread B'
    expect_no 'FAIL rank'
    expect_no 'SEGV|Segmentation|signal 11'
    expect_within $LIMIT ;;
  mismatch_np3) # rank 0 all-reduces fewer elements: its ring fails with
    # receives pending; it destroys its communicator, calls gs_finalize and
    # exits 3. gs_finalize leaves MPI running after the failure: in
    # MPI_Finalize's fence rank 0 waited for the others' watchdog (5 s), and
    # mpirun deadlocked after every rank had ended in 5 of 15 runs. Now
    # mpirun ends the job on rank 0's exit, before any watchdog fires.
    job 3 "$bin" mismatch ring
    expect_rc nonzero
    expect_out 'rank 0: the mismatched allreduce failed: .*ring'
    expect_out 'Exit code: +3'
    expect_no 'FAIL rank'
    expect_no 'fatal: collective'
    expect_within 20 ;;
  leave_np3|leave_np3_mpi) # rank 1's program ends (gs_comm_leave: what the
    # binding does at exit) while ranks 0 and 2 issue another allreduce:
    # they end the job at once, naming rank 1, not after GRADSYNC_TIMEOUT
    algo=ring
    [ "$case" = leave_np3_mpi ] && algo=mpi
    job 3 "$bin" leave $algo 1
    expect_rc nonzero
    expect_out 'rank 1: leaving after 3 collectives'
    expect_out "rank [02]: fatal: rank 1 has left \\(its program is ending: gs_comm_leave\\) after issuing 3 collectives, and this rank waits for it in collective #4, allreduce\\(count=1024, dtype=f32, algo=$algo\\), which it will never issue"
    expect_no 'fatal: collective #4'
    expect_no 'FAIL rank'
    expect_within 20 ;;
  leave_ok_np3) # healthy ends with gs_comm_leave: nothing fires
    job 3 "$bin" leave_ok
    expect_rc zero
    expect_count 3 'rank [012]: OK: left after 5 collectives'
    expect_no 'fatal'
    expect_no 'FAIL rank' ;;
  look_thread_np3) # a late rank: the others look for goodbyes on the
    # thread that waits (ring, then recursive doubling), never beside it
    for algo in ring rd; do
      job 3 "$bin" look_thread $algo
      expect_rc zero
      expect_count 2 'rank [01]: OK: [0-9]+ looks, all on the waiting thread'
      expect_no 'FAIL rank'
    done ;;
  after_finalize_np2) # gs_init and gs_comm_create after gs_finalize: GS_ERR_STATE
    job 2 "$bin" after_finalize
    expect_rc zero
    expect_count 2 'rank [01]: gs_init after gs_finalize: gs_init: MPI has been finalized'
    expect_count 2 'rank [01]: gs_comm_create after gs_finalize: gs_comm_create: MPI has been finalized'
    expect_no 'FAIL rank' ;;
  stall_hier_np4) # 2 nodes x 2: rank 1 stalls, its node peer waits at a
    # shared-memory barrier, the other node in the cross-node ring
    job 4 -x GRADSYNC_FAULT=rank=1,call=2,kind=stall "$here/node_wrap.sh" 2 \
      "$bin" run hier 20
    expect_rc nonzero
    expect_out 'rank 1: GRADSYNC_FAULT=.*collective #2, allreduce.* stalls'
    expect_out 'rank [023]: fatal: collective #2, allreduce\(count=1024, dtype=f32, algo=hier\) made no progress'
    expect_no 'all 20 collectives completed'
    expect_within $LIMIT ;;
  error_hier_np4) # rank 3's third collective fails: the others end by the watchdog
    job 4 -x GRADSYNC_FAULT=rank=3,call=3,kind=error "$here/node_wrap.sh" 2 \
      "$bin" run hier 20
    expect_rc nonzero
    expect_out 'rank 3: gs_allreduce #3 failed \(MPI error\): .*algo=hier\) failed: injected fault'
    expect_out 'rank [012]: fatal: collective #3, allreduce\(count=1024, dtype=f32, algo=hier\) made no progress'
    expect_within $LIMIT ;;
  stall_np3_mpi)
    job 3 -x GRADSYNC_FAULT=rank=0,call=4,kind=stall "$bin" run mpi 20
    expect_rc nonzero
    expect_count 2 'warning: collective #4, allreduce\(count=1024, dtype=f32, algo=mpi\)'
    expect_out 'fatal: collective #4, allreduce\(count=1024, dtype=f32, algo=mpi\)'
    expect_order 'warning: collective #4' 'fatal: collective #4'
    expect_within $LIMIT ;;
  healthy_np2) # idle gaps and work past the timeout: no warning, no abort
    export GRADSYNC_TIMEOUT=3 GRADSYNC_STALL_WARN=2
    job 2 "$bin" healthy
    expect_rc zero
    expect_count 2 'OK: healthy run'
    expect_no 'warning|fatal' ;;
  fault_off_np3) # a fault named for a rank that does not exist: nothing fails
    job 3 -x GRADSYNC_FAULT=rank=7,call=1 "$bin" run ring 5
    expect_rc zero
    expect_count 3 'all 5 collectives completed' ;;
  bad_fault_np2) # a malformed GRADSYNC_FAULT on rank 1 only
    job 2 "$wrap" 1 GRADSYNC_FAULT=rank=1,when=3 -- "$bin" create PARSE "GRADSYNC_FAULT=rank=1,when=3"
    expect_rc zero
    expect_count 2 'OK: parse error'
    expect_out 'rank 0: OK: .*rank 1 failed' ;;
  config_segment_np2) # a setting that differs on one rank
    job 2 "$wrap" 1 GRADSYNC_SEGMENT_BYTES=1024 -- "$bin" create MISMATCH \
      "GRADSYNC_SEGMENT_BYTES is 262144 on rank 0 but 1024 on rank 1"
    expect_rc zero
    expect_count 2 'OK: ranks disagree' ;;
  config_algo_np3) # two settings, on the last of three ranks
    job 3 "$wrap" 2 GRADSYNC_ALLREDUCE_ALGO=rd GRADSYNC_TIMEOUT=7 -- "$bin" create \
      MISMATCH "GRADSYNC_ALLREDUCE_ALGO is auto on rank 0 but rd on rank 2" \
      "GRADSYNC_TIMEOUT is 5 on rank 0 but 7 on rank 2" "2 setting(s) differ"
    expect_rc zero
    expect_count 3 'OK: ranks disagree' ;;
  config_misc_np3) # spin, check, calibration and cost settings on rank 1
    job 3 "$wrap" 1 GRADSYNC_SPIN_US=10 GRADSYNC_CHECK=1 -- "$bin" create MISMATCH \
      "GRADSYNC_SPIN_US is 50 on rank 0 but 10 on rank 1" \
      "GRADSYNC_CHECK is 0 on rank 0 but 1 on rank 1"
    expect_rc zero
    expect_count 3 'OK: ranks disagree'
    job 2 "$wrap" 0 GRADSYNC_ALPHA=1e-5 GRADSYNC_BETA=1e-9 GRADSYNC_CALIBRATE=65536 -- \
      "$bin" create MISMATCH "GRADSYNC_CALIBRATE is 65536 on rank 0 but 0 on rank 1" \
      "GRADSYNC_ALPHA is 1e-05 on rank 0 but unset on rank 1" "GRADSYNC_BETA"
    expect_rc zero
    expect_count 2 'OK: ranks disagree' ;;
  config_costfile_np2) # the cost file's contents differ between ranks
    echo '{"a": 1}' >"$out.a"
    echo '{"a": 2}' >"$out.b"
    job 2 -x GRADSYNC_COST_FILE="$out.a" "$wrap" 1 GRADSYNC_COST_FILE="$out.b" -- \
      "$bin" create MISMATCH "GRADSYNC_COST_FILE (its contents) is hash" "on rank 1"
    expect_rc zero
    expect_count 2 'OK: ranks disagree'
    job 2 -x GRADSYNC_COST_FILE="$out.a" "$wrap" 1 GRADSYNC_COST_FILE=/nonexistent -- \
      "$bin" create MISMATCH "but unreadable on rank 1"
    expect_rc zero
    expect_count 2 'OK: ranks disagree' ;;
  config_costcache_np2) # GRADSYNC_COST_CACHE names another file on one rank, or none
    job 2 -x GRADSYNC_COST_CACHE="$out.a" "$wrap" 1 GRADSYNC_COST_CACHE="$out.b" -- \
      "$bin" create MISMATCH "GRADSYNC_COST_CACHE (its path) is hash" "on rank 1"
    expect_rc zero
    expect_count 2 'OK: ranks disagree'
    job 2 -x GRADSYNC_COST_CACHE="$out.a" "$wrap" 1 GRADSYNC_COST_CACHE= -- \
      "$bin" create MISMATCH "GRADSYNC_COST_CACHE (its path) is hash" "unset on rank 1"
    expect_rc zero
    expect_count 2 'OK: ranks disagree' ;;
  config_same_np3) # the same settings everywhere: no error
    job 3 -x GRADSYNC_SEGMENT_BYTES=4096 -x GRADSYNC_ALLREDUCE_ALGO=ring "$bin" create OK
    expect_rc zero
    expect_count 3 'OK: ' ;;
  badenv_np2) # a malformed value on one rank: an error on both, not a hang
    job 2 "$wrap" 1 GRADSYNC_TIMEOUT=abc -- "$bin" create PARSE "GRADSYNC_TIMEOUT=abc"
    expect_rc zero
    expect_count 2 'OK: parse error'
    expect_out 'rank 0: OK: .*rank 1 failed \(parse error\)' ;;
  badenv_np3)
    job 3 "$wrap" 2 GRADSYNC_NODE=x -- "$bin" create PARSE "GRADSYNC_NODE=x"
    expect_rc zero
    expect_count 3 'OK: parse error'
    expect_out 'rank 1: OK: .*rank 2 failed' ;;
  thread_single_np2)
    job 2 "$bin" thread single
    expect_rc zero
    expect_count 2 'OK: refused: .*thread level MPI_THREAD_SINGLE' ;;
  thread_funneled_np2)
    job 2 "$bin" thread funneled
    expect_rc zero
    expect_count 2 'OK: refused: .*MPI_THREAD_FUNNELED' ;;
  thread_one_rank_np3) # only rank 1 initialised MPI below SERIALIZED
    job 3 "$bin" thread single 1
    expect_rc zero
    expect_count 3 'OK: refused'
    expect_out 'rank 0: OK: refused: .*rank 1 failed' ;;
  thread_levels_np2) # SERIALIZED and MULTIPLE are accepted and reported
    job 2 "$bin" thread serialized
    expect_rc zero
    expect_count 2 'OK: thread level 2 accepted'
    job 2 "$bin" thread multiple
    expect_rc zero
    expect_count 2 'OK: thread level 3 accepted' ;;
  *)
    echo "unknown case $case"
    exit 2 ;;
esac
[ "$fails" -eq 0 ] && echo "PASS $case"
exit "$fails"
