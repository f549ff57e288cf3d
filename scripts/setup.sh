#!/usr/bin/env bash
# Installs everything kernellab needs on Debian 12, as root, idempotently:
# the Debian packages it drives (compiler, kernel build tools, QEMU, kernel sources)
# and kernellab itself, with its test dependencies, in ./.venv.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Debian packages: the manifest kernellab's doctor and error messages read too.
mapfile -t packages < <(awk '!/^[[:space:]]*#/ && NF >= 2 {print $2}' src/kernellab/packages.txt | sort -u)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}; run this script as root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=python3
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: kernellab needs Python >= 3.11 as python3" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
