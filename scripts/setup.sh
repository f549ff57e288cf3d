#!/usr/bin/env bash
# Installs everything kernellab needs on Debian 12, as root, idempotently:
# the Debian packages it drives (compiler, kernel build tools, QEMU, kernel sources)
# and kernellab itself, with its test dependencies, in ./.venv.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  make gcc libc6-dev binutils flex bison bc cpio ccache xz-utils libelf-dev libssl-dev
  qemu-system-x86 linux-source-6.1 linux-config-6.1 linux-source-6.12 linux-config-6.12
  python3 python3-venv
  # the agent's cross compilers (src/kernellab/agent/cross.toml) and qemu-user to run them
  gcc-i686-linux-gnu libc6-dev-i386-cross gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  gcc-powerpc-linux-gnu libc6-dev-powerpc-cross gcc-s390x-linux-gnu libc6-dev-s390x-cross
  qemu-user
  # the emulators of the other arch profiles (src/kernellab/arches/): arm64 (qemu-system-arm),
  # ppc44x and ppc32 (qemu-system-ppc), s390x (qemu-system-misc); i386 is in qemu-system-x86
  qemu-system-arm qemu-system-ppc qemu-system-misc
)
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
