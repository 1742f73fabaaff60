#!/usr/bin/env bash
# A stand-in for mpirun in the cluster manager's tests (gradsync run --mpirun):
# runs the program once, here, with the world it was given in GS_FAKE_NP and
# GS_FAKE_HOSTS, forwarding SIGUSR1 and SIGTERM to it, and exits with its
# status. The supervisor puts "-np N --host H" just before the program.
# GS_FAKE_ARGV set: each command line is appended to that file first.
[ -n "${GS_FAKE_ARGV:-}" ] && echo "$*" >>"$GS_FAKE_ARGV"
np=0 hosts=
while [ $# -gt 0 ]; do
  case $1 in
    -np) np=$2; shift 2 ;;
    --host) hosts=$2; shift 2; break ;;
    *) shift ;;
  esac
done
export GS_FAKE_NP=$np GS_FAKE_HOSTS=$hosts
"$@" &
child=$!
trap 'kill -USR1 $child 2>/dev/null' USR1
trap 'kill -TERM $child 2>/dev/null' TERM
while :; do
  wait $child
  rc=$?
  kill -0 $child 2>/dev/null || exit $rc # a trap interrupted the wait otherwise
done
