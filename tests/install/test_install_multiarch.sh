#!/usr/bin/env bash
# The pkg-config files of a multiarch install (LIBDIR lib/x86_64-linux-gnu,
# as GNUInstallDirs picks for --prefix /usr on Debian): configures the
# source with that LIBDIR (configuring writes the .pc files), lays out a
# prefix as `cmake --install` would from it (the libraries and headers of
# the built tree's install, the new .pc files), and checks that
# pkg-config's directories exist and that programs build against them and
# run. Until 2026-12-07 the files said prefix=${pcfiledir}/../.., one level
# short: includedir and libdir named directories that do not exist.
# Usage: test_install_multiarch.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libdir=lib/x86_64-linux-gnu
cmake --install "$build" --prefix "$tmp/built" >/dev/null
cmake -S "$src" -B "$tmp/cfg" -DCMAKE_INSTALL_LIBDIR=$libdir \
  -DGRADSYNC_TESTS=OFF >/dev/null
p=$tmp/prefix
mkdir -p "$p/$libdir/pkgconfig"
cp -a "$tmp/built/include" "$p/"
cp -a "$tmp/built/lib/"*.so* "$tmp/built/lib/"*.a "$p/$libdir/"
cp "$tmp/cfg/"gradsync*.pc "$p/$libdir/pkgconfig/"
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
for pc in gradsync gradsync-nn gradsync-kfac gradsync-train; do
  for var in libdir includedir; do
    d=$(pkg-config --variable=$var $pc)
    if [ ! -d "$d" ]; then
      echo "FAIL $pc: $var '$d' is not a directory"
      exit 1
    fi
  done
  for flag in $(pkg-config --cflags-only-I --libs-only-L $pc); do
    d=${flag#-[IL]}
    if [ ! -d "$d" ]; then
      echo "FAIL $pc: $flag names no directory"
      exit 1
    fi
  done
done
echo "pkg-config's directories exist under $libdir: ok"
mpicc "$here/consumer.c" $(pkg-config --cflags --libs gradsync) \
  -Wl,-rpath,"$p/$libdir" -o "$tmp/consumer_pc"
mpicc "$here/consumer_train.c" $(pkg-config --cflags --libs gradsync-train) \
  -Wl,-rpath,"$p/$libdir" -o "$tmp/consumer_train_pc"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe "$tmp/consumer_pc"
mpirun -np 2 --oversubscribe "$tmp/consumer_train_pc"
echo "programs built with pkg-config under $libdir ran on 2 ranks: ok"
