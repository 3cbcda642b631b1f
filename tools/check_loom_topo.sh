#!/usr/bin/env bash
# loom-topo end to end: it prints the decisions the topology tests assert for the fixtures, draws a PNG,
# plans a 1024-host cluster, and refuses bad input with exit status 2 (usage) or 1 (bad file).
set -u
tool=$1 fixtures=$2 scratch=$3
mkdir -p "$scratch"
. "$(dirname "$0")/expect.sh"
expect "local machine" "^host " "$tool"
expect "NVLink pairs" "0<->1: p2p/nvlink" "$tool" -t "$fixtures/a100_nvswitch.xml" -q
expect "GDR under a switch" "GPU0<->mlx5_0: PIX, GDR on" "$tool" -t "$fixtures/l20_pcie.xml" -q
expect "GDR across the CPU" "GDR off for GPU0<->mlx5_0: NIC and GPU only meet at the CPU (PHB)" "$tool" -t "$fixtures/twosocket_pcie.xml" -q
expect "socket crossings" "crosses the CPU socket link 2 times" "$tool" -t "$fixtures/twosocket_pcie.xml" -q
expect "MIG" "MIG instances get no P2P" "$tool" -t "$fixtures/h100_mig.xml" -q
expect "rails" "rail 3 (mlx5_3" "$tool" -t "$fixtures/cluster4_l20.xml" -q
expect "path matrix" "GPU0 *X *NVL" "$tool" -t "$fixtures/a100_nvswitch.xml"
expect "1024 hosts" "8192 ranks" "$tool" -t "$fixtures/a100_nvswitch.xml" -H 1024 -q
expect "plan" "<- chosen" "$tool" -t "$fixtures/a100_nvswitch.xml" -H 4 -q --plan 1G
if command -v dot >/dev/null; then
  rm -f "$scratch/l20.png"
  "$tool" -t "$fixtures/l20_pcie.xml" -q --png "$scratch/l20.png" >/dev/null
  if ! head -c 8 "$scratch/l20.png" 2>/dev/null | grep -q PNG; then echo "FAIL: --png wrote no PNG"; fail=1; fi
else
  echo "note: Graphviz's dot is not installed: --png not checked"
fi
"$tool" --hosts zero >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: a bad --hosts is not exit status 2"; fail=1; }
"$tool" --plan lots >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: a bad --plan is not exit status 2"; fail=1; }
echo '<system><cpu numaid="0"><gpu/></cpu></system>' > "$scratch/bad.xml"
expect "bad file" "bad.xml:1: <gpu> cannot appear inside <cpu>" "$tool" -t "$scratch/bad.xml"
"$tool" -t "$scratch/bad.xml" >/dev/null 2>&1; [ $? -eq 1 ] || { echo "FAIL: a bad file is not exit status 1"; fail=1; }
"$tool" --help | grep -q -- "--plan" || { echo "FAIL: --help does not list --plan"; fail=1; }
exit $fail
