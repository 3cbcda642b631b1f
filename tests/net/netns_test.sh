#!/usr/bin/env bash
# Two test hosts as Linux network namespaces joined by a veth pair (needs root and iproute2); NRANKS
# ranks, half in each, form one communicator through LOOM_COMM_ID.  Inside a namespace the ranks share
# memory; between them only TCP.  Checks every result and that cross-host pairs used the socket
# transport.  Exit 77 (CTest: skipped) where namespaces cannot be made.
set -u
rank_bin=$1 nranks=${2:-4} algo=${3:-}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then echo "skipped: needs root and iproute2"; exit 77; fi
tag=$$
h0=loomA$tag h1=loomB$tag v0=lmA$tag v1=lmB$tag
subnet=10.$((100 + tag % 100)).$((tag / 100 % 250)).
cleanup() { ip netns del "$h0" 2>/dev/null; ip netns del "$h1" 2>/dev/null; ip link del "$v0" 2>/dev/null; }
trap cleanup EXIT
if ! ip netns add "$h0" 2>/dev/null || ! ip netns add "$h1"; then echo "skipped: cannot create network namespaces"; exit 77; fi
ip link add "$v0" type veth peer name "$v1" || exit 1
ip link set "$v0" netns "$h0" && ip link set "$v1" netns "$h1" || exit 1
ip -n "$h0" addr add "${subnet}1/24" dev "$v0" && ip -n "$h1" addr add "${subnet}2/24" dev "$v1" || exit 1
for h in "$h0" "$h1"; do ip -n "$h" link set lo up; done
ip -n "$h0" link set "$v0" up && ip -n "$h1" link set "$v1" up || exit 1
export LOOM_COMM_ID="${subnet}1:$((30000 + tag % 20000))" LOOM_TIMEOUT=60
[ -n "$algo" ] && export LOOM_ALGO=$algo
out=$(mktemp)
pids=()
for ((r = 0; r < nranks; r++)); do
  host=$h0; [ $r -ge $((nranks / 2)) ] && host=$h1
  ip netns exec "$host" "$rank_bin" "$nranks" "$r" >>"$out" 2>&1 &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
cat "$out"
# Every rank saw two hosts; a rank reached each rank of the other host over the socket transport.
[ "$(grep -c "on 2 hosts: 0 wrong" "$out")" = "$nranks" ] || { echo "FAIL: not every rank finished correctly on 2 hosts"; fail=1; }
if ! grep -q "rank 0 .*:socket" "$out"; then echo "FAIL: rank 0 did not use the socket transport"; fail=1; fi
if [ "$nranks" -ge 4 ] && ! grep -q "rank 0 .* 1:shm" "$out"; then echo "FAIL: ranks on one host did not share memory"; fail=1; fi
rm -f "$out"
exit $fail
