#!/bin/sh
# gradsync syncswitch search refuses a bad --net itself, as usage (exit 2,
# one line ending in "(see --help)"), before any trial: until 2026-12-07
# the BSP trial's `gradsync run` failed on it and the search said "the BSP
# run failed", exit 1. TRAIN OPTIONS that gradsync train refuses only on
# the job's world size (a --global-batch its workers cannot share, a
# --straggler on a server's rank) end the search with exit 2 too, after the
# trainer's own message (until 2026-12-07: "the BSP run failed", exit 1).
# Usage: test_syncswitch_cli.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
fails=0
bad() { echo "FAIL $*"; fails=1; }
TRAIN="--model mlp --synthetic 64 --batch 8 --max-steps 1"
check() {
  want=$1 msg=$2
  shift 2
  "$gs" syncswitch search "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    bad "syncswitch search $*: exit $rc, expected $want: $(cat "$tmp/err" | tail -3)"
  elif ! grep -qF -- "$msg" "$tmp/err"; then
    bad "syncswitch search $*: no '$msg' in: $(cat "$tmp/err")"
  elif [ "$want" -eq 2 ] && { [ "$(wc -l < "$tmp/err")" -ne 1 ] || [ -s "$tmp/out" ] ||
                              ! grep -q '(see --help)$' "$tmp/err"; }; then
    bad "syncswitch search $*: not one usage line: $(cat "$tmp/out" "$tmp/err")"
  else
    echo "ok   syncswitch search $*: exit $rc"
  fi
}
check 2 "--net: unknown network 'bogus'" -np 3 --ps 1 --net bogus -- $TRAIN
check 2 "--net: unknown network '0bit'" -np 3 --ps 1 --net 0bit -- $TRAIN
check 2 "--net shm" -np 3 --ps 1 --net shm -- $TRAIN
check 2 "--net needs a rate" -np 3 --ps 1 --net
# Usage refused by the BSP trial itself: exit 2, train's reason, no further trial.
refused() {
  want=$1
  shift
  "$gs" syncswitch search "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 2 ]; then
    bad "syncswitch search $*: exit $rc, expected 2: $(tail -3 "$tmp/err")"
  elif ! grep -qF -- "$want" "$tmp/err" || ! grep -q 'TRAIN OPTIONS: refused by gradsync train' "$tmp/err" ||
       grep -q 'switch:offline' "$tmp/out"; then
    bad "syncswitch search $*: $(cat "$tmp/out" "$tmp/err")"
  else
    echo "ok   syncswitch search $*: exit 2"
  fi
}
refused "who cannot share it equally" -np 4 --ps 1 --steps 1 -- --model mlp --synthetic 64 \
  --max-steps 1 --global-batch 16
refused "is a parameter server, not a worker" -np 3 --ps 1 --steps 1 -- $TRAIN --straggler 2:3
exit $fails
