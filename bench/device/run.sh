#!/usr/bin/env bash
# Runs benchmarks on the lent machine (16 cores: a core per rank for the 8-rank
# runs that the 2-core host runs 4 to a core), from the device tool's copy of
# a clean tree, with the binaries that bench/device/bundle.sh packed from the
# same commit. Probes the machine (cores, network namespaces, tc's tbf) first;
# a driver that runs past its share of the time is stopped and what it wrote
# is kept. Every result file, stamped as bench/lib.sh does, goes into
# $OUT/results.tgz with the log; copy them into bench/results on the host.
#
# Usage (through the device tool, carry .devbundle):
#   bash bench/device/run.sh SECONDS DRIVER[:SECONDS] ...
#   (after bench/device/bundle.sh [BUILD_DIR] on the host, from a clean tree)
#   e.g. bash bench/device/run.sh 560 bench/sparse.sh:200 bench/kfac/iter.sh
set -uo pipefail
total=${1:?usage: bench/device/run.sh SECONDS DRIVER[:SECONDS] ...}
shift
start=$(date +%s)
out=${OUT:-/tmp/gs-out}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
res=/tmp/gs-results
mkdir -p "$res"
tar -C /tmp -xzf .devbundle/gs.tgz || exit 2
# shellcheck source=SCRIPTDIR/env.sh
. bench/device/env.sh
mkdir -p build-dev/src/kfac
ln -sf "$GS_BUNDLE/bin/gradsync" build-dev/gradsync
ln -sf "$GS_BUNDLE/bin/kfac_iter" build-dev/src/kfac/kfac_iter
echo "== probe: $(nproc) cores, $(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1)," \
     "$(uname -r), $(python3 --version 2>&1), $(mpirun --version | head -1)"
probe_ok=1
ip netns add gsprobe && ip link add gsp0 type veth peer name gsp1 &&
  ip link set gsp1 netns gsprobe && ip link set gsp0 up &&
  tc qdisc add dev gsp0 root tbf rate 1gbit burst 256kb latency 50ms &&
  ip link add gsbr type bridge || probe_ok=0
ip link del gsbr 2>/dev/null; ip link del gsp0 2>/dev/null; ip netns del gsprobe 2>/dev/null
echo "== probe: network namespaces, veth, bridge and tbf: $([ $probe_ok = 1 ] && echo ok || echo FAILED)"
export BENCH_COPY_OF
BENCH_COPY_OF=$(cat .devbundle/commit)
# The copy may hold a .git of an older commit (seen: it called the tree's
# newer files changes); the bundle's commit is what the copy is.
export GIT_DIR=/nonexistent
export BENCH_PREBUILT=1 BENCH_BUILD=build-dev BENCH_OUT=$res
for d in "$@"; do
  name=${d%%:*} limit=${d#*:}
  left=$((total - ($(date +%s) - start) - 15))
  [ "$limit" = "$d" ] || [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt 20 ]; then echo "== $name: skipped, ${left}s left"; continue; fi
  echo "== $name (up to ${limit}s) $(date +%T)"
  timeout -k 5 "$limit" bash "$name"
  echo "== $name: exit $? $(date +%T)"
  tar -C "$res" -czf "$out/results.tgz" .
done
