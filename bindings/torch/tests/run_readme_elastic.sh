#!/usr/bin/env bash
# Runs the elastic training block of README.md ("Elastic training"), exactly as written, on 4 processes
# started here (torchrun would stop every worker when one dies) with DEMO_KILL_RANK=2, from an empty
# folder, and checks that rank 2 died by SIGKILL and that the 3 survivors finished, each as a rank of 3.
#   run_readme_elastic.sh PYTHON README [PACKAGE_DIR]
set -euo pipefail
py=$1 readme=$(realpath "$2") pkg=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The first python block after the "### Elastic training" heading.
awk '/^### Elastic training/{s=1} s && /^```python/{f=1;next} /^```/{if(f){exit}} f' "$readme" > "$work/elastic.py"
grep -q "loom_torch.shrink" "$work/elastic.py" || { echo "FAIL: README's Elastic training block is not the elastic loop"; exit 1; }
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cd "$work"
pids=()
for r in 0 1 2 3; do
  RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DEMO_KILL_RANK=2 LOOM_TIMEOUT=30 OMP_NUM_THREADS=1 \
    PYTHONPATH="$pkg" timeout 240 "$py" elastic.py > "out.$r" 2> "err.$r" &
  pids+=($!)
done
fail=0
for r in 0 1 2 3; do
  code=0
  wait "${pids[$r]}" || code=$?
  if [ "$r" = 2 ]; then
    [ "$code" = 137 ] || { echo "FAIL: rank 2 ended with $code, not by SIGKILL (137)"; fail=1; }
  else
    new=$([ "$r" -lt 2 ] && echo "$r" || echo $((r - 1)))
    if [ "$code" != 0 ] || ! grep -q "^rank $new of 3 finished at step 50" "out.$r"; then
      echo "FAIL: rank $r ended with $code: $(cat "out.$r") $(tail -5 "err.$r")"
      fail=1
    fi
  fi
done
[ $fail = 0 ] && echo "README elastic loop ran as written: rank 2 died at step 20, 3 survivors finished step 50"
exit $fail
