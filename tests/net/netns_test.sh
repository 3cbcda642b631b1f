#!/usr/bin/env bash
# A multi-host job on test hosts made of network namespaces (netns_hosts.sh): HOSTS hosts with PER_HOST
# ranks each form one communicator through LOOM_COMM_ID.  Inside a host the ranks share memory; between
# hosts only the network transport NET (socket or ucx, over UCX's tcp).  LAUNCHER is "fork" (each rank
# started here by ip netns exec) or "mpirun" (OpenMPI spans the hosts through an rsh agent that enters
# the namespaces, as ssh would reach real hosts).  Checks every result, that other hosts were reached
# over NET and the own host over shared memory.  Exit 77 (CTest: skipped) where namespaces cannot be made.
# IMPAIR (none, drop, slow, proxy: see netns_impair in netns_hosts.sh) makes the network worse; the
# results must stay exact.
# usage: netns_test.sh NETNS_RANK HOSTS PER_HOST [ALGO] [NET] [LAUNCHER] [IMPAIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
rank_bin=$1 hosts=$2 per_host=$3 algo=${4:-} net=${5:-socket} launcher=${6:-fork} impair=${7:-none}
nranks=$((hosts * per_host))
. "$here/netns_hosts.sh"
netns_require
if [ "$launcher" = mpirun ] && ! command -v mpirun >/dev/null; then echo "FAIL: mpirun not installed"; exit 1; fi
netns_make_hosts "$hosts"
if [ "$impair" != none ] && ! command -v iptables >/dev/null; then echo "FAIL: iptables not installed"; exit 1; fi
netns_impair "$impair" || { echo "FAIL: could not impair the network ($impair)"; exit 1; }
export LOOM_COMM_ID="${NETNS_ADDRS[0]}:$((30000 + NETNS_TAG % 20000))" LOOM_TIMEOUT=60 LOOM_NET=$net UCX_TLS=tcp
[ -n "$algo" ] && export LOOM_ALGO=$algo
out=$(mktemp)
fail=0
if [ "$launcher" = fork ]; then
  pids=()
  for ((r = 0; r < nranks; r++)); do
    ip netns exec "${NETNS_HOSTS[r / per_host]}" "$rank_bin" "$nranks" "$r" >>"$out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail=1; done
else
  hostfile=$(mktemp)
  for h in "${NETNS_HOSTS[@]}"; do echo "$h slots=$per_host"; done >"$hostfile"
  # mpirun itself runs on host 0, so that its daemons on every host reach it over the bridge.  Its
  # daemons would share hwloc's topology through a shared-memory mapping placed at a "hole" in the
  # address space; several daemons on one kernel sometimes crash there (OpenMPI 4.1.4), so they don't.
  ip netns exec "${NETNS_HOSTS[0]}" timeout 170 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$nranks" \
    --hostfile "$hostfile" --mca plm_rsh_agent "$here/netns_rsh.sh" --mca rtc_hwloc_vmhole none \
    --mca oob_tcp_if_include "${NETNS_SUBNET}0/24" --mca btl_tcp_if_include "${NETNS_SUBNET}0/24" \
    -x LOOM_COMM_ID -x LOOM_TIMEOUT -x LOOM_NET -x UCX_TLS ${algo:+-x LOOM_ALGO} -x PATH \
    "$rank_bin" >>"$out" 2>&1 || fail=1
  rm -f "$hostfile"
fi
cat "$out"
[ "$(grep -c "on $hosts hosts: 0 wrong" "$out")" = "$nranks" ] ||
  { echo "FAIL: not every rank finished correctly on $hosts hosts"; fail=1; }
# Rank 0's first peer on another host is rank PER_HOST: reached over NET; its own host's over shm.
grep -q "rank 0 .* $per_host:$net" "$out" || { echo "FAIL: rank 0 did not reach rank $per_host over $net"; fail=1; }
if [ "$per_host" -ge 2 ] && ! grep -q "rank 0 .* 1:shm" "$out"; then echo "FAIL: ranks on one host did not share memory"; fail=1; fi
if [ "$impair" = proxy ]; then
  relayed=$(grep -o relaying "$NETNS_PROXY_LOG" 2>/dev/null | wc -l)
  echo "fault proxies relayed ${relayed:-0} connections"
  [ "${relayed:-0}" -gt 0 ] || { echo "FAIL: no connection went through the fault proxies"; fail=1; }
fi
rm -f "$out"
exit $fail
