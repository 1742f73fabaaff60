#!/usr/bin/env bash
# Tests how `gradsync run` builds mpirun's command line for hosts and Slurm,
# through --dry-run (which prints it and starts nothing), and its refusals:
# --hosts and --hostfile (both syntaxes, comments), -np from the slots and
# --oversubscribe, --iface, --ssh-config, --prefix, the variables forwarded
# with -x, a fake Slurm allocation (SLURM_JOB_ID, SLURM_NODELIST), and bad
# host lists and hostfiles, each an exit 2 naming the entry or the line.
# Needs neither root nor ssh nor Slurm (tests/apps/test_run_ssh.sh runs
# ranks on hosts for real).
#
# usage: test_run_hosts.sh GRADSYNC
# Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_run_hosts.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST OMPI_MCA_plm_rsh_agent
failures=0
scratch=$(mktemp -d)
out=$scratch/out
trap 'rm -rf "$scratch"' EXIT
trap 'exit 143' TERM INT HUP
cd "$scratch" || exit 1

pass() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; sed 's/^/      | /' "$out" | tail -20; failures=$((failures + 1)); }

# dry WHAT PATTERN [ANTIPATTERN] -- RUN ARGS...: `gradsync run --dry-run ARGS`
# exits 0 and prints a command line matching PATTERN (grep -E) and not
# ANTIPATTERN (when not empty).
dry() {
  local what=$1 pattern=$2 anti=$3
  shift 4
  "$G" run --dry-run "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" = 0 ] && grep -qE -- "$pattern" "$out" &&
     { [ -z "$anti" ] || ! grep -qE -- "$anti" "$out"; }; then
    pass "$what"
  else
    fail "$what: exit $rc, wanted 0 and a line with '$pattern'${anti:+ without '$anti'}"
  fi
}
# usage_error WHAT PATTERN -- ARGS...: `gradsync run ARGS` exits 2 with a
# message matching PATTERN (grep -iF).
usage_error() {
  local what=$1 pattern=$2
  shift 3
  "$G" run "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" = 2 ] && grep -qiF -- "$pattern" "$out"; then
    pass "$what (exit 2: $(head -1 "$out"))"
  else
    fail "$what: exit $rc, wanted 2 and a message with '$pattern'"
  fi
}

echo "== --hosts"
dry "-np defaults to the slots" ' -np 8 --host h1:4,h2:4 ' '--oversubscribe' -- \
  --hosts h1:4,h2:4 -- /bin/true
dry "-np below the slots" ' -np 3 --host h1:4,h2:4 ' '' -- -np 3 --hosts h1:4,h2:4 -- /bin/true
dry "a host without slots has one" ' -np 3 --host a:1,b:2 ' '' -- --hosts a,b:2 -- /bin/true
usage_error "-np above the slots" "--oversubscribe" -- -np 9 --hosts h1:4,h2:4 -- /bin/true
dry "-np above the slots with --oversubscribe" '--oversubscribe --bind-to none -np 9 --host h1:4,h2:4' '' -- \
  -np 9 --oversubscribe --hosts h1:4,h2:4 -- /bin/true
dry "--iface restricts MPI's and Open MPI's own TCP" \
  '--mca btl_tcp_if_include eth1 --mca oob_tcp_if_include eth1' '' -- \
  --hosts h1 --iface eth1 -- /bin/true
dry "--iface takes a subnet" 'btl_tcp_if_include 10\.1\.0\.0/16 ' '' -- \
  --hosts h1 --iface 10.1.0.0/16 -- /bin/true
echo "Host *" > ssh.conf
dry "--ssh-config becomes the ssh agent, by absolute path" \
  "--mca plm_rsh_agent 'ssh -F $scratch/ssh.conf'" '' -- \
  --hosts h1 --ssh-config ssh.conf -- /bin/true
dry "--prefix" '--prefix /opt/ompi ' '' -- --hosts h1 --prefix /opt/ompi -- /bin/true
GRADSYNC_TIMEOUT=30 dry "GRADSYNC_* and PATH are forwarded" '-x GRADSYNC_TIMEOUT.* /bin/true$' '' -- \
  --hosts h1 -- /bin/true
dry "PATH is forwarded" ' -x PATH ' '' -- --hosts h1 -- /bin/true
dry "the program and its arguments, quoted for a shell" "/bin/echo 'a b' 'it'\\\\''s'\$" '' -- \
  --hosts h1 -- /bin/echo "a b" "it's"
dry "one machine keeps --oversubscribe and needs no hosts" '--oversubscribe --bind-to none -np 2 /bin/true$' \
  '--host' -- -np 2 -- /bin/true

echo "== bad --hosts: exit 2 naming the entry"
usage_error "slots 0" "entry 1 ('h1:0')" -- --hosts h1:0 -- /bin/true
usage_error "slots -1" "entry 2 ('h2:-1')" -- --hosts h1:4,h2:-1 -- /bin/true
usage_error "slots x" "slots 'x'" -- --hosts h1:x -- /bin/true
usage_error "host:slots:more" "slots '4:5'" -- --hosts h1:4:5 -- /bin/true
usage_error "an empty entry" "entry 2 is empty" -- --hosts h1,,h2 -- /bin/true
usage_error "a trailing comma" "entry 2 is empty" -- --hosts h1, -- /bin/true
usage_error "no host name" "host name is empty" -- --hosts :4 -- /bin/true
usage_error "a space in a name" "is not a host name" -- --hosts "a b" -- /bin/true
usage_error "user@host" "is not a host name" -- --hosts root@h1 -- /bin/true
usage_error "a bracketed IPv6 address" "looks like an IPv6 address: not supported" -- --hosts "[::1]:2" -- /bin/true
usage_error "an IPv6 address" "looks like an IPv6 address: not supported" -- --hosts "fe80::1,h2" -- /bin/true
usage_error "a duplicate host" "host 'H1' is also entry 1" -- --hosts h1:4,h2,H1:2 -- /bin/true
usage_error "an empty --hosts" "--hosts needs" -- --hosts "" -- /bin/true

