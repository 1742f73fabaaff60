# What the commit tests share (test_commit.sh, test_commit_compress.sh):
# their arguments (GRADSYNC CKPT_COMPARE: gs, cmp_ckpt), a scratch directory
# (tmp), the settings that make runs comparable bitwise (the ring, no
# calibration), ok/bad counters, and train NAME ARGS...: gradsync train on 2
# ranks with the caller's $args and checkpoint directory $tmp/NAME, its
# output in $tmp/NAME.log. Sourced.
# shellcheck shell=bash
set -u
gs=$1
cmp_ckpt=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GRADSYNC_ALLREDUCE_ALGO=ring GRADSYNC_CALIBRATE=0
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
train() { # train NAME ARGS...
  local name=$1; shift
  # shellcheck disable=SC2086,SC2154
  "$gs" run -np 2 -- "$gs" train $args --checkpoint "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1
}
