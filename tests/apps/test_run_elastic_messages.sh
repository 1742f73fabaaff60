#!/usr/bin/env bash
# What gradsync run --elastic says of a train program's command line and of
# its commits, with a stand-in mpirun (tests/cluster/fake_mpirun.sh) and a
# stand-in `gradsync train` (no MPI, no training: seconds):
#   - the program's options are read as train's getopt_long reads them: an
#     unambiguous prefix ("--global-b 48", "--checkp DIR", "--res=auto")
#     counts (until 2026-12-07 only whole names did: a false "without
#     --global-batch" size rule and a false "without --checkpoint DIR and
#     --resume=auto" warning);
#   - a commit at the end of an epoch (sample 0 of the next) is said as
#     "the end of epoch N", as the cluster manager says it (until 2026-12-07
#     a 2-epoch job's last commit read "at epoch 3, sample 0 of the epoch"),
#     while --events' commit_epoch counts from 0.
# usage: test_run_elastic_messages.sh GRADSYNC
set -u
G=${1:?usage: test_run_elastic_messages.sh GRADSYNC}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST
HERE=$(cd "$(dirname "$0")" && pwd)
FAKE_MPIRUN=$HERE/../cluster/fake_mpirun.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

# The stand-in program is named gradsync, so that the supervisor takes
# "gradsync train ..." for the trainer. With --checkpoint DIR (or a prefix)
# its first launch commits the end of epoch 2 of 2 and fails; later ones
# finish.
mkdir -p "$tmp/bin"
cat >"$tmp/bin/gradsync" <<'EOS'
#!/bin/bash
ck=
while [ $# -gt 0 ]; do
  case $1 in
    --checkpoint|--checkp) ck=$2; shift 2 ;;
    *) shift ;;
  esac
done
[ -n "$ck" ] || exit 0
[ -e "$ck/ran" ] && exit 0
mkdir -p "$ck" && touch "$ck/ran"
echo '{"format":1,"epoch":2,"epochs":2,"samples_in_epoch":0,"global_batch":48,"data":{"samples":96}}' \
  >"$ck/checkpoint.json"
exit 1
EOS
printf '#!/bin/sh\necho localhost:4\n' >"$tmp/bin/hosts.sh"
chmod +x "$tmp/bin/gradsync" "$tmp/bin/hosts.sh"
elastic() { # elastic NAME RUN-OPTIONS... -- PROGRAM...: the supervisor, bounded
  local name=$1; shift
  timeout 120 "$G" run --discover "$tmp/bin/hosts.sh" --mpirun "$FAKE_MPIRUN" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err"
}

elastic end -np 2 --elastic 2:2 --max-restarts 2 --events "$tmp/end.events" -- \
  "$tmp/bin/gradsync" train --checkpoint "$tmp/ck_end" --resume=auto
rc=$?
if [ $rc = 0 ] &&
   grep -q '^gradsync run: relaunch on 2 ranks (.*): resuming from the commit at the end of epoch 2, ' "$tmp/end.err" &&
   ! grep -q 'epoch 3' "$tmp/end.err" &&
   grep -q '"event":"resize".*"commit_epoch":2,"commit_samples_in_epoch":0' "$tmp/end.events"; then
  ok "a commit at an epoch's end: 'the end of epoch 2' (commit_epoch 2 in --events)"
else
  bad "a commit at an epoch's end: exit $rc, $(grep resum "$tmp/end.err"; grep resize "$tmp/end.events")"
fi

mkdir -p "$tmp/ck_pre" && touch "$tmp/ck_pre/ran"
elastic prefix -np 4 --elastic 2:4 -- "$tmp/bin/gradsync" train --model mlp --checkp "$tmp/ck_pre" \
  --res=auto --global-b 48
rc=$?
if [ $rc = 0 ] && ! grep -q 'without --global-batch\|without --checkpoint' "$tmp/prefix.err" &&
   grep -q "divide the program's --global-batch 48" "$tmp/prefix.err"; then
  ok "--global-b, --checkp and --res=auto are train's --global-batch, --checkpoint and --resume"
else
  bad "prefixes of train's options: exit $rc, $(cat "$tmp/prefix.err")"
fi

# The whole names still count, and an option's value is no option.
elastic whole -np 4 --elastic 2:4 -- "$tmp/bin/gradsync" train --data --global-batch --model mlp
rc=$?
if [ $rc = 0 ] && grep -q 'without --global-batch' "$tmp/whole.err" &&
   grep -q 'without --checkpoint DIR and --resume=auto' "$tmp/whole.err"; then
  ok "--data's value '--global-batch' is not the option; no --checkpoint: the warnings"
else
  bad "an option's value: exit $rc, $(cat "$tmp/whole.err")"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
