"""What a real machine is, and what kernel it runs, read through its shell: uname, CPU,
memory, the kernel command line, the cpufreq governor, the load, whether it is virtual;
the running kernel's config and its log. Every run on such a machine is labelled with it.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from .. import arches, paths
from ..errors import LabError
from .shell import Shell, script

# One `key=value` per line; a missing fact is an empty value. POSIX sh and busybox alike.
FACTS_SCRIPT = r"""
cpuinfo() { sed -n "s/^$1[[:space:]]*: *//p" /proc/cpuinfo 2>/dev/null | head -n 1; }
echo "release=$(uname -r)"
echo "version=$(uname -v)"
echo "machine=$(uname -m)"
echo "hostname=$(uname -n)"
echo "uid=$(id -u)"
model=$(cpuinfo 'model name'); [ -n "$model" ] || model=$(cpuinfo cpu); [ -n "$model" ] || model=$(cpuinfo 'vendor_id')
echo "cpu_model=$model"
echo "cpus=$(grep -c '^processor' /proc/cpuinfo 2>/dev/null)"
echo "mem_kib=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo)"
echo "cmdline=$(cat /proc/cmdline)"
echo "governor=$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null)"
echo "loadavg=$(cut -d ' ' -f 1-3 /proc/loadavg)"
virt=$(systemd-detect-virt 2>/dev/null)
[ -n "$virt" ] || { grep -qw hypervisor /proc/cpuinfo 2>/dev/null && virt=hypervisor; }
echo "virtualization=$virt"
echo "dmesg_restrict=$(cat /proc/sys/kernel/dmesg_restrict 2>/dev/null)"
echo "kexec_load_disabled=$(cat /proc/sys/kernel/kexec_load_disabled 2>/dev/null)"
echo "lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null)"
echo "kexec=$(command -v kexec)"
[ -d /run/systemd/system ] && echo "systemd=yes" || echo "systemd=no"
echo "boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
os=$(cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>/dev/null)
osr() { printf '%s\n' "$os" | sed -n "s/^$1=//p" | head -n 1 | tr -d '"'; }
echo "os_id=$(osr ID)"
echo "os_like=$(osr ID_LIKE)"
echo "os=$(osr PRETTY_NAME)"
"""

# Where distributions keep a kernel's config when it was not built with /proc/config.gz.
CONFIG_SCRIPT = r"""
if [ -r /proc/config.gz ]; then echo /proc/config.gz; cat /proc/config.gz
elif [ -r "/boot/config-$(uname -r)" ]; then echo "/boot/config-$(uname -r)"; cat "/boot/config-$(uname -r)"
else exit 3; fi
"""


# For each program in "$@" (a name, or a path with a '/'): where the agent finds it (PATH
# searched as execvp does, the agent's default PATH when it is empty), the Debian package
# that owns that file and the package's version, as dpkg-query says; five NUL-terminated
# fields per program: the program, "yes" or "no" (dpkg-query is there), the path (empty:
# not found), the package and its version (empty: none). dpkg records a file under the
# path its package ships, /bin/true on a merged-/usr machine whose PATH finds /usr/bin/true:
# the file's path and its target's (readlink -f), each with and without /usr, are asked in
# one call. A path dpkg-query would read as a pattern (with *?[\) is not asked.
OWNER_SCRIPT = r"""set -f
dpkg=yes
command -v dpkg-query >/dev/null 2>&1 || dpkg=no
usr() { case $1 in /usr/*) printf '%s' "${1#/usr}" ;; *) printf '/usr%s' "$1" ;; esac; }
for prog in "$@"; do
  path= package= version=
  case $prog in
    */*) [ -f "$prog" ] && [ -x "$prog" ] && path=$prog ;;
    *) IFS=:
       for dir in ${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}; do
         [ -f "${dir:-.}/$prog" ] && [ -x "${dir:-.}/$prog" ] && { path=${dir:-.}/$prog; break; }
       done
       unset IFS ;;
  esac
  if [ -n "$path" ] && [ "$dpkg" = yes ]; then
    real=$(readlink -f "$path" 2>/dev/null) || real=
    case $path in /*) ;; *) path=$real ;; esac
    real=${real:-$path}
    case $path$real in
      *[][*?\\]*) ;;
      /*) package=$(dpkg-query -S "$path" "$(usr "$path")" "$real" "$(usr "$real")" 2>/dev/null |
                    sed -n '/^diversion by /d; /^local diversion /d; s/: .*//; s/, .*//; p' | head -n 1) ;;
    esac
    [ -z "$package" ] || version=$(dpkg-query -W -f '${Version}' "$package" 2>/dev/null)
  fi
  printf '%s\0%s\0%s\0%s\0%s\0' "$prog" "$dpkg" "$path" "$package" "$version"
