#!/usr/bin/env bash
# Runs one Python test of the binding on NP ranks under mpirun, with
# Debian's interpreter and the build tree's package on PYTHONPATH.
# Usage: run.sh PYTHONPATH MPIEXEC NP SCRIPT [ARGS...]
# Exits 77 (ctest's SKIP_RETURN_CODE) with a message when the interpreter
# has no torch: the binding's tests need python3-torch
# (scripts/install-deps.sh --with-torch).
set -euo pipefail
pypath=$1 mpiexec=$2 np=$3
shift 3
py=${GRADSYNC_TEST_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $py cannot import torch (install python3-torch: scripts/install-deps.sh --with-torch)"
  exit 77
fi
export PYTHONPATH=$pypath${PYTHONPATH:+:$PYTHONPATH}
exec "$mpiexec" -np "$np" --oversubscribe "$py" "$@"
