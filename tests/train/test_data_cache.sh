#!/usr/bin/env bash
# gradsync train --data-cache DIR, end to end on a small IDX data set:
#   - the first run on 3 ranks reads the source once and one rank writes the
#     cache (atomically; the others read it);
#   - a later run reads the cache, and its weights are bitwise those of a
#     run without the cache;
#   - a checkpoint of a run that read the cache resumes without it, and one
#     of a run without it resumes with it (the cache's check gives the data's
#     CRC a checkpoint names, as the source's would);
#   - a corrupt cache (bytes overwritten, or truncated) is detected by its
#     checksum, rebuilt, and the result is again bitwise the same;
#   - another source gets another cache file;
#   - a cache directory that cannot be written, a missing data directory or a
#     truncated data file is refused before training, with the usage exit (2).
# Usage: test_data_cache.sh GRADSYNC CKPT_COMPARE MAKE_IDX
set -u
gs=$1
cmp_ckpt=$2
make_idx=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GRADSYNC_ALLREDUCE_ALGO=ring GRADSYNC_CALIBRATE=0
python=/usr/bin/python3
[ -x "$python" ] || python=python3
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

"$python" "$make_idx" "$tmp/d28" 600 28 28
"$python" "$make_idx" "$tmp/other" 300 28 28
args="--model mlp --batch 8 --max-steps 5 --policy wfbp"
train() { # train NAME ARGS...
  local name=$1; shift
  "$gs" run -np 3 -- "$gs" train $args --checkpoint "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1
}
same() { "$cmp_ckpt" mlp "$tmp/ref/checkpoint.gsck" "$tmp/$1/checkpoint.gsck" > "$tmp/$1.cmp" 2>&1; }

train ref --data "$tmp/d28" || bad "the run without a cache failed: $(tail -3 "$tmp/ref.log")"

if train first --data "$tmp/d28" --data-cache "$tmp/cache" &&
   [ "$(grep -c "read the source and wrote the cache" "$tmp/first.log")" = 1 ] &&
   [ "$(ls "$tmp/cache" | grep -c '\.gsdc$')" = 1 ] && [ -z "$(ls "$tmp/cache" | grep -v '\.gsdc$')" ] &&
   same first; then
  ok "first run: one rank of 3 wrote the cache, nothing else left in it, same weights"
else
  bad "first run: $(ls -a "$tmp/cache"; grep data "$tmp/first.log"; cat "$tmp/first.cmp" 2>/dev/null; tail -3 "$tmp/first.log")"
