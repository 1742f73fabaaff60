# The set-up the cluster manager's shell tests share, with stand-in jobs on
# local "nodes" (fake_mpirun.sh, fake_job.sh): a scratch directory with the
# spool, the manager's log and the last command's stderr; the manager and
# its jobs' keepers stopped on exit; pass and fail. Sourced after G is set
# (the gradsync binary, an absolute path); the test's own serve comes after.
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
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
  # Keepers are session leaders: their sessions go with them.
  stop_keepers "$spool"
  sleep 0.3
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

pass() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  sed 's/^/      | /' "$err" 2>/dev/null | tail -15
  sed 's/^/      log | /' "$log" 2>/dev/null | tail -25
  failures=$((failures + 1))
}
