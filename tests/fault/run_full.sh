#!/usr/bin/env bash
# The full fault campaign (CI runs a few trials of each; this runs 50 per phase): peer death on one host
# (4 ranks, over shared memory and over sockets), on 2 namespace hosts (2 ranks each) and across 4 (8
# ranks), at init, during allreduce, during destroy, and during an allreduce stream or a stream of grouped
# sends and receives that the survivors then shrink away from (loomCommShrink); then the network
# breaking under a stream of allreduces (link cut longer and shorter than LOOM_TIMEOUT, a black-holed
# host).  Needs root for the namespace cases.  Writes every trial's outcome as JSON into OUT_DIR.
# usage: tests/fault/run_full.sh [BUILD_DIR=build] [TRIALS=50] [OUT_DIR=build/fault-full]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build} trials=${2:-50} out=${3:-$build/fault-full}
rank_bin=$build/tests/fault_rank
[ -x "$rank_bin" ] || { echo "FAIL: $rank_bin not built (ninja -C $build fault_rank)"; exit 1; }
mkdir -p "$out"
fail=0
run() {
  local name=$1
  shift
  echo "== $name"
  python3 "$here/fault_trials.py" "$rank_bin" "$@" --json "$out/$name.json" | grep -v "^  " || fail=1
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
}
start=$(date +%s)
run peer_death_1host_4ranks --ranks 4 --trials "$trials"
LOOM_SHM_DISABLE=1 run peer_death_1host_4ranks_sockets --ranks 4 --trials "$trials"
run peer_death_2hosts_4ranks --ranks 4 --hosts 2 --trials "$trials"
run peer_death_4hosts_8ranks --ranks 8 --hosts 4 --trials "$trials"
net_trials=$(( trials / 5 > 0 ? trials / 5 : 1 ))
run linkdown_errors --ranks 4 --hosts 2 --trials "$net_trials" --netfault linkdown --timeout 1
run linkdown_recovers --ranks 4 --hosts 2 --trials "$net_trials" --netfault linkdown --timeout 8
run blackhole --ranks 4 --hosts 2 --trials "$net_trials" --netfault blackhole --timeout 3
echo "fault campaign: $(( $(date +%s) - start )) s, $([ $fail = 0 ] && echo "every trial passed" || echo "FAILURES above")"
exit $fail
