#!/usr/bin/env bash
# The emulated link's point-to-point time by message size (docs/NETWORK.md):
# bench/link_p2p.c (an MPI ping-pong, 64 kB to 64 MB) between two nodes of
# `gradsync run --net RATE`, at 1gbit and 100mbit, with run's default token
# bucket and, as the peer in the same run, a bucket of one GSO packet
# (--burst 70000). link_fit.py fits T = a + b*M to each and reports the worst
# deviation. Writes bench/results/link_p2p.md and link_p2p_*.jsonl.
#
# Usage: sudo-less root: bench/link_p2p.sh [BUDGET_S per size, default 5]
#   BENCH_QUICK=1: 64 kB to 1 MB only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
budget=${1:-5}
hi=67108864
[ "$BENCH_QUICK" = 1 ] && hi=1048576
bench_build link_p2p gradsync_cli
bin=$(find "$BENCH_BUILD" -name link_p2p -type f -perm -u+x | head -1)
gs=$BENCH_BUILD/gradsync
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
md=$BENCH_OUT/link_p2p.md
{
  echo "# Point-to-point time on the emulated link"
  echo
  echo "One-way time of one message (half an MPI ping-pong, median of 3-15), by"
  echo "size, between two nodes of \`gradsync run --net RATE\`, and the affine fit"
  echo "T = a + b*M (least squares on relative error). Each configuration is one"
  echo "run, on a host loaded by other work at the same time (2 cores shared)."
  echo
} >"$md"
for rate in 1gbit 100mbit; do
  for burst in default 70000; do
    out=$BENCH_OUT/link_p2p_${rate}_burst_${burst}.jsonl
    args=(run -np 2 --net "$rate")
    [ "$burst" = default ] || args+=(--burst "$burst")
    echo "== $rate, burst $burst ($(date +%T))" >&2
    cmd=$(bench_quote "$gs" "${args[@]}" -- "$bin" 65536 "$hi" "$budget")
    "$gs" "${args[@]}" -- "$bin" 65536 "$hi" "$budget" >"$out"
    bench_stamp "$out" "$cmd"
    python3 bench/link_fit.py "$out" "--net $rate, burst $burst" >>"$md"
  done
done
bench_stamp "$md" "bench/link_p2p.sh $*"
cat "$md"
