#!/usr/bin/env bash
# Training throughput of gradsync's nn engine against PyTorch, one process and
# one thread, batch 64, on the CNN and the small ResNet (bench/nn/README.md).
# Both run in the same invocation, alternating, several rounds each; the
# results go to bench/results/nn_throughput.{md,json}.
#
# Usage: bench/nn/throughput.sh [BUILD_DIR] [ROUNDS] [SECONDS_PER_RUN]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-5}
secs=${3:-5}
bin="$build/src/nn/nn_throughput"
[ -x "$bin" ] || cmake --build "$build" --target nn_throughput
# Debian's python3-torch lives in /usr/lib/python3/dist-packages: use the
# system interpreter even where another python3 comes first on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
# One thread everywhere: OpenBLAS (both sides), OpenMP and oneDNN (PyTorch).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec "$py" bench/nn/throughput.py --bin "$bin" --rounds "$rounds" \
  --seconds "$secs" --out bench/results/nn_throughput
