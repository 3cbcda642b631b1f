#!/usr/bin/env bash
# loom-sim end to end: the nccl-tests table for fixtures of one and many hosts, the 100k-GPU plan
# (12,500 hosts of 8 GPUs: its time is printed, not asserted), a probed model read back, and bad input
# refused with exit status 2 (usage) or 1 (a topology that cannot be loaded).
set -u
tool=$1 fixtures=$2
. "$(dirname "$0")/expect.sh"
# The table's columns and one row per size: 8 B to 128 MB by 2 is 25 rows.
expect "header" "size         count      type   redop    root     time   algbw   busbw" "$tool" -t "$fixtures/a100_nvswitch.xml"
rows=$("$tool" -t "$fixtures/a100_nvswitch.xml" | grep -c '^ *[0-9]')
[ "$rows" -eq 25 ] || { echo "FAIL: 8 B .. 128 MB by 2 gave $rows rows, not 25"; fail=1; }
expect "allgather sizes per rank" "^ *1048576 *262144 *float *none *-1" "$tool" -t "$fixtures/cluster2_a100.xml" -c allgather -b 1M -e 1M
expect "busiest link" "% busy" "$tool" -t "$fixtures/cluster2_a100.xml" -b 1G -e 1G
expect "verbose parts" "latency .*, memory .*, links" "$tool" -t "$fixtures/cluster4_l20.xml" -b 1M -e 1M -v
expect "forced algorithm" "^#  *1048576  tree" "$tool" -t "$fixtures/cluster4_l20.xml" -b 1M -e 1M -a tree
expect "100k GPUs" "allreduce of 100000 ranks on 12500 host" "$tool" -t "$fixtures/a100_nvswitch.xml" -H 12500 -b 1G -e 1G
"$tool" -t "$fixtures/a100_nvswitch.xml" -H 12500 -b 1G -e 1G | grep "simulated in"
expect "probed model" "^# machine: --model step=5,net=1.1" "$tool" -H 2 -r 1 --model step=5,net=1.1 -b 1M -e 1M
for bad in "--coll gather" "--algo fastest" "--minbytes lots" "--stepfactor 1" "--model speed=3" "--model net=-1" \
           "--hosts 0" "-b 2M -e 1M" "extra" "-c alltoall -a ring"; do
  # shellcheck disable=SC2086
  "$tool" -t "$fixtures/a100_nvswitch.xml" $bad >/dev/null 2>&1
  rc=$?
  [ $rc -eq 2 ] || { echo "FAIL: loom-sim $bad exited $rc, not 2"; fail=1; }
done
"$tool" -t /nonexistent.xml >/dev/null 2>&1; [ $? -eq 1 ] || { echo "FAIL: a missing file is not exit status 1"; fail=1; }
"$tool" --help | grep -q -- "--model" || { echo "FAIL: --help does not list --model"; fail=1; }
exit $fail
