# stop_keepers SPOOL: SIGTERM to the process group of every job keeper of a
# cluster manager's spool that still runs: its lock is held (a keeper holds
# it for its life, gs_cluster_keep). A finished job's lock file stays, with
# the pid its keeper had, which another process may have by now: it is left
# alone. For the clean-up of the manager's tests and benchmarks. Sourced.
# shellcheck shell=bash
stop_keepers() {
  local l p
  for l in "$1"/jobs/*/lock; do
    [ -f "$l" ] || continue
    flock -n "$l" true 2>/dev/null && continue # nobody holds it: the keeper is gone
    p=$(cut -d' ' -f1 "$l")
    [ -n "$p" ] && kill -TERM -- "-$p" 2>/dev/null
  done
  return 0
}
