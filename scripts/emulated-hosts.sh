#!/usr/bin/env bash
# Emulated hosts for `gradsync run --hosts`: N network namespaces on a bridge,
# each running its own sshd, so that Open MPI's ssh launcher starts ranks on
# them as on separate machines (docs/CLUSTER.md, "Trying it on one machine").
#
# usage: scripts/emulated-hosts.sh up N DIR [RATE]
#                                              build N hosts (1..200), state in DIR;
#                                              with RATE (tc's syntax: 1gbit), each
#                                              host's link shaped both ways as
#                                              `gradsync run --net RATE` shapes it
#        scripts/emulated-hosts.sh down DIR    stop and remove what `up` built
#
# `up` writes into DIR (an empty or new directory; it must stay until `down`):
#   hosts       the --hosts list, "10.214.X.2:1,10.214.X.3:1,..."
#   hostfile    the same, one "ADDRESS slots=1" a line
#   subnet      10.214.X.0/24, for --iface
#   ssh_config  for --ssh-config: the generated key, no host-key checks
#   names       the namespaces, one a line (node i is line i+1)
# and its keys, sshd configurations and logs; `down` removes all of them (and
# DIR, when nothing else is left in it), so that DIR can take an `up` again.
# and then, for example:
#   gradsync run --hosts "$(cat DIR/hosts)" --ssh-config DIR/ssh_config \
#     --iface "$(cat DIR/subnet)" -- gradsync bench --max-bytes 1M
#
# Names carry the pid of `up` (P): namespaces gsh-P-<i>, bridge gshbrP,
# bridge-side veths gshPn<i>, and gsh0 inside every namespace. Addresses:
# 10.214.X.0/24 with X free among this machine's addresses; the bridge is .1
# and host i is .(i+2). Each sshd listens on its host's address only, with a
# host key, authorised key and configuration of DIR's own (root may log in
# with the key; PAM and passwords off), and logs to DIR/sshd.<i>.log. Its
# sessions start with SHLVL=1, so that the login's bash does not read the
# user's ~/.bashrc (bash reads it for a command over ssh only at the first
# shell level): a host's ranks start the same whatever that file does, and
# a start-up that hangs there (pyenv's rehash lock, left behind by a login
# killed with its host, made every later login wait) cannot stall them.
# Each host's Open MPI daemon also gets a session directory of its own
# (DIR/tmp.<i>) and no shared-memory topology: the hosts share one /tmp and
# one hostname, and daemons started at the same moment raced there (orted
# crashed in hwloc_shmem_topology_write, or found its session directory
# "exists"; 1 launch in 10 once logins stopped waiting on .bashrc).
# Needs root, ip (iproute2), sshd (openssh-server) and ssh-keygen.
set -euo pipefail

die() { echo "emulated-hosts: $*" >&2; exit 2; }

ip_exe=$(command -v ip || true)
[ -n "$ip_exe" ] || for d in /usr/sbin /sbin; do [ -x "$d/ip" ] && ip_exe=$d/ip; done
[ -n "$ip_exe" ] || die "needs 'ip' (package iproute2)"
sshd_exe=/usr/sbin/sshd

