# The set-up the cluster manager's shell tests share, with stand-in jobs on
# local "nodes" (fake_mpirun.sh, fake_job.sh) or on emulated ones: a scratch
# directory with the spool, the manager's log and the last command's stderr;
# on exit the manager stopped (and waited for), every spool's keepers
# stopped, an emulated pool taken down; pass and fail (which shows the
# stderr, the log and the jobs' logs). Sourced after G is set (the gradsync
# binary, an absolute path); the test's own serve comes after.
# shellcheck shell=bash
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JOB=$HERE/fake_job.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GRADSYNC_SPOOL
failures=0
scratch=$(mktemp -d)
spool=$scratch/spool
log=$scratch/serve.log
err=$scratch/err
serve_pid=
# shellcheck source=tests/cluster/keepers.sh
. "$HERE/keepers.sh"
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  # Keepers are session leaders: their sessions go with them.
  for s in "$scratch"/spool*; do [ -d "$s" ] && stop_keepers "$s"; done
  sleep 0.3
  for s in "$scratch"/spool*; do
    if [ -f "$s/emulated/names" ]; then
      sleep 0.7
      "$G" cluster down --force --spool "$s" >/dev/null 2>&1 # (a keeper not yet gone)
    fi
  done
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

pass() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  sed 's/^/      | /' "$err" 2>/dev/null | tail -15
  sed 's/^/      log | /' "$log" 2>/dev/null | tail -25
  for d in "$spool"/jobs/*; do
    [ -f "$d/out.log" ] &&
      grep -v '"epoch"' "$d/out.log" | tail -8 | sed "s#^#      job $(basename "$d") | #"
  done
  failures=$((failures + 1))
}
