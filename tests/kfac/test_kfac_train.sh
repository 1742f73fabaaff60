#!/usr/bin/env bash
# gradsync train --optimizer kfac, end to end on a synthetic data set
# (shared memory):
#   - 2 ranks x batch 16 reach the weights of 1 rank x batch 32 for dkfac
#     and spd, under the wfbp and dear policies (dear completes each
#     tensor's average only in the next forward: K-FAC must wait for all);
#   - dp trains; the JSON summary carries K-FAC's breakdown;
#   - bad K-FAC options exit 2 with a message naming the option.
# Usage: test_kfac_train.sh GRADSYNC CKPT_COMPARE
set -u
gs=$1
cmp_ckpt=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GRADSYNC_ALLREDUCE_ALGO=ring GRADSYNC_CALIBRATE=0 OPENBLAS_NUM_THREADS=1
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

train() { # train NP DIR ARGS...
  local np=$1 dir=$2; shift 2
  "$gs" run -np "$np" -- "$gs" train --synthetic 2048 --epochs 1 --max-steps 6 \
    --model mlp --checkpoint "$dir" --json --optimizer kfac --kfac-inv-every 2 "$@" \
    > "$dir.log" 2>&1
}

train 1 "$tmp/ref" --batch 32 --policy wfbp || bad "reference run failed: $(tail -3 "$tmp/ref.log")"
for dist in dkfac spd; do
  for pol in wfbp dear; do
    d="$tmp/${dist}_$pol"
    if train 2 "$d" --batch 16 --policy "$pol" --kfac-dist "$dist" &&
       "$cmp_ckpt" mlp "$tmp/ref/checkpoint.gsck" "$d/checkpoint.gsck" 1e-3 > "$d.cmp"; then
      ok "$dist under $pol: 2 ranks x 16 = 1 rank x 32 ($(cat "$d.cmp"))"
    else
      bad "$dist under $pol: 2 ranks x 16 differ from 1 x 32: $(cat "$d.cmp" 2>/dev/null; tail -3 "$d.log")"
    fi
  done
done
if train 3 "$tmp/dp" --batch 16 --kfac-dist dp --kfac-inverse eig &&
   grep -q '"kfac_factor_compute' "$tmp/dp.log" && grep -q '"kfac_broadcast' "$tmp/dp.log"; then
  ok "dp on 3 ranks trains and reports K-FAC's breakdown"
else
  bad "dp on 3 ranks: $(tail -5 "$tmp/dp.log")"
fi

expect2() { # what pattern ARGS...
  local what=$1 pat=$2; shift 2
  "$gs" train --synthetic 64 --max-steps 1 "$@" > "$tmp/err.log" 2>&1
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pat" "$tmp/err.log"; then ok "$what (exit 2)"
  else bad "$what: exit $rc, output: $(head -c 300 "$tmp/err.log")"; fi
}
expect2 "unknown optimizer" "--optimizer" --optimizer adam
expect2 "unknown scheme" "--kfac-dist" --optimizer kfac --kfac-dist mpd
expect2 "unknown inverse" "--kfac-inverse" --optimizer kfac --kfac-inverse lu
expect2 "inverse interval 0" "--kfac-inv-every" --optimizer kfac --kfac-inv-every 0
expect2 "factor interval -1" "--kfac-cov-every" --optimizer kfac --kfac-cov-every -1
expect2 "damping 0" "--kfac-damping" --optimizer kfac --kfac-damping 0
expect2 "decay 1" "--kfac-decay" --optimizer kfac --kfac-decay 1
expect2 "KL clip negative" "--kfac-kl-clip" --optimizer kfac --kfac-kl-clip -0.1
expect2 "a K-FAC option without --optimizer kfac" "--optimizer kfac" --kfac-dist spd
exit $fails
