#!/usr/bin/env bash
# Builds the unit suites (core, transport) and the multi-process p2p, API and device (emulated GPU)
# suites with a sanitizer and runs them; under AddressSanitizer also the kernel and topology suites and a
# reduced matrix of the collectives: every collective and every allreduce algorithm at 3 ranks, every
# type, op, count and placement (CTest sanitize_address and sanitize_thread; 4-8 minutes each here).  UCX is left out: its libucm hooks madvise at thread exit, inside TSan's
# interceptors, and crash there.
#   tests/sanitize/run.sh [address|thread] [BUILD_DIR]
# address = AddressSanitizer + UndefinedBehaviorSanitizer (leak checking on), thread = ThreadSanitizer.
set -euo pipefail
# Whatever ends this script early says where (CTest shows only the output).
trap 'echo "tests/sanitize/run.sh: line $LINENO failed (exit $?)" >&2' ERR
here=$(cd "$(dirname "$0")/../.." && pwd)
kind=${1:-address} build=${2:-$here/build-$kind}
case $kind in
  address) flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;;
  thread) flags="-fsanitize=thread" ;;
  *) echo "usage: $0 [address|thread] [BUILD_DIR]"; exit 2 ;;
esac
# -g1: line tables for the reports' stack traces without the full debug information, which doubled the
# build's time (the build is most of this test's time, and CI's whole run is bounded).  Build type None:
# no -DNDEBUG, so assertions stay on.  A unity build (each target's sources compiled as a few
# translation units) parses the shared headers once per batch: 420 -> 320 CPU-seconds for the AddressSanitizer
# suites; it needs names in anonymous namespaces to differ between the files of one target.
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_UNITY_BUILD=ON -DLOOM_WITH_CUDA=OFF -DLOOM_WITH_TORCH=OFF -DLOOM_WITH_UCX=OFF \
  -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer -O1 -g1" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DLOOM_REFERENCE_COMPILE_OPTIONS="-fno-sanitize=all;-O2" \
  -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
# The build's output is kept out of the way (shown only when it fails), so that what a CI log shows
# first of this test is the suites' own output.
log=$build/build.log
# ThreadSanitizer looks at the suites where threads of one process share data (the bootstrap, the
# transports' I/O threads, streams and progress engines, loomCommInitAll, the device paths); the kernel,
# topology and 3-rank matrix suites run one thread per process and are AddressSanitizer's alone.
suites=(base_test bootstrap_test transport_test p2p_test api_test device_test)
[ "$kind" = address ] && suites+=(algos_test topo_test collectives_test allreduce_test)
if ! ninja -C "$build" -j "${SANITIZE_JOBS:-$(nproc)}" "${suites[@]}" > "$log" 2>&1; then
  tail -n 60 "$log"; exit 1
fi
if [ "$kind" = address ]; then
  # hwloc loads its PCI component (and with it libpciaccess) per topology and unloads it after; what
  # libpciaccess keeps allocated then shows as a leak from an unknown module.  Kept loaded from the
  # start (the ASan runtime must come first), its memory stays reachable and the report stays ours.
  # awk reads to the end: leaving early would end ldconfig with SIGPIPE and, under pipefail, this
  # script with it (silently; it happened in CI, where many pipes leave new ones a single page).
  pciaccess=$(/sbin/ldconfig -p | awk '/libpciaccess\.so\.0 / && !found {print $NF; found = 1}')
  [ -n "$pciaccess" ] && export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $pciaccess"
fi
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1:die_after_fork=0
# The tests' upper bounds on how long a failure may take to surface, stretched for the slower build.
export LOOM_TEST_TIME_SCALE=${LOOM_TEST_TIME_SCALE:-4}
failed=()
suite() {  # suite NAME [gtest args...]: runs one suite, its output kept for the summary
  local name=$1; shift
  echo "== $name ($kind)"
  if ! "$build/tests/${name%% *}" --gtest_brief=1 "$@" 2>&1 | tee "$build/${name// /_}.out"; then
    failed+=("$name")
  fi
}
for t in base_test bootstrap_test transport_test p2p_test api_test device_test; do suite $t; done
if [ "$kind" = address ]; then
  suite algos_test
  suite topo_test
  suite "collectives_test 3ranks" --gtest_filter='*3ranks'
  suite "allreduce_test 3ranks" --gtest_filter='Ranks/*3ranks:Forced/*3ranks'
fi
[ ${#failed[@]} -eq 0 ] && { echo "all suites passed ($kind)"; exit 0; }
# Repeated at the end, where a truncated log still shows it: which suites failed, and their failures.
for name in "${failed[@]}"; do
  echo "== FAILED: $name ($kind)"
  grep -E -A12 'Failure|ERROR|Sanitizer|runtime error|FAILED|hung|signal' "$build/${name// /_}.out" | awk 'NR <= 80'
done
exit 1
