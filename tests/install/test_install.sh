#!/usr/bin/env bash
# Installs a build into a temporary prefix and builds programs against it
# (libgradsync; nn + kfac + ps; the training library) twice, with
# pkg-config and with CMake's find_package(gradsync), then runs them on 2
# ranks. Usage: test_install.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
echo "installed into $tmp/prefix"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
mpicc "$here/consumer.c" $(pkg-config --cflags --libs gradsync) \
  -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/consumer_pc"
mpicc "$here/consumer_kfac.c" $(pkg-config --cflags --libs gradsync-kfac) \
  -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/consumer_kfac_pc"
mpicc "$here/consumer_train.c" $(pkg-config --cflags --libs gradsync-train) \
  -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/consumer_train_pc"
echo "pkg-config build: ok (gradsync, gradsync-kfac, gradsync-train)"
mkdir "$tmp/src"
cp "$here/consumer.c" "$here/consumer_kfac.c" "$here/consumer_train.c" "$tmp/src/"
cp "$here/CMakeLists.txt.in" "$tmp/src/CMakeLists.txt"
cmake -S "$tmp/src" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_RPATH="$tmp/prefix/lib" >/dev/null
cmake --build "$tmp/b" >/dev/null
echo "find_package build: ok"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe "$tmp/consumer_pc"
mpirun -np 2 --oversubscribe "$tmp/b/consumer_cmake"
mpirun -np 2 --oversubscribe "$tmp/consumer_kfac_pc"
mpirun -np 2 --oversubscribe "$tmp/b/consumer_kfac_cmake"
mpirun -np 2 --oversubscribe "$tmp/consumer_train_pc"
mpirun -np 2 --oversubscribe "$tmp/b/consumer_train_cmake"
echo "both consumers ran on 2 ranks: ok"
