#!/usr/bin/env bash
# Fails when README.md does not document one of the LOOM_* parameters that loom-info lists.
set -euo pipefail
info=$1
readme=$2
missing=0
for var in $("$info" --env | cut -d= -f1); do
  if ! grep -qF "\`$var\`" "$readme"; then
    echo "README.md does not document $var"
    missing=1
  fi
done
[ $missing -eq 0 ] && echo "README.md documents every parameter"
exit $missing
