#!/usr/bin/env bash
# Packs what the benchmarks need to run on the lent GPU machine (16 cores,
# a different Linux image, no package registry): gradsync's binaries from
# BUILD_DIR, Open MPI and PMIx with their components and help files, ip and
# tc, and every shared library these load (the C library aside), into
# .devbundle/gs.tgz (ignored by git; the device tool carries it).
# bench/device/run.sh unpacks it there and runs Open MPI relocated
# (OPAL_PREFIX), so nothing of the machine's own system is replaced.
#
# Usage: bench/device/bundle.sh BUILD_DIR
set -euo pipefail
build=$(realpath "${1:?usage: bench/device/bundle.sh BUILD_DIR}")
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
# The binaries must be what the copy's commit says: the build's source tree
# (this checkout or a worktree of it) clean at this checkout's HEAD, and
# the build brought up to date.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[ -n "$src" ] || { echo "bundle: $build is not a configured build directory" >&2; exit 2; }
for t in . "$src"; do
  if [ -n "$(git -C "$t" status --porcelain --untracked-files=no -- . ':(exclude)bench/results')" ]; then
    echo "bundle: $t has uncommitted changes" >&2
    exit 2
  fi
done
if [ "$(git -C "$src" rev-parse HEAD)" != "$(git rev-parse HEAD)" ]; then
  echo "bundle: $build is built from $src at $(git -C "$src" rev-parse --short HEAD)," \
       "not at this checkout's $(git rev-parse --short HEAD)" >&2
  exit 2
fi
cmake --build "$build" -j"$(nproc)" --target gradsync_cli kfac_iter >/dev/null
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
git rev-parse HEAD > .devbundle/commit
ls -la .devbundle