done
"""


@dataclass(frozen=True)
class Facts:
    values: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> str:
        return self.values.get(key, "")

    @property
    def is_root(self) -> bool:
        return self["uid"] == "0"

    @property
    def debian(self) -> bool:
        """Whether its packages are Debian's (Debian, or a distribution made from it as
        os-release's ID_LIKE says: Ubuntu, Raspberry Pi OS): the packages a workload file
        names are installed there by those names."""
        return self["os_id"] == "debian" or "debian" in self["os_like"].split()

    def description(self) -> str:
        """"AMD EPYC, 2 CPUs, 23.5 GiB, a docker virtual machine": what the label says."""
        parts = [self["cpu_model"] or "unknown CPU"]
        if self["cpus"]:
            parts.append(f"{self['cpus']} CPUs")
        if self["mem_kib"].isdigit():
            parts.append(f"{int(self['mem_kib']) / 1048576:.1f} GiB")
        virt = self["virtualization"]
        if virt and virt != "none":
            parts.append("virtualized" if virt == "hypervisor" else f"virtualized ({virt})")
        return ", ".join(parts)

    def details(self) -> dict[str, str]:
        keys = ("hostname", "os", "release", "version", "machine", "cpu_model", "cpus", "mem_kib", "cmdline",
                "governor", "loadavg", "virtualization")
        out = {k: self[k] for k in keys if self[k]}
        out.setdefault("governor", "none (no cpufreq)")
        # Whose package names a missing program's message may give (guest.workloads.Reader).
        out["packages"] = "Debian's" if self.debian else "not Debian's"
        return out

    @property
    def kernel_id(self) -> str:
        """The running kernel, identified by its release and build string."""
        return hashlib.sha256(f"{self['release']}\n{self['version']}".encode()).hexdigest()


def read_facts(shell: Shell) -> Facts:
    result = shell.run(script(FACTS_SCRIPT))
    if result.code != 0 or "release=" not in result.text:
        raise LabError(f"cannot read what {shell.where} is (exit {result.code}: {result.stderr.strip()[:200]}): "
                       "it needs a POSIX sh with uname, sed and cat")
    values = {}
    for line in result.text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            values[key] = value.strip()
    return Facts(values)


@dataclass(frozen=True)
class Owner:
    """Where a program a machine runs came from: its Debian package and that package's
    version, or why its version is not known."""
    package: str | None = None
    version: str | None = None
    why: str = ""


def program_owners(shell: Shell, facts: Facts, programs: list[str]) -> dict[str, Owner]:
    """Each of `programs` (argv[0]s the agent runs there), with the Debian package that owns
    it and its version, asked of the machine's dpkg in one script: the programs are its
    arguments, never its text. A machine that is not Debian's is not asked."""
    if not programs:
        return {}
    if not facts.debian:
        why = f"{shell.where} is not Debian's (its os-release): only dpkg is asked which package a program is from"
        return {program: Owner(why=why) for program in programs}
    result = shell.run(script(OWNER_SCRIPT, *programs))
    fields = result.stdout.split(b"\0")[:-1]
    if result.code != 0 or len(fields) != 5 * len(programs):
        why = f"dpkg-query on {shell.where} did not answer (exit {result.code}: {result.stderr.strip()[:200]})"
        return {program: Owner(why=why) for program in programs}
    return {program: _owner(shell.where, program, *(f.decode("utf-8", "replace") for f in fields[5 * i + 1:5 * i + 5]))
            for i, program in enumerate(programs)}


def _owner(where: str, program: str, dpkg: str, path: str, package: str, version: str) -> Owner:
    if dpkg != "yes":
        return Owner(why=f"{where} has no dpkg-query")
    if not path:
        return Owner(why=f"{program} is not found in PATH on {where}")
    if not package:
        return Owner(why=f"{path} on {where} is in no Debian package")
    if not version:
        return Owner(package, why=f"dpkg-query on {where} gives no version of {package}")
    return Owner(package, version)


def running_config(shell: Shell) -> tuple[str | None, str]:
    """(the running kernel's .config, where it came from), or (None, why there is none)."""
    result = shell.run(script(CONFIG_SCRIPT))
    if result.code != 0:
        return None, ("the running kernel's config is not in /proc/config.gz (CONFIG_IKCONFIG_PROC) "
                      "nor in /boot/config-RELEASE")
    origin, _, data = result.stdout.partition(b"\n")
    where = origin.decode(errors="replace")
    if where.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            return None, f"{where} is not readable gzip ({exc})"
    return data.decode("utf-8", "replace"), where


def running_config_file(shell: Shell) -> Path:
    """The running kernel's config as a file (cached by content), for anything that reads
    a .config: a variant's base `running`, `audit running`, `config diff running ...`."""
    text, origin = running_config(shell)
    if text is None:
        raise LabError(f"{shell.where}: {origin}")
    path = paths.cache_dir("running-configs") / f"{hashlib.sha256(text.encode()).hexdigest()[:20]}.config"
    if not path.exists():
        path.write_text(text)
    return path


def kernel_log(shell: Shell, facts: Facts) -> tuple[list[str] | None, str]:
    """(the kernel's log as dmesg prints it, "dmesg"), or (None, why it cannot be read)."""
    result = shell.run(script("dmesg"))
    if result.code == 0 and result.stdout:
        return result.text.splitlines(), "dmesg"
    if facts["dmesg_restrict"] == "1" and not facts.is_root:
        return None, "needs root (kernel.dmesg_restrict=1)"
    return None, f"dmesg failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else 'no output'}"


def arch_profile(machine: str, asked: str | None) -> arches.ArchProfile:
    """The arch profile for what `uname -m` says (the profiles' `uname` lists)."""
    matches = [name for name in arches.available() if machine in arches.load(name).uname]
    if asked is not None:
        if asked not in matches:
            raise LabError(f"the target is {machine} (uname -m), which arch profile {asked} is not: "
                           f"drop --arch or use {' or '.join(matches) or 'a profile for it'}")
        return arches.load(asked)
    if not matches:
        raise LabError(f"kernellab has no arch profile for {machine} (uname -m): profiles list the "
                       "machines they fit in their `uname` key")
    if len(matches) > 1:
        raise LabError(f"{machine} (uname -m) fits the arch profiles {', '.join(matches)}: pick one with --arch")
    return arches.load(matches[0])
