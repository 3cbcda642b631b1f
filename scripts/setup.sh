#!/usr/bin/env bash
# Installs what loom needs to build and test on a fresh Debian 12 machine (run as root, or with sudo
# available).  Packages already present at the pinned version are left alone, so a second run is quick.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=()
while IFS= read -r line; do
  case "$line" in ''|\#*) continue ;; esac
  pkg=${line%%=*}
  ver=${line#*=}
  have=$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null || true)
  [ "$have" = "install ok installed $ver" ] || missing+=("$pkg=$ver")
done < "$here/deps-debian.txt"

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    echo "setup: pinned versions not available from this mirror; installing the current bookworm versions" >&2
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]%%=*}"
  fi
fi
# Python: torch for the loom_torch backend and pytest for its tests, into the python3 on PATH.  A
# failure here fails the setup (the torch tests must not skip silently).
py=$(command -v python3)
if ! "$py" -m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$here/requirements-python.txt"; then
  echo "setup: cannot install $here/requirements-python.txt with $py" >&2
  exit 1
fi
echo "setup: dependencies present (python: $py)"
