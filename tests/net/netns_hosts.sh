# Test hosts made of Linux network namespaces on a bridge (needs root and iproute2).  Sourced by the
# namespace tests and benchmarks:
#   netns_make_hosts N   makes hosts NETNS_HOSTS[0..N), addresses NETNS_ADDRS[...] on one /24, each
#                        with its veth NETNS_VETHS[...] (the host's side; for tc and iptables rules)
#   netns_cleanup        removes them (installed as an EXIT trap by netns_make_hosts, so a failing or
#                        interrupted test leaves nothing behind)
# Traffic only ever flows between these namespaces: the bridge in the root namespace has no address.
NETNS_TAG=${NETNS_TAG:-$$}
NETNS_BRIDGE=lbr$NETNS_TAG
NETNS_SUBNET=10.$((100 + NETNS_TAG % 100)).$((NETNS_TAG / 100 % 250)).
NETNS_HOSTS=() NETNS_ADDRS=() NETNS_VETHS=()
NETNS_PROXY_LOG=/tmp/loom-fault-proxy.$NETNS_TAG.log  # what the fault proxies relayed

netns_cleanup() {
  local h
  for h in "${NETNS_HOSTS[@]}"; do ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  for h in "${NETNS_HOSTS[@]}"; do ip netns del "$h" 2>/dev/null; done
  # netns_rsh.sh gives each host its own OpenMPI session directory here.
  for h in "${NETNS_HOSTS[@]}"; do rm -rf "${TMPDIR:-/tmp}/loom-netns-tmp/$h"; done
  ip link del "$NETNS_BRIDGE" 2>/dev/null
  rm -f "$NETNS_PROXY_LOG"
  return 0
}

# Exit 77 (CTest: skipped) where namespaces cannot be made: not root, or no iproute2.
netns_require() {
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then echo "skipped: needs root and iproute2"; exit 77; fi
}

netns_make_hosts() {
  local n=$1 h ns
  trap netns_cleanup EXIT
  ip link add "$NETNS_BRIDGE" type bridge 2>/dev/null || { echo "skipped: cannot create a bridge"; exit 77; }
  ip link set "$NETNS_BRIDGE" up
  for ((h = 0; h < n; h++)); do
    ns=lh$h-$NETNS_TAG
    ip netns add "$ns" || { echo "skipped: cannot create network namespaces"; exit 77; }
    NETNS_HOSTS+=("$ns")
    ip link add lv$h-$NETNS_TAG type veth peer name lp$h-$NETNS_TAG || exit 1
    ip link set lp$h-$NETNS_TAG netns "$ns" || exit 1
    ip link set lv$h-$NETNS_TAG master "$NETNS_BRIDGE" && ip link set lv$h-$NETNS_TAG up || exit 1
    ip -n "$ns" addr add "${NETNS_SUBNET}$((h + 1))/24" dev lp$h-$NETNS_TAG || exit 1
    ip -n "$ns" link set lp$h-$NETNS_TAG up && ip -n "$ns" link set lo up || exit 1
    NETNS_ADDRS+=("${NETNS_SUBNET}$((h + 1))")
    NETNS_VETHS+=("lp$h-$NETNS_TAG")
  done
}

# Impairs the network of the hosts made above (needs iptables and tc; this kernel has no netem):
#   drop   host 1 drops 0.5% of the packets it receives, at random (iptables statistic rule)
#   slow   host 1 sends at 1 Gbit/s at most (tbf on its veth): hosts differ in bandwidth
#   proxy  every host's outgoing TCP to the other hosts runs through fault_proxy.py (random piece sizes,
#          delays and stalls), which an iptables REDIRECT rule interposes transparently
netns_impair() {
  local mode=$1 here h port
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  case $mode in
    none | "") ;;
    drop) ip netns exec "${NETNS_HOSTS[1]}" iptables -A INPUT -m statistic --mode random --probability 0.005 -j DROP ;;
    slow) ip netns exec "${NETNS_HOSTS[1]}" tc qdisc add dev "${NETNS_VETHS[1]}" root tbf rate 1gbit burst 256kb latency 100ms ;;
    proxy)
      port=$((40000 + NETNS_TAG % 20000))
      for ((h = 0; h < ${#NETNS_HOSTS[@]}; h++)); do
        ip netns exec "${NETNS_HOSTS[h]}" iptables -t nat -A OUTPUT -d "${NETNS_ADDRS[h]}" -j RETURN || return 1
        ip netns exec "${NETNS_HOSTS[h]}" iptables -t nat -A OUTPUT -p tcp -d "${NETNS_SUBNET}0/24" \
          -m mark ! --mark 1 -j REDIRECT --to-ports "$port" || return 1
        (ip netns exec "${NETNS_HOSTS[h]}" python3 "$here/fault_proxy.py" "$port" "$((NETNS_TAG + h))" \
          >>"$NETNS_PROXY_LOG" 2>&1 &)
      done
      # The rules are in place; wait until every proxy listens (it prints its banner), at most 20 s.
      for ((h = 0; h < 200; h++)); do
        [ "$(grep -o "fault_proxy: port" "$NETNS_PROXY_LOG" 2>/dev/null | wc -l)" -ge ${#NETNS_HOSTS[@]} ] && return 0
        sleep 0.1
      done
      echo "netns_impair: the fault proxies did not start"; return 1 ;;
    *) echo "netns_impair: unknown mode $mode"; return 1 ;;
  esac
}
