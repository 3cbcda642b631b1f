#!/usr/bin/env bash
# Allreduce across HOSTS test hosts made of network namespaces on a bridge (root only; see
# tests/net/netns_hosts.sh), one rank per host, every library in the same run, alternating rounds so
# that drift on a shared machine hits all alike:
#   loom over the socket transport and over UCX (tcp), and OpenMPI's own MPI_Allreduce (pml ob1,
#   btl tcp), all through build/perf/all_reduce_perf under mpirun (an rsh agent enters the namespaces);
#   Gloo, PyTorch's gloo backend (perf/gloo_bench.py; skipped with a note when torch is missing);
#   iperf3's single-stream TCP throughput between two hosts on the same veths, and its throughput per
#   stream with every host sending one stream to the next at once (the ring's links all loaded: the
#   ceiling of a ring allreduce's busbw on this machine).
# Prints the median busbw of each library per size, loom's ratios to the others, and the ceiling's
# ratios (the most any library could reach against OpenMPI, Gloo and iperf3).
# usage: [LOOM_...=...] perf/netns_bench.sh BUILD_DIR [HOSTS] [ROUNDS] [SIZES...]
#   e.g. perf/netns_bench.sh build 2 3 8388608 33554432
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd) hosts=${2:-2} rounds=${3:-3}
shift 3 || shift $#
sizes=${*:-8388608 33554432}
. "$here/../tests/net/netns_hosts.sh"
netns_require
netns_make_hosts "$hosts"
results=$(mktemp)
trap 'netns_cleanup; rm -f "$results"' EXIT

iperf=nan ring=nan
if command -v iperf3 >/dev/null; then
  ip netns exec "${NETNS_HOSTS[0]}" iperf3 -s -1 -D >/dev/null 2>&1
  sleep 0.5
  # Receiver-side throughput of one 3 s stream, in GB/s (iperf3 reports Gbits/sec).
  iperf=$(ip netns exec "${NETNS_HOSTS[1]}" iperf3 -c "${NETNS_ADDRS[0]}" -t 3 -f g 2>&1 |
    awk '/receiver/ {for (i = 1; i < NF; i++) if ($(i + 1) ~ /Gbits/) print $i / 8}')
  # A ring allreduce keeps every host's link to the next host busy at once (both directions of the one
  # link at 2 hosts), and here the same two cores carry every host's ends: each stream may then get far
  # less than one stream alone.  One stream from every host to the next at the same time (an iperf3
  # server and client per host): the mean of their receiver-side throughput, the most a ring's link can
  # carry while the others are loaded too -- an upper bound on any library's ring allreduce busbw here,
  # since that busbw is exactly what each rank sends per second.
  sleep 0.5
  for ((h = 0; h < hosts; h++)); do
    ip netns exec "${NETNS_HOSTS[h]}" iperf3 -s -1 -D -p $((5301 + h)) >/dev/null 2>&1
  done
  sleep 0.5
  pids=()
  for ((h = 0; h < hosts; h++)); do
    to=$(((h + 1) % hosts))
    ip netns exec "${NETNS_HOSTS[h]}" iperf3 -c "${NETNS_ADDRS[to]}" -p $((5301 + to)) -t 3 -f g >"$results.ring$h" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  ring=$(cat "$results".ring* |
    awk -v n="$hosts" '/receiver/ {for (i = 1; i < NF; i++) if ($(i + 1) ~ /Gbits/) {s += $i / 8; k++}} END {print k == n ? s / k : "nan"}')
  rm -f "$results".ring*
else
  echo "# iperf3 is not installed (apt-get install iperf3): no baseline"
fi

