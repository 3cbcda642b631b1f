#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) in BUILD_DIR and runs each for SECONDS, starting
# from the seed corpus here plus everything found earlier (kept in BUILD_DIR).  A crash, leak, sanitizer
# report or timeout fails the run; libFuzzer writes the input that did it to BUILD_DIR/artifacts/ -- fix
# the bug and add the input to corpus/<target>/ so that every later run replays it.
# usage: tests/fuzz/run.sh [SECONDS=60] [BUILD_DIR=build-fuzz]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
seconds=${1:-60} build=${2:-build-fuzz}
command -v clang++ >/dev/null || { echo "FAIL: clang++ is not installed (scripts/setup.sh installs it)"; exit 1; }
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" >/dev/null
mkdir -p "$build/artifacts"
fail=0
for t in bootstrap topo_xml params; do
  mkdir -p "$build/corpus/$t"
  dict=()
  [ "$t" = topo_xml ] && dict=(-dict="$here/xml.dict")
  echo "== fuzz_$t for ${seconds}s"
  if ! "$build/fuzz_$t" "$build/corpus/$t" "$here/corpus/$t" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=8192 -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 2>"$build/$t.log"; then
    tail -40 "$build/$t.log"
    echo "FAIL: fuzz_$t found a problem; its input is in $build/artifacts/"
    fail=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/$t.log" | tr '\n' ' '
    echo
  fi
done
exit $fail
