#!/usr/bin/env bash
# Allreduce across HOSTS test hosts made of network namespaces on a bridge (root only), one rank each,
# beside iperf3's single-stream TCP throughput between two of them on the same veths.
# usage: perf/netns_bench.sh BUILD_DIR [HOSTS] [SIZES...]     e.g. perf/netns_bench.sh build 2 8388608 33554432
set -eu
build=$1 hosts=${2:-2}
shift 2 || true
sizes=${*:-8388608 33554432}
tag=$$ br=lbr$tag subnet=10.$((100 + tag % 100)).$((tag / 100 % 250)).
cleanup() { for ((h = 0; h < hosts; h++)); do ip netns del lh$h$tag 2>/dev/null || true; done; ip link del "$br" 2>/dev/null || true; }
trap cleanup EXIT
ip link add "$br" type bridge && ip link set "$br" up
for ((h = 0; h < hosts; h++)); do
  ns=lh$h$tag
  ip netns add "$ns"
  ip link add lv$h$tag type veth peer name lp$h$tag
  ip link set lp$h$tag netns "$ns"
  ip link set lv$h$tag master "$br" && ip link set lv$h$tag up
  ip -n "$ns" addr add "${subnet}$((h + 1))/24" dev lp$h$tag
  ip -n "$ns" link set lp$h$tag up && ip -n "$ns" link set lo up
done
echo "# iperf3 single stream, host 1 -> host 0"
if command -v iperf3 >/dev/null; then
  ip netns exec lh0$tag iperf3 -s -1 -D >/dev/null 2>&1
  sleep 0.5
  ip netns exec lh1$tag iperf3 -c "${subnet}1" -t 3 -f g 2>&1 | grep -E "receiver" || true
else
  echo "# iperf3 is not installed (apt-get install iperf3): no baseline"
fi
for size in $sizes; do
  export LOOM_COMM_ID="${subnet}1:$((30000 + (tag + size) % 20000))" LOOM_NETNS_BENCH=$size
  for ((h = 0; h < hosts; h++)); do
    ip netns exec lh$h$tag "$build/tests/netns_rank" "$hosts" "$h" > /tmp/netns_bench_$h.$tag 2>&1 &
  done
  wait
  grep -h "bench" /tmp/netns_bench_*."$tag" || cat /tmp/netns_bench_*."$tag"
  rm -f /tmp/netns_bench_*."$tag"
done
