#!/usr/bin/env bash
# Embedding-bag kernels against PyTorch, one thread (issue 37's kernel
# targets: forward >= 1x nn.EmbeddingBag, fused backward + row-wise Adagrad
# >= 2x PyTorch's sparse gradient + update), on a table of 1 M rows, dims
# 16/64/128, pooling 1/10/55, ids uniform and Zipf 1.15, batch 2048:
# bench/embed/kernels.py runs both in one process on the same table
# (libgradsync through ctypes). Writes $BENCH_OUT/embed_kernels.jsonl and .md.
#
# Usage: bench/embed/kernels.sh [REPS]   (default 9)
#   BENCH_QUICK=1: 100k rows, dims 16/64, pooling 1/10, 3 reps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
reps=${1:-9}
args=(--rows 1000000 --dims 16,64,128 --pooling 1,10,55 --reps "$reps")
[ "$BENCH_QUICK" = 1 ] && args=(--rows 100000 --dims 16,64 --pooling 1,10 --reps 3)
bench_build gradsync
py=/usr/bin/python3
[ -x "$py" ] || py=python3
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
out=$BENCH_OUT/embed_kernels.jsonl
argv=("$py" bench/embed/kernels.py --lib "$BENCH_BUILD/libgradsync.so" "${args[@]}")
echo "== embedding-bag kernels ($(date +%T))" >&2
"${argv[@]}" >"$out"
bench_stamp "$out" "$(bench_quote "${argv[@]}")"
md=$BENCH_OUT/embed_kernels.md
"$py" bench/embed/summarize_kernels.py "$out" >"$md"
bench_stamp "$md" "bench/embed/kernels.sh $*"
cat "$md"