down() {
  local dir=$1 ns bridge pid
  [ -f "$dir/names" ] || die "$dir/names not found: nothing built there"
  bridge=$(cat "$dir/bridge" 2>/dev/null || true)
  for f in "$dir"/sshd.*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    # Only a process that is still that sshd (the pid file may be stale).
    if [ -n "$pid" ] && grep -q sshd "/proc/$pid/comm" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
    rm -f "$f"
  done
  while read -r ns; do
    [ -n "$ns" ] || continue
    # Anything still in the namespace was started there by a run on these hosts.
    for pid in $("$ip_exe" netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    "$ip_exe" link del "$(echo "$ns" | sed -E 's/^gsh-([0-9]+)-([0-9]+)$/gsh\1n\2/')" 2>/dev/null || true
  done < "$dir/names"
  while read -r ns; do
    [ -n "$ns" ] || continue
    "$ip_exe" netns del "$ns" 2>/dev/null || true
  done < "$dir/names"
  if [ -n "$bridge" ]; then "$ip_exe" link del "$bridge" 2>/dev/null || true; fi
  # The files `up` made, so that DIR can take an `up` again (it refuses a
  # directory with anything in it); DIR itself when nothing else is there.
  rm -f "$dir"/{hosts,hostfile,subnet,bridge,ssh_config,authorized_keys} \
    "$dir"/{host_key,id_ed25519}{,.pub} "$dir"/sshd_config.* "$dir"/sshd.*.log
  for d in "$dir"/tmp.*; do
    [[ $d =~ /tmp\.[0-9]+$ ]] && [ -d "$d" ] && rm -rf -- "$d"
  done
  rm -f "$dir/names"
  rmdir "$dir" 2>/dev/null || true
}

up() {
  local n=$1 dir=$2 rate=${3:-} pid=$$ x i ns port addr
  local tc_exe=""
  if [ -n "$rate" ]; then
    [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?[kmgt]?bit$ ]] || die "RATE must be like 100mbit or 1gbit (got '$rate')"
    for d in /usr/sbin /sbin; do [ -x "$d/tc" ] && tc_exe=$d/tc && break; done
    [ -n "$tc_exe" ] || die "RATE needs 'tc' (package iproute2)"
  fi
  [[ "$n" =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 200 ] || die "N must be 1 to 200 (got '$n')"
  [ "$(id -u)" = 0 ] || die "needs root (it creates network namespaces)"
  [ -x "$sshd_exe" ] || die "needs $sshd_exe (package openssh-server: scripts/install-deps.sh)"
  command -v ssh-keygen >/dev/null || die "needs ssh-keygen (package openssh-client)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ ! -e "$dir/names" ] || die "$dir already holds hosts; run 'down $dir' first"
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty (its keys and files are made anew)"
  # The addresses are read once: `ip ... | grep -q` under pipefail fails
  # when grep's early exit gives ip a SIGPIPE, so that the loop stopped at a
  # subnet in use (another run's hosts) and then gave up.
  local addrs
  addrs=$("$ip_exe" -4 -o addr show)
  for x in $(seq 1 254); do
    grep -q " 10\.214\.$x\." <<<"$addrs" || break
  done
  grep -q " 10\.214\.$x\." <<<"$addrs" && die "no free subnet in 10.214.0.0/16"
  : > "$dir/names"
  echo "gshbr$pid" > "$dir/bridge"
  echo "10.214.$x.0/24" > "$dir/subnet"
  trap 'down "$dir"' ERR
  ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key" -C gradsync-emulated-host
  ssh-keygen -q -t ed25519 -N '' -f "$dir/id_ed25519" -C gradsync-emulated-user
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  cat > "$dir/ssh_config" <<EOF
Host *
  User root
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
  ConnectTimeout 5
EOF
  mkdir -p /run/sshd # sshd's privilege separation directory
  "$ip_exe" link add "gshbr$pid" type bridge
  "$ip_exe" addr add "10.214.$x.1/24" dev "gshbr$pid"
  "$ip_exe" link set "gshbr$pid" up
  local list=""
  : > "$dir/hostfile"
  for ((i = 0; i < n; i++)); do
    ns=gsh-$pid-$i
    port=gsh${pid}n$i
    addr=10.214.$x.$((i + 2))
    "$ip_exe" netns add "$ns"
    echo "$ns" >> "$dir/names"
    "$ip_exe" link add "$port" type veth peer name gsh0 netns "$ns"
    "$ip_exe" -n "$ns" addr add "$addr/24" dev gsh0
    "$ip_exe" -n "$ns" link set gsh0 up
    "$ip_exe" -n "$ns" link set lo up
    "$ip_exe" link set "$port" master "gshbr$pid" up
    if [ -n "$rate" ]; then
      # As gradsync run --net: 16 KiB GSO packets and a bucket of one of
      # them, a 10 ms queue; the host's upload and download (docs/NETWORK.md).
      "$ip_exe" -n "$ns" link set gsh0 gso_max_size 16384
      "$ip_exe" link set "$port" gso_max_size 16384
      "$tc_exe" -n "$ns" qdisc add dev gsh0 root tbf rate "$rate" burst 18000 latency 10ms
      "$tc_exe" qdisc add dev "$port" root tbf rate "$rate" burst 18000 latency 10ms
    fi
    mkdir -p "$dir/tmp.$i"
    cat > "$dir/sshd_config.$i" <<EOF
ListenAddress $addr
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PidFile $dir/sshd.$i.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
X11Forwarding no
PrintMotd no
LogLevel ERROR
SetEnv SHLVL=1 "OMPI_MCA_orte_tmpdir_base=$dir/tmp.$i" OMPI_MCA_rtc_hwloc_vmhole=none
EOF
    "$ip_exe" netns exec "$ns" "$sshd_exe" -f "$dir/sshd_config.$i" -E "$dir/sshd.$i.log"
    list+="${list:+,}$addr:1"
    echo "$addr slots=1" >> "$dir/hostfile"
  done
  echo "$list" > "$dir/hosts"
  # sshd writes its pid file once it listens.
  for ((i = 0; i < n; i++)); do
    for _ in $(seq 1 100); do [ -s "$dir/sshd.$i.pid" ] && break; sleep 0.05; done
    [ -s "$dir/sshd.$i.pid" ] || { echo "emulated-hosts: sshd of host $i did not start:" >&2
                                   cat "$dir/sshd.$i.log" >&2; false; }
  done
  trap - ERR
  echo "$list"
}

case "${1:-}" in
  up) [ $# = 3 ] || [ $# = 4 ] || die "usage: $0 up N DIR [RATE]"; up "$2" "$3" "${4:-}" ;;
  down) [ $# = 2 ] || die "usage: $0 down DIR"; down "$2" ;;
  *) die "usage: $0 up N DIR | down DIR" ;;
esac
