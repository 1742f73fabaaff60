#!/usr/bin/env bash
# Training throughput of gradsync's nn engine against PyTorch, one process and
# one thread, batch 64, on the CNN and the small ResNet (bench/nn/README.md).
# Both run in the same invocation, alternating, several rounds each; the
# results go to bench/results/nn_throughput.{md,json}, stamped with the
# commit, command and machine (bench/lib.sh).
#
# Usage: bench/nn/throughput.sh [BUILD_DIR] [ROUNDS] [SECONDS_PER_RUN]
#   BENCH_QUICK=1: 1 round of 1 s per implementation and model.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
rounds=${2:-5}
secs=${3:-5}
if [ "$BENCH_QUICK" = 1 ]; then
  rounds=${2:-1} secs=${3:-1}
fi
bench_build nn_throughput gradsync_cli
bin="$build/src/nn/nn_throughput"
# Both sides use OpenBLAS: give them the kernels gradsync itself would run
# (cli_blas.c; Debian's 0.3.21 takes some new CPUs for a Prescott). The
# launcher sets OPENBLAS_CORETYPE where that is needed and its rank prints it.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  OPENBLAS_CORETYPE=$("$build/gradsync" run -np 1 -- /bin/sh -c 'echo "${OPENBLAS_CORETYPE:-}"')
  [ -n "$OPENBLAS_CORETYPE" ] && export OPENBLAS_CORETYPE || unset OPENBLAS_CORETYPE
fi
# Debian's python3-torch lives in /usr/lib/python3/dist-packages: use the
# system interpreter even where another python3 comes first on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
# One thread everywhere: OpenBLAS, OpenMP and oneDNN (both sides; the C
# binary also sets them through gs_nn_set_threads).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
argv=("$py" bench/nn/throughput.py --bin "$bin" --rounds "$rounds" --seconds "$secs"
      --out "$BENCH_OUT/nn_throughput")
echo "== nn throughput: $rounds round(s) of $secs s ($(date +%T))" >&2
"${argv[@]}"
cmd=$(bench_quote ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE} \
      OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "${argv[@]}")
bench_stamp "$BENCH_OUT/nn_throughput.json" "$cmd"
bench_stamp "$BENCH_OUT/nn_throughput.md" "$cmd"