echo "== --hostfile"
printf '# the cluster\na\tslots=2   # two\n\nb\nc:3\n  d slots=1\n' > good
dry "both syntaxes, comments and blank lines" ' -np 7 --host a:2,b:1,c:3,d:1 ' '' -- \
  --hostfile good -- /bin/true
printf 'a\nb slots=abc\n' > bad_slots
usage_error "slots=abc" "bad_slots:2: slots 'abc'" -- --hostfile bad_slots -- /bin/true
printf 'a\nb slots=0\n' > zero
usage_error "slots=0" "zero:2: slots '0'" -- --hostfile zero -- /bin/true
printf 'a\nb\nA slots=2\n' > dup
usage_error "a host on two lines" "dup:3: host 'A' is also on line 1" -- --hostfile dup -- /bin/true
printf 'a\nb max_slots=4\n' > unknown
usage_error "an unknown word" "unknown:2: unexpected 'max_slots=4'" -- --hostfile unknown -- /bin/true
printf 'a slots=2 slots=3\n' > twice
usage_error "slots twice" "twice:1: the slots of 'a' are given twice" -- --hostfile twice -- /bin/true
printf 'a\n\x01\x02\xff\n' > garbled
usage_error "garbled bytes" "garbled:2:" -- --hostfile garbled -- /bin/true
printf 'a\0b\n' > nul
usage_error "a NUL byte" "nul:1: a NUL byte" -- --hostfile nul -- /bin/true
: > empty
usage_error "an empty file" "empty: the file is empty" -- --hostfile empty -- /bin/true
printf '# nothing\n\n   \n' > comments
usage_error "only comments" "comments: no hosts in it (3 lines" -- --hostfile comments -- /bin/true
usage_error "a missing file" "missing: cannot read it" -- --hostfile missing -- /bin/true
usage_error "a directory" "cannot read it" -- --hostfile "$scratch" -- /bin/true
usage_error "-np above the hostfile's slots" "more than the 7 slots of good" -- \
  -np 8 --hostfile good -- /bin/true

echo "== options that cannot go together"
usage_error "--hosts and --hostfile" "give one" -- --hosts a --hostfile good -- /bin/true
usage_error "--hosts and --net" "--net emulates" -- --hosts a --net 1gbit -- /bin/true
usage_error "--hosts and --per-node" "--per-node" -- --hosts a:2 --per-node 2 -- /bin/true
usage_error "--hostfile and --node-cpus" "--node-cpus" -- --hostfile good --node-cpus 1 -- /bin/true
usage_error "--ssh-config without hosts" "--ssh-config needs --hosts" -- \
  -np 2 --ssh-config ssh.conf -- /bin/true
usage_error "--ssh-config unreadable" "cannot read it" -- --hosts a --ssh-config nope -- /bin/true
# With --discover alone the hosts come from the script, over ssh too: the
# config is taken (it was refused until 2026-12-01, "needs --hosts").
printf '#!/bin/sh\necho localhost:2\n' >disc.sh
chmod +x disc.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if timeout 60 "$G" run -np 2 --elastic 1:2 --discover ./disc.sh --ssh-config ssh.conf -- /bin/true \
     >"$out" 2>&1; then
  pass "--ssh-config with --discover alone: taken, the job ran"
else
  fail "--ssh-config with --discover: exit $?: $(grep -m1 ssh-config "$out")"
fi
usage_error "--iface with --net" "--iface" -- -np 2 --net 1gbit --iface eth0 -- /bin/true
usage_error "--iface garbled" "not an interface" -- --hosts a --iface 'eth0;x' -- /bin/true
usage_error "--prefix relative" "absolute path" -- --hosts a --prefix opt -- /bin/true
usage_error "--dry-run with --net" "--dry-run" -- --dry-run -np 2 --net 1gbit -- /bin/true
usage_error "--hosts twice" "more than once" -- --hosts a --hosts b -- /bin/true
usage_error "no -np on one machine" "missing -np" -- -- /bin/true

echo "== inside a Slurm allocation (SLURM_JOB_ID and SLURM_NODELIST, no Slurm needed)"
export SLURM_JOB_ID=4242 SLURM_NODELIST='node[1-4]'
dry "no -np: Open MPI takes every slot of the allocation" 'mpirun --bind-to none /bin/true$' \
  ' -np |--host|--oversubscribe' -- /bin/true
dry "-np passes on, no --oversubscribe" 'mpirun --bind-to none -np 8 /bin/true$' '--oversubscribe|--host' -- \
  -np 8 -- /bin/true
dry "--oversubscribe on request" 'mpirun --oversubscribe --bind-to none -np 8 ' '' -- -np 8 --oversubscribe -- /bin/true
dry "-v says that Open MPI places the ranks" 'Slurm job 4242 \(nodes node\[1-4\]\)' '' -- \
  -v -- /bin/true
dry "--hosts wins over the allocation" '--host a:2 ' '' -- --hosts a:2 -- /bin/true
usage_error "--per-node inside Slurm" "inside a Slurm allocation" -- -np 4 --per-node 2 -- /bin/true
unset SLURM_NODELIST
export SLURM_JOB_NODELIST='node[1-2]'
dry "SLURM_JOB_NODELIST counts too" 'nodes node\[1-2\]' '' -- -v -- /bin/true
unset SLURM_JOB_NODELIST
usage_error "SLURM_JOB_ID alone is no allocation" "missing -np" -- -- /bin/true
unset SLURM_JOB_ID

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
