#!/usr/bin/env bash
# Fuzzes every parser with libFuzzer under AddressSanitizer and UBSan.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  time per target (default 60)
#   TARGET   idx, checkpoint, profile, cost (default: all, one after another)
#
# Installs clang from Debian's packages if missing, builds the targets in
# build-fuzz/ (clang, -fsanitize=fuzzer-no-link,address,undefined over the
# whole library), seeds an empty corpus directory from the library (make
# seeds) and fuzzes each target from tests/fuzz/corpus/<target>/. New inputs
# are then merged back into that directory with -merge=1, so it keeps a
# minimal set covering what was found (seed_* and crash-* files are always
# kept: crash-* are fixed crashers, regression tests); new crashes are left in
# build-fuzz/artifacts/<target>/ and make the script exit non-zero.
# Environment: FUZZ_JOBS (default 1), FUZZ_MAX_LEN (default 8192),
# FUZZ_BUILD (default build-fuzz).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(idx checkpoint profile cost)
jobs=${FUZZ_JOBS:-1}
max_len=${FUZZ_MAX_LEN:-8192}
build=${FUZZ_BUILD:-build-fuzz}
case "$build" in /*) ;; *) build=$root/$build ;; esac

case "$secs" in
  ''|*[!0-9]*) echo "fuzz: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;;
esac
for t in "${targets[@]}"; do
  case "$t" in
    idx|checkpoint|profile|cost) ;;
    *) echo "fuzz: unknown target '$t' (idx, checkpoint, profile, cost)" >&2; exit 2 ;;
  esac
done

# clang with libFuzzer's runtime (Debian's clang package ships it).
if ! command -v clang >/dev/null ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}' |
     clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
  echo "fuzz: installing clang (with libFuzzer)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "fuzz: need root or sudo to install clang" >&2; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends clang
  if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}' |
       clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
    ver=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p')
    $SUDO apt-get install -y -qq --no-install-recommends "libclang-rt-${ver}-dev" ||
      { echo "fuzz: clang cannot link -fsanitize=fuzzer" >&2; exit 1; }
  fi
fi

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRADSYNC_SANITIZE=address,undefined -DGRADSYNC_FUZZ=ON -DGRADSYNC_WERROR=OFF \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_make_seeds \
  $(for t in "${targets[@]}"; do echo "fuzz_$t"; done)

corpus_root=$root/tests/fuzz/corpus
status=0
for t in "${targets[@]}"; do
  corpus=$corpus_root/$t
  mkdir -p "$corpus" "$build/artifacts/$t" "$build/new/$t"
  if [ -z "$(ls -A "$corpus" 2>/dev/null)" ]; then
    "$build/tests/fuzz/fuzz_make_seeds" "$corpus_root"
    [ "$t" = profile ] && cp profiles/vgg16.json "$corpus/"
  fi
  echo "fuzz: $t for ${secs}s from $(ls "$corpus" | wc -l) seeds"
  # New inputs go to a scratch directory (first corpus argument); the
  # committed corpus is only read here and rewritten by the merge below.
  # With -jobs, libFuzzer writes fuzz-N.log into the current directory:
  # run from the build directory.
  par=()
  [ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
  set +e
  (cd "$build" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "tests/fuzz/fuzz_$t" "new/$t" "$corpus" \
      -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      "${par[@]}" -print_final_stats=1 -artifact_prefix="artifacts/$t/") 2>&1 |
    tee "$build/fuzz_$t.log" |
    grep -E '^(#[0-9]+ *(DONE|INITED)|stat::|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' || true
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $rc): see $build/fuzz_$t.log and $build/artifacts/$t/" >&2
    status=1
  fi
  # A minimal set covering the old corpus and the new inputs.
  merged=$build/merged/$t
  rm -rf "$merged"
  mkdir -p "$merged"
  ASAN_OPTIONS=detect_leaks=0 "$build/tests/fuzz/fuzz_$t" -merge=1 -max_len="$max_len" \
    "$merged" "$corpus" "$build/new/$t" >"$build/merge_$t.log" 2>&1 ||
    { echo "fuzz: merge of $t failed: see $build/merge_$t.log" >&2; status=1; continue; }
  # libFuzzer names merged files by their SHA-1. The seeds (seed_*) and
  # the fixed crashers (crash-*, kept as regression tests) stay whatever
  # the merge says, under their own names.
  for f in "$corpus"/*; do
    [ -e "$f" ] || continue
    sum=$(sha1sum "$f" | cut -d' ' -f1)
    case "$(basename "$f")" in
      seed_*|crash-*) rm -f "$merged/$sum"; cp "$f" "$merged/" ;;
      *) if [ -e "$merged/$sum" ] && [ "$sum" != "$(basename "$f")" ]; then
           mv "$merged/$sum" "$merged/$(basename "$f")"
         fi ;;
    esac
  done
  rm -f "$corpus"/*
  cp "$merged"/* "$corpus"/
  rm -rf "$build/new/$t"
  echo "fuzz: $t corpus: $(ls "$corpus" | wc -l) files, $(du -sk "$corpus" | cut -f1) KiB"
done
exit $status
