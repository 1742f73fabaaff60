#!/bin/sh
# gradsync run --slow NODE:RATE: that node's link is shaped at RATE, the
# others at --net's; bad values exit 2 with a message.
#   test_run_slow.sh GRADSYNC
set -u
gs=$1
fails=0
fail() { echo "FAIL run --slow: $*"; fails=1; }
if [ "$(id -u)" -ne 0 ] || ! command -v tc >/dev/null 2>&1; then
  echo "skipped: needs root and tc"; exit 0
fi
out=$(timeout 60 "$gs" run -np 3 --net 1gbit --slow 1:100mbit -- /bin/sh -c \
  'echo "node $GRADSYNC_NODE: $(tc qdisc show | grep -o "rate [0-9A-Za-z]*")"' 2>&1)
echo "$out"
echo "$out" | grep -q "node 1: rate 100Mbit" || fail "node 1 is not at 100 Mbit/s"
echo "$out" | grep -q "node 0: rate 1Gbit" || fail "node 0 is not at 1 Gbit/s"
echo "$out" | grep -q "node 2: rate 1Gbit" || fail "node 2 is not at 1 Gbit/s"
for bad in "1x" "x:1gbit" "1:fast" "5:1gbit"; do
  msg=$("$gs" run -np 2 --net 1gbit --slow "$bad" -- /bin/true 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] || fail "--slow $bad: exit $rc, expected 2"
  echo "$msg" | grep -q -- "--slow" || fail "--slow $bad: message '$msg'"
done
"$gs" run -np 2 --slow 1:1gbit -- /bin/true 2>/dev/null
[ $? -eq 2 ] || fail "--slow without --net accepted"
exit $fails
