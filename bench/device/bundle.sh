#!/usr/bin/env bash
# Packs what the benchmarks need to run on the lent GPU machine (16 cores,
# a different Linux image, no package registry): gradsync's binaries from
# BUILD_DIR, Open MPI and PMIx with their components and help files, ip and
# tc, and every shared library these load (the C library aside), into
# .devbundle/gs.tgz (ignored by git; the device tool carries it).
# bench/device/run.sh unpacks it there and runs Open MPI relocated
# (OPAL_DESTDIR, PMIX_DESTDIR), so nothing of the machine's own system is replaced.
#
# Usage: bench/device/bundle.sh [BUILD_DIR]   (default build)
set -euo pipefail
# bench/lib.sh's checks: a clean tree (its commit is the bundle's), and a
# build directory configured from this checkout and brought up to date.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
BENCH_BUILD=${1:-$BENCH_BUILD}
bench_build gradsync_cli kfac_iter
build=$(realpath "$BENCH_BUILD")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
r=$stage/gs
mkdir -p "$r/bin" "$r/lib" "$r/usr/bin" "$r/usr/lib/x86_64-linux-gnu" "$r/usr/share"
cp "$build/gradsync" "$build/src/kfac/kfac_iter" "$r/bin/"
cp /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$r/usr/bin/"
ln -s orterun "$r/usr/bin/mpirun"
cp "$(command -v ip)" "$(command -v tc)" "$r/bin/"
cp -a /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \
   "$r/usr/lib/x86_64-linux-gnu/"
cp -a /usr/share/openmpi "$r/usr/share/"
mkdir -p "$r/etc/openmpi" && cp /etc/openmpi/openmpi-mca-params.conf "$r/etc/openmpi/"
# The shared libraries: ldd's closure of every binary and component, minus
# the C library's own (the machine's newer glibc runs these).
{
  find "$r/bin" "$r/usr/bin" -type f
  find "$r/usr/lib/x86_64-linux-gnu" -name '*.so*' -type f
} | while read -r f; do ldd "$f" 2>/dev/null || true; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libresolv)\.so' |
  while read -r lib; do cp -L "$lib" "$r/lib/"; done
mkdir -p .devbundle
tar -C "$stage" -czf .devbundle/gs.tgz gs
echo "$BENCH_S_COMMIT" > .devbundle/commit
ls -la .devbundle
