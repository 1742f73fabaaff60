#!/usr/bin/env bash
# Installs a build into a temporary prefix and builds a C++ program against
# it with pkg-config: every installed public header (gradsync.h and
# gradsync/*.h) must compile as C++ (C++11 and C++17), warnings as errors,
# and the program runs on 2 ranks. Skipped (77) without a C++ compiler.
# Usage: test_install_cxx.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v mpicxx >/dev/null || ! mpicxx --showme:command >/dev/null 2>&1 ||
   ! command -v "$(mpicxx --showme:command)" >/dev/null; then
  echo "no C++ compiler (mpicxx): skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# Every public header alone, then the program that uses them.
# OMPI_SKIP_MPICXX: Open MPI's own C++ bindings warn under -Wextra.
flags=(-Wall -Wextra -Werror -pedantic -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1)
for std in c++11 c++17; do
  for h in "$tmp/prefix/include/gradsync.h" "$tmp/prefix/include/gradsync/"*.h; do
    rel=${h#"$tmp/prefix/include/"}
    printf '#include <%s>\nint main() { return 0; }\n' "$rel" > "$tmp/one.cc"
    if ! mpicxx -std=$std "${flags[@]}" $(pkg-config --cflags gradsync) \
         -c "$tmp/one.cc" -o "$tmp/one.o" 2> "$tmp/err"; then
      echo "FAIL <$rel> does not compile as $std:"
      head -20 "$tmp/err"
      exit 1
    fi
  done
done
echo "every public header compiles as C++11 and C++17: ok"
mpicxx -std=c++11 "${flags[@]}" "$here/consumer_cxx.cc" \
  $(pkg-config --cflags --libs gradsync-train) \
  -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/consumer_cxx"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe "$tmp/consumer_cxx"
echo "C++ consumer built and ran on 2 ranks: ok"
