#!/bin/sh
# K-FAC's per-rank state files across a change of world size (an elastic
# resize, docs/ELASTIC.md): a run stopped on 3 ranks with --global-batch
# and resumed on 2 starts its factors afresh (a note says so), and once its
# first commit is in, the old ranks' files are gone: the directory holds the
# files of its checkpoint's step, one per rank of the run that wrote it, and
# no others. The same growing from 2 ranks to 4. Until 2026-12-07 every
# old rank's file stayed for good.
#   test_kfac_resize.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GRADSYNC_CALIBRATE=0 GRADSYNC_TIMEOUT=60
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=1; }
# 960 samples, a global batch of 48: 20 steps an epoch on any size.
args="--model mlp --synthetic 960 --global-batch 48 --epochs 2 --policy wfbp --optimizer kfac
      --kfac-inv-every 3 --commit-every 5"
# The K-FAC files in DIR, sorted, on one line.
files() { (cd "$1" && ls kfac.rank*.gsck 2>/dev/null | sort | tr '\n' ' '); }
for dist in dkfac dp; do
  # from-np to-np stop-step expected-files
  for spec in "3 2 15 kfac.rank0.step40.gsck kfac.rank1.step40.gsck" \
              "2 4 15 kfac.rank0.step40.gsck kfac.rank1.step40.gsck kfac.rank2.step40.gsck kfac.rank3.step40.gsck"; do
    set -- $spec
    from=$1 to=$2 stop=$3
    shift 3
    want="$* "
    dir=$tmp/$dist-$from-$to
    # shellcheck disable=SC2086
    if ! timeout 120 "$gs" run -np "$from" -- "$gs" train $args --kfac-dist $dist \
         --checkpoint "$dir" --stop-at-step "$stop" > "$tmp/cut.log" 2>&1; then
      bad "$dist: the run on $from ranks failed: $(tail -3 "$tmp/cut.log")"
      continue
    fi
    # shellcheck disable=SC2086
    timeout 120 "$gs" run -np "$to" -- "$gs" train $args --kfac-dist $dist \
      --checkpoint "$dir" --resume > "$tmp/resumed.log" 2>&1
    rc=$?
    got=$(files "$dir")
    if [ "$rc" -eq 0 ] && grep -q "per-rank state is of $from ranks, not $to" "$tmp/resumed.log" &&
       [ "$got" = "$want" ]; then
      ok "$dist: stopped on $from ranks, resumed on $to: only the last checkpoint's $to files stay"
    else
      bad "$dist: stopped on $from ranks, resumed on $to: exit $rc, files '$got', expected '$want': $(tail -3 "$tmp/resumed.log")"
    fi
  done
done
exit $fails
