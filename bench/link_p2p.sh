#!/usr/bin/env bash
# The emulated link's point-to-point time by message size (docs/NETWORK.md):
# bench/link_p2p.c (an MPI ping-pong, 64 kB to 64 MB) between two nodes of
# `gradsync run --net RATE`, at 1gbit and 100mbit, on run's default link
# (GSO packets of at most 16 KiB, a bucket of one packet) and, as the peer in
# the same run, on the link run built before 2026-11-26 (the kernel's 64 KiB
# GSO packets and a bucket of 4 ms of traffic, at least 64 KiB:
# --gso 65536 --burst 500000 at 1gbit, --burst 65536 at 100mbit).
# link_fit.py fits T = a + b*M to each and reports the worst deviation.
# Writes bench/results/link_p2p.md and link_p2p_*.jsonl.
#
# Usage: root: bench/link_p2p.sh [BUDGET_S per size, default 5]
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
  echo "run; the stamp's load says how busy the 2 cores were. Wire time at the"
  echo "rate: 64 kB 0.52 ms and 64 MB 537 ms at 1 Gbit/s, ten times that at"
  echo "100 Mbit/s (tbf counts the frames' headers too, so TCP's payload gets"
  echo "about 95% of the rate)."
  echo
} >"$md"
for rate in 1gbit 100mbit; do
  old_burst=500000
  [ "$rate" = 100mbit ] && old_burst=65536
  for link in default old; do
    out=$BENCH_OUT/link_p2p_${rate}_${link}.jsonl
    args=(run -np 2 --net "$rate")
    title="--net $rate (the default link: 16 KiB packets, 18,000-byte bucket)"
    if [ "$link" = old ]; then
      args+=(--gso 65536 --burst "$old_burst")
      title="--net $rate --gso 65536 --burst $old_burst (the link before 2026-11-26)"
    fi
    echo "== $rate, $link link ($(date +%T))" >&2
    cmd=$(bench_quote "$gs" "${args[@]}" -- "$bin" 65536 "$hi" "$budget")
    "$gs" "${args[@]}" -- "$bin" 65536 "$hi" "$budget" >"$out"
    bench_stamp "$out" "$cmd"
    python3 bench/link_fit.py "$out" "$title" >>"$md"
  done
done
bench_stamp "$md" "bench/link_p2p.sh $*"
cat "$md"
