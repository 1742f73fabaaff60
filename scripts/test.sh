#!/usr/bin/env bash
# Installs what is missing, builds gradsync, and runs every test:
#   1. a Release build with -Werror: unit tests, multi-rank tests, CLI tests;
#   2. the same tests under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the threaded parts (progress thread, requests) under ThreadSanitizer.
# Usage: scripts/test.sh [--quick]   (--quick: step 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

jobs=$(nproc)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

# Open MPI refuses to run as root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

run_suite() {
  local dir=$1; shift
  echo "=== $dir: configure and build ($*)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "=== $dir: tests"
  (cd "$dir" && ctest --output-on-failure --timeout 300)
}

run_suite build
if [ $quick -eq 0 ]; then
  ASAN_OPTIONS=detect_leaks=1 run_suite build-asan -DGRADSYNC_SANITIZE=address,undefined \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
  run_suite build-tsan -DGRADSYNC_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGRADSYNC_TSAN_ONLY=ON
fi
echo "=== all test suites passed"