fi
cache=$(ls "$tmp"/cache/*.gsdc 2>/dev/null | head -1)
stamp=$(stat -c %Y.%i "$cache" 2>/dev/null)

if train second --data "$tmp/d28" --data-cache "$tmp/cache" &&
   grep -q "data: read from the cache $cache" "$tmp/second.log" &&
   ! grep -q "wrote the cache" "$tmp/second.log" &&
   [ "$(stat -c %Y.%i "$cache")" = "$stamp" ] && same second; then
  ok "second run: read from the cache, bitwise the weights of the run without it ($(cat "$tmp/second.cmp"))"
else
  bad "second run: $(grep -E "data|note" "$tmp/second.log"; cat "$tmp/second.cmp" 2>/dev/null; tail -3 "$tmp/second.log")"
fi

cp -r "$tmp/second" "$tmp/second_nocache" && cp -r "$tmp/ref" "$tmp/ref_cache"
resume() { # resume NAME ARGS...: 3 more steps from NAME's checkpoint
  local name=$1; shift
  "$gs" run -np 3 -- "$gs" train ${args/--max-steps 5/--max-steps 8} --epochs 2 --checkpoint "$tmp/$name" \
    --resume "$@" > "$tmp/$name.log" 2>&1
}
if resume second_nocache --data "$tmp/d28" && grep -q "epoch 2" "$tmp/second_nocache.log" &&
   resume ref_cache --data "$tmp/d28" --data-cache "$tmp/cache" &&
   grep -q "data: read from the cache" "$tmp/ref_cache.log" &&
   "$cmp_ckpt" mlp "$tmp/second_nocache/checkpoint.gsck" "$tmp/ref_cache/checkpoint.gsck" \
     > "$tmp/resume.cmp" 2>&1; then
  ok "checkpoints resume across the cache both ways, to the same weights"
else
  bad "resume across the cache: $(tail -n 3 "$tmp/second_nocache.log" "$tmp/ref_cache.log"; cat "$tmp/resume.cmp" 2>/dev/null)"
fi

printf 'corrupt!' | dd of="$cache" bs=1 seek=200000 conv=notrunc 2>/dev/null
if train corrupt --data "$tmp/d28" --data-cache "$tmp/cache" &&
   grep -q "is unusable (checksum mismatch" "$tmp/corrupt.log" &&
   [ "$(grep -c "read the source and rebuilt the cache" "$tmp/corrupt.log")" = 1 ] &&
   same corrupt &&
   train after --data "$tmp/d28" --data-cache "$tmp/cache" &&
   grep -q "data: read from the cache" "$tmp/after.log"; then
  ok "a corrupt cache is detected by its checksum and rebuilt; the next run reads it"
else
  bad "corrupt cache: $(grep -E "data|note" "$tmp/corrupt.log" "$tmp/after.log"; tail -3 "$tmp/corrupt.log")"
fi

truncate -s 5000 "$cache"
if train truncated --data "$tmp/d28" --data-cache "$tmp/cache" &&
   grep -q "is unusable (truncated" "$tmp/truncated.log" && same truncated; then
  ok "a truncated cache is rebuilt"
else
  bad "truncated cache: $(grep -E "data|note" "$tmp/truncated.log"; tail -3 "$tmp/truncated.log")"
fi

if train other --data "$tmp/other" --data-cache "$tmp/cache" &&
   [ "$(ls "$tmp/cache" | grep -c '\.gsdc$')" = 2 ]; then
  ok "another source gets its own cache file"
else
  bad "another source: $(ls "$tmp/cache"; tail -3 "$tmp/other.log")"
fi

# Bad paths are bad input, refused at start-up with the usage exit (2) and
# "(see --help)", as without the cache: a relaunch would not cure them
# (until 2026-12-07 they ended the job with 1).
# refused_early NAME PATTERN WHAT ARGS...: train ARGS on 2 ranks exits 2 with
# PATTERN and "(see --help)" before any epoch.
refused_early() {
  local name=$1 pat=$2 what=$3
  shift 3
  "$gs" run -np 2 -- "$gs" train $args "$@" > "$tmp/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pat" "$tmp/$name.log" && grep -q "see --help" "$tmp/$name.log" &&
     ! grep -q "epoch 1" "$tmp/$name.log"; then
    ok "$what is refused before training (exit 2)"
  else
    bad "$what: exit $rc, $(head -c 600 "$tmp/$name.log")"
  fi
}
refused_early nodir "data-cache /proc/gradsync-cache: cannot create the directory" \
  "an unusable cache directory" --data "$tmp/d28" --data-cache /proc/gradsync-cache
refused_early nodata "" "a missing data directory with --data-cache" \
  --data "$tmp/nonexistent" --data-cache "$tmp/cache"

# A truncated IDX file: found by the rank that reads the source (one of the
# two ranks sharing the cache directory); the other must fail alike.
mkdir -p "$tmp/trunc"
cp "$tmp"/d28/* "$tmp/trunc/"
zcat "$tmp/d28/train-images-idx3-ubyte.gz" | head -c 20000 | gzip > "$tmp/trunc/train-images-idx3-ubyte.gz"
refused_early trunc "" "a truncated data file with --data-cache" \
  --data "$tmp/trunc" --data-cache "$tmp/cache"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