# Every LOOM_* variable set by the caller reaches the ranks (e.g. LOOM_NSOCKS=2 perf/netns_bench.sh ...).
passthrough=$(env | awk -F= '/^LOOM_/ && $1 != "LOOM_NET" {printf "-x %s ", $1}')
# --bind-to none: each namespace "host" would otherwise bind its rank to its first core, and every
# host here shares the same cores, so all ranks would land on core 0.
hostfile=$(mktemp)
for h in "${NETNS_HOSTS[@]}"; do echo "$h slots=1"; done >"$hostfile"
run_perf() {  # $1 = label, $2 = backend, rest: extra environment
  local label=$1 backend=$2 size
  shift 2
  for size in $sizes; do
    env "$@" ip netns exec "${NETNS_HOSTS[0]}" mpirun --allow-run-as-root -np "$hosts" --hostfile "$hostfile" \
      --mca plm_rsh_agent "$here/../tests/net/netns_rsh.sh" --mca rtc_hwloc_vmhole none \
      --mca oob_tcp_if_include "${NETNS_SUBNET}0/24" --mca btl_tcp_if_include "${NETNS_SUBNET}0/24" \
      --mca pml ob1 --mca btl tcp,self --bind-to none -x LOOM_NET -x UCX_TLS -x PATH $passthrough \
      "$build/perf/all_reduce_perf" -b "$size" -e "$size" -n 20 -w 5 -c 0 -B "$backend" 2>&1 |
      awk -v l="$label" '$1 ~ /^[0-9]+$/ && NF >= 12 {print l, $1, $8}' >>"$results"
  done
}
run_gloo() {
  local h pids=()
  for ((h = 0; h < hosts; h++)); do
    ip netns exec "${NETNS_HOSTS[h]}" env RANK=$h WORLD_SIZE="$hosts" MASTER_ADDR="${NETNS_ADDRS[0]}" \
      MASTER_PORT=$((29000 + NETNS_TAG % 1000)) GLOO_SOCKET_IFNAME="${NETNS_VETHS[h]}" \
      python3 "$here/gloo_bench.py" --collectives all_reduce -- $sizes >"$results.gloo$h" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  awk '/^gloo all_reduce/ {print "gloo", $3, $(NF - 1)}' "$results.gloo0" >>"$results"
  rm -f "$results".gloo*
}
have_torch=1
python3 -c "import torch" 2>/dev/null || { have_torch=0; echo "# torch is not installed: no Gloo column"; }

for ((r = 0; r < rounds; r++)); do
  run_perf loom-socket loom LOOM_NET=socket UCX_TLS=tcp
  run_perf loom-ucx loom LOOM_NET=ucx UCX_TLS=tcp
  [ -z "${NETNS_BENCH_LOOM_ONLY:-}" ] && run_perf openmpi-tcp mpi LOOM_NET=socket UCX_TLS=tcp
  [ $have_torch = 1 ] && [ -z "${NETNS_BENCH_LOOM_ONLY:-}" ] && run_gloo
done
rm -f "$hostfile"

python3 - "$results" "$hosts" "$iperf" "$rounds" "$ring" <<'EOF'
import statistics, sys
path, hosts, iperf, rounds, ring = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
by = {}
for line in open(path):
    label, size, busbw = line.split()
    by.setdefault((label, int(size)), []).append(float(busbw))
labels = ["loom-socket", "loom-ucx", "openmpi-tcp", "gloo"]
print(f"# allreduce float32 sum, {hosts} hosts x 1 rank, busbw GB/s (median of {rounds} rounds); "
      f"iperf3 single stream {iperf:.3f} GB/s; every host streaming to the next at once {ring:.3f} GB/s "
      f"per stream (the ring ceiling)")
ratios = [("loom-socket", "gloo"), ("loom-socket", "openmpi-tcp"), ("loom-ucx", "gloo"), ("loom-ucx", "openmpi-tcp"),
          ("loom-socket", "iperf3"), ("loom-ucx", "iperf3"), ("loom-socket", "ceiling"),
          ("ceiling", "gloo"), ("ceiling", "openmpi-tcp"), ("ceiling", "iperf3")]
short = lambda l: l.replace("loom-", "").replace("-tcp", "")
print("| size | " + " | ".join(labels) + " | " + " | ".join(f"{short(a)}/{short(b)}" for a, b in ratios) + " |")
print("|---" * (len(labels) + len(ratios) + 1) + "|")
for size in sorted({s for _, s in by}):
    m = {l: statistics.median(by[(l, size)]) if (l, size) in by else float("nan") for l in labels}
    m["ceiling"], m["iperf3"] = ring, iperf
    def ratio(a, b):
        if not m[b] > 0 or m[a] != m[a]:
            return "n/a"
        return f"{m[a] / m[b]:.0%}" if b in ("iperf3", "ceiling") else f"{m[a] / m[b]:.2f}"
    print(f"| {size >> 20} MB | " + " | ".join(f"{m[l]:.3f}" for l in labels) + " | " +
          " | ".join(ratio(a, b) for a, b in ratios) + " |")
EOF
