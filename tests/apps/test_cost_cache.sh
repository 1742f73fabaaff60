#!/usr/bin/env bash
# The calibration cache (GRADSYNC_COST_CACHE, gradsync run --cost-cache DIR):
#   - the first launch calibrates and rank 0 saves the model in one file of
#     DIR; a second launch of the same shape loads it on every rank and
#     calibrates nothing;
#   - another size gets another file (and calibrates);
#   - a corrupt file is calibrated over and replaced, the job unharmed;
#   - a cache whose fits end below GRADSYNC_CALIBRATE's size is measured
#     again;
#   - a file that cannot be written is a warning, the job unharmed;
#   - an elastic launch names its file by its hosts and size: a second
#     elastic job of the same shape loads it;
#   - a directory that cannot be made is refused before any rank runs.
# Usage: test_cost_cache.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_LOG=info
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
train=(train --model mlp --synthetic 96 --batch 8 --max-steps 2 --policy wfbp)
launch() { # launch NAME NP [RUN OPTIONS...]: a job of NP ranks, output in NAME.log
  local name=$1 np=$2
  shift 2
  "$gs" run -np "$np" --cost-cache "$tmp/cost" "$@" -- "$gs" "${train[@]}" \
    > "$tmp/$name.log" 2>&1
}
loaded() { grep -c "cost model from the cache" "$tmp/$1.log"; }
measured() { grep -c "calibrated ring" "$tmp/$1.log"; }
files() { ls "$tmp/cost" 2>/dev/null | grep -c '^cost-[0-9a-f]\{16\}\.json$'; }

if launch first 3 && [ "$(loaded first)" = 0 ] && [ "$(measured first)" = 3 ] &&
   [ "$(files)" = 1 ] && [ -z "$(ls "$tmp/cost" | grep -v '^cost-.*\.json$')" ]; then
  ok "first launch: calibrated, one file saved, nothing else left"
else
  bad "first launch: exit/lines $(loaded first)/$(measured first), files: $(ls -a "$tmp/cost"); $(tail -n 3 "$tmp/first.log")"
fi
file=$(ls "$tmp"/cost/cost-*.json 2>/dev/null | head -1)

if launch second 3 && [ "$(loaded second)" = 3 ] && [ "$(measured second)" = 0 ] &&
   [ "$(files)" = 1 ]; then
  ok "second launch of the same shape: every rank loaded the cache, none calibrated"
else
  bad "second launch: $(loaded second) loaded, $(measured second) calibrated; $(tail -n 3 "$tmp/second.log")"
fi

if launch two 2 && [ "$(loaded two)" = 0 ] && [ "$(measured two)" = 2 ] && [ "$(files)" = 2 ]; then
  ok "another size: its own file, calibrated"
else
  bad "another size: $(loaded two) loaded, $(measured two) calibrated, $(files) files"
fi

printf 'not json' > "$file"
if launch corrupt 3 && [ "$(loaded corrupt)" = 0 ] && [ "$(measured corrupt)" = 3 ] &&
   launch after 3 && [ "$(loaded after)" = 3 ]; then
  ok "a corrupt file: calibrated over and replaced; the next launch loads it"
else
  bad "corrupt file: $(loaded corrupt)/$(measured corrupt), then $(loaded after) loaded; $(tail -n 3 "$tmp/corrupt.log")"
fi

if GRADSYNC_CALIBRATE=8388608 launch larger 3 && [ "$(loaded larger)" = 0 ] &&
   [ "$(measured larger)" = 3 ] && GRADSYNC_CALIBRATE=8388608 launch larger2 3 &&
   [ "$(loaded larger2)" = 3 ]; then
  ok "fits that end below GRADSYNC_CALIBRATE are measured again, and saved"
else
  bad "larger calibration: $(loaded larger)/$(measured larger), then $(loaded larger2)"
fi

GRADSYNC_COST_CACHE=/proc/gradsync-no/cost.json "$gs" run -np 2 -- "$gs" "${train[@]}" \
  > "$tmp/unwritable.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "GRADSYNC_COST_CACHE=/proc/gradsync-no/cost.json: the calibration was not saved" \
     "$tmp/unwritable.log"; then
  ok "a file that cannot be written: a warning, the job done"
else
  bad "unwritable file: exit $rc; $(grep -i "cost" "$tmp/unwritable.log" | head -3)"
fi

el=(--elastic 3:3)
if launch el1 3 "${el[@]}" && [ "$(measured el1)" = 3 ] && [ "$(files)" = 3 ] &&
   launch el2 3 "${el[@]}" && [ "$(loaded el2)" = 3 ] && [ "$(measured el2)" = 0 ] &&
   [ "$(files)" = 3 ]; then
  ok "elastic: the launch's file by its hosts and size; a second job of that shape loads it"
else
  bad "elastic: $(measured el1) calibrated, then $(loaded el2) loaded, $(files) files; $(tail -n 3 "$tmp/el2.log")"
fi

"$gs" run -np 2 --cost-cache /proc/gradsync-no -- "$gs" "${train[@]}" > "$tmp/nodir.log" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "cost-cache /proc/gradsync-no: cannot create the directory" \
     "$tmp/nodir.log" && ! grep -q "step" "$tmp/nodir.log"; then
  ok "a directory that cannot be made: refused before any rank runs (exit 2)"
else
  bad "no directory: exit $rc, $(head -c 300 "$tmp/nodir.log")"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
