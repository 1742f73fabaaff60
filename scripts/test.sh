#!/usr/bin/env bash
# Installs what is missing, builds gradsync, and runs every test once:
#   1. a Release build with -Werror (everything built): the tests labelled
#      "long" (minutes of process orchestration) and "release" (the Python
#      binding, the installed library's consumer, Release time bounds);
#   2. every other test under AddressSanitizer + UndefinedBehaviorSanitizer
#      (an optimised build, RelWithDebInfo);
#   3. the threaded parts (progress thread, requests) under ThreadSanitizer.
# Usage: scripts/test.sh [--quick]   (--quick: every test in step 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
# --with-torch: the Python binding's tests (ctest -L python) need python3-torch.
scripts/install-deps.sh --with-torch

jobs=$(nproc)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

# Open MPI refuses to run as root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# When a rank exits non-zero, mpirun sends the job's ranks SIGTERM and
# waits odls_base_sigkill_timeout (1 s) before SIGKILL, even when every
# rank has already exited. gradsync's ranks install no SIGTERM handler
# (the default action ends them at once), so the second is only waiting;
# the tests run some hundreds of jobs that fail on purpose (refusals, kills):
# 0 saved 153 s of the Release step's 960 on 2026-12-06. Users' jobs keep
# Open MPI's default (a program of theirs may use the grace).
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-0}

# suite_targets DIR REGEX: the targets of the programs that the tests whose
# names match REGEX run from DIR (as DIR's CTestTestfile.cmake files name
# them; a path under DIR that is no target, such as a directory, is not
# one), or nothing when one of those tests runs none of its own.
suite_targets() {
  local dir=$1 re=$2 abs known
  abs=$(cd "$dir" && pwd)
  known=$(cmake --build "$dir" --target help 2>/dev/null | awk '/^\.\.\. /{printf "%s ", $2}')
  find "$dir" -name CTestTestfile.cmake -exec grep -h '^add_test(' {} + |
    awk -v re="$re" -v abs="$abs/" -v known=" $known" '{
      name = substr($1, 10)
      if (name !~ re) next
      own = 0
      for (i = 2; i <= NF; i++) {
        t = $i; gsub(/[")]/, "", t)
        if (index(t, abs) != 1) continue
        n = split(t, p, "/")
        tg = p[n] == "gradsync" ? "gradsync_cli" : p[n]
        if (index(known, " " tg " ") == 0) continue
        own = 1
        seen[tg] = 1
      }
      if (!own) all = 1
    } END { if (!all) for (t in seen) printf "%s ", t }'
}

# run_suite DIR "CTEST ARGS" CMAKE ARGS...
run_suite() {
  local dir=$1 filter=$2 t0=$SECONDS; shift 2
  echo "=== $dir: configure and build ($*)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  # A suite chosen by name (-R) builds only its tests' programs and the
  # tool; everything else builds all.
  local targets=""
  [[ "$filter" == "-R "* ]] && targets=$(suite_targets "$dir" "${filter#-R }")
  if [ -n "$targets" ]; then
    # shellcheck disable=SC2086
    cmake --build "$dir" -j"$jobs" --target gradsync_cli $targets
  else
    cmake --build "$dir" -j"$jobs"
  fi
  echo "=== $dir: built in $((SECONDS - t0)) s; tests"
  t0=$SECONDS
  # shellcheck disable=SC2086
  (cd "$dir" && ctest --output-on-failure --timeout 300 $filter)
  echo "=== $dir: tests passed in $((SECONDS - t0)) s"
}

# Each test runs once in the full command (until 2026-12-05 most ran in
# both steps 1 and 2: 5 minutes of 52); --quick runs all in step 1.
# Labels: tests/CMakeLists.txt, gradsync_long_test and gradsync_release_test.
if [ $quick -eq 1 ]; then run_suite build ""; else run_suite build "-L ^(long|release)$"; fi
if [ $quick -eq 0 ]; then
  # AddressSanitizer + UBSan: every test but those labelled "long" (minutes
  # of process orchestration or a larger repeat of a path a shorter test
  # covers), which step 1 ran; those labelled "release" too where this
  # build has them (with looser time bounds).
  run_suite build-asan "-LE long" -DGRADSYNC_SANITIZE=address,undefined \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
  # ThreadSanitizer: the threaded parts (the communicator's progress thread
  # and requests, the engine's threads) on 2, 3 and 8 ranks (races that
  # need more ranks than cores to show; 4 in the hierarchical case), and the trainer and replay, whose
  # main threads issue collectives beside the engine's; and the watchdogs
  # (a collective error or stall on one rank, a healthy long run, a peer
  # that left (gs_comm_leave) and the looks for it, made on the waiting
  # thread or, while MPI's own collectives block, the watchdog's), an engine
  # stall), the engine's agreement and DeAR's buffer contract on 2 ranks;
  # the fused optimizer's thread pool; a compressed plan regrouped while
  # the engine runs, and per-tensor memory set into one; and a signal routed
  # to its own thread (gs_signal_route) while the layers train; and the
  # DLRM step, whose next batch's ids stay in flight on the progress thread
  # while the main thread trains, and its checkpoints' writer threads
  # (commits in the background); the elastic supervisor's host checks in
  # a thread beside its watch of the launch.
  run_suite build-tsan "-R ^(elastic_growth_check|comm_collectives_np[238]|comm_collectives_hier_np4|comm_mismatch_np3|engine_np[2348]|cli_threads|comm_fault_(error|stall|healthy)_np2|comm_fault_(leave(_ok)?|look_thread)_np3|engine_(stall|agree|dear_contract)_np2|comm_sparse_np[234]|comm_sparse_nodes_np4|nn_test_nn_optim|nn_test_nn_signal|xchg_engine_(regroup|resume)_np2|embed_dlrm_dist_np3|embed_dlrm_ckpt_background_np2)$" \
    -DGRADSYNC_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
echo "=== all test suites passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
