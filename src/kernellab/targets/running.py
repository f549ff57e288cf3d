"""The kernel a real machine runs now, measured by the agent run as an ordinary program
(not PID 1, no power-off): this machine (`--target local`) or one reached over ssh
(`--target ssh://[user@]host[:port]`).

The console is the kernel's log first (dmesg, replayed: its printk times give the boot
milestones and the "Memory:" line while the ring buffer still holds them), then the
agent's output as it arrives. Time is the machine's own: wall mode only.

Block I/O metrics run only on a file in a directory the user names (`--block-dir`), never
on a device. A workload's files go where the agent makes its {workdir}, under /tmp: the
free space there is read before a run whose workloads need room (needs.disk_mib; statvfs
here, `df -Pk` there), and one that does not fit is not run (experiments.lab).

On a remote machine the agent, the workloads file (with the user's programs) and, for
targets.kexec, the kernel are copied under AGENT_DIR, each named KIND-HEX16 by its content
and sent only when not there already. So that copies do not pile up on a machine that is
the user's own (each new agent build is megabytes), a command removes, at its first use of
a kind, the other copies of that kind last used before the one it uses (touched first):
what stays is what the latest command used. At the first use rather than at the end of a
command, because a command that is interrupted or loses its ssh link never reaches its
end; and no larger set is kept, because a copy is sent again in seconds when needed. The
kernel's copy is removed as soon as `kexec -l` has loaded it (targets.kexec): a kexec'd or
rebooted machine mostly clears /tmp anyway, so keeping it saved no resend. A name that is
not KIND-HEX16 of a kind kernellab writes is never removed. A command measuring the same
machine at the same time with another agent loses its copy, which its next run sends again
(the agent running from it is not disturbed).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..arches import ArchProfile
from ..errors import LabError
from ..guest.console import BEFORE_INIT, ConsoleLine
from ..guest.session import console_samples
from ..guest.workloads import Packages, machine_programs
from . import Capabilities, Capacity, Target, TargetInfo, TargetOptions, Want, registry
from .machine import Facts, Owner, arch_profile, kernel_log, program_owners, read_facts
from .shell import LocalShell, Script, Shell, script
from .stream import ProcessConsole

if TYPE_CHECKING:
    from ..workloads import Instance

AGENT_DIR = "/tmp/kernellab"  # where the agent (and what it reads) is copied on a remote machine
# The agent's option naming its workloads file: a file on this machine, the user's own
# programs in bin/ beside it (guest.workloads.local_file), which the target puts where
# the agent runs.
WORKLOADS_OPTION = "KL_WORKLOADS"
WORKLOADS_FILE = "workloads"
PID_LINE = "@kernellab-agent-pid "
TIMING = "the machine's own clock: a hardware figure, noisy, needing repetitions and statistics"
DEFAULT_BLOCK_MB = 32
MAX_BLOCK_MB = 65536     # the agent's own limit (agent/main.c)
# Copies stdin to "$1" (under the directory "$2"), renamed into place when whole.
COPY_SCRIPT = r"""mkdir -p "$2" && cat > "$1.tmp" && chmod 755 "$1.tmp" && mv "$1.tmp" "$1"
"""
EXISTS_SCRIPT = 'test -e "$1"'
# The kinds of copy kernellab writes under AGENT_DIR, each named KIND-HEX16 (`_name`).
COPY_KINDS = ("agent", "kernel", "workloads")
# In the directory "$1", touches the copy "$2" (one kernellab uses now) and removes the
# other copies of kind "$3" that are older: only names of the pattern kernellab writes
# (KIND-HEX16, its digits listed: a range may take in capitals in some locales), never one
# that is not its own; nothing when "$2" is not there.
PRUNE_SCRIPT = r"""dir=$1 keep=$2 kind=$3
[ -e "$dir/$keep" ] || exit 0
touch -c "$dir/$keep"
for old in "$dir/$kind"-*; do
  name=${old##*/}
  case "$name" in "$keep" | "$kind"-*[!0123456789abcdef]*) continue ;; esac
  [ "${#name}" -eq $((${#kind} + 17)) ] || continue
  if [ "$old" -ot "$dir/$keep" ]; then rm -rf -- "$old"; fi
done
exit 0
"""
REMOVE_SCRIPT = 'rm -f -- "$1"'
# Where the agent, run as a program, makes the directory each workload's {workdir} is in
# (agent/main.c: mkdtemp of /tmp/kl-agent-XXXXXX).
WORKDIR_PARENT = "/tmp"
# The file system holding "$1": POSIX's format (a heading, then one line), in KiB.
DF_SCRIPT = 'exec df -Pk -- "$1"'
# That line: file system, size, used, available, capacity ("-" where the size is 0), where
# it is mounted. ASCII digits only, and few of them: what the machine says is data.
_DF_LINE = re.compile(r"\S.*?\s+[0-9]{1,20}\s+[0-9]{1,20}\s+([0-9]{1,20})\s+(?:[0-9]{1,3}%|-)\s+/.*")
# The CPUs a program started there may run on (nproc: its affinity, as the agent's
# workloads inherit it) and the memory the kernel manages (/proc/meminfo's MemTotal line),
# one a line: no value of kernellab's in it. nproc prints OpenMP's thread limit instead
# where OMP_NUM_THREADS or OMP_THREAD_LIMIT is set, which Dask's nanny sets to 1 in the
# process that starts a local cluster (distributed's pre-spawn-environ) and a shell passes on.
CAPACITY_SCRIPT = "unset OMP_NUM_THREADS OMP_THREAD_LIMIT; nproc && grep '^MemTotal:' /proc/meminfo"
MEMINFO = "/proc/meminfo"
# What it prints: ASCII digits only, and few of them: what the machine says is data.
_CAPACITY = re.compile(r"([0-9]{1,6})\nMemTotal:[ \t]+([0-9]{1,20}) kB\n?")
KILL_SCRIPT = 'kill "$1" 2>/dev/null'
# ssh's own words of the connection: the client's address and port, then the machine's own
# address as the connection reached it, and its port.
SSH_CONNECTION_SCRIPT = 'printf "%s\\n" "${SSH_CONNECTION:-}"'
AFTER_SCRIPT = "cut -d ' ' -f 1-3 /proc/loadavg; uname -r; uname -v"

# The agent "$1", with the KL_* settings after "$3" in its environment; on a scratch file
# of "$3" MiB in the directory "$2" if that is not empty (a file it may overwrite, never a
# device). The first line out is PID_LINE and the agent's pid, for stopping it there.
AGENT_SCRIPT = r"""set -u
agent=$1 block_dir=$2 block_mib=$3
shift 3
if [ -n "$block_dir" ]; then
  f="$block_dir/kernellab-scratch.$$"
  trap 'rm -f "$f"' EXIT
  dd if=/dev/zero of="$f" bs=1048576 count=0 seek="$block_mib" 2>/dev/null ||
    { printf 'cannot create a scratch file in %s\n' "$block_dir" >&2; exit 4; }
  env "$@" "$agent" --block-dev "$f" &
else
  env "$@" "$agent" &
fi
pid=$!
echo "@kernellab-agent-pid $pid"
wait "$pid"
"""

# What a running kernel's log gives: printk times of the boot, and its "Memory:" line.
LOG_METRICS = (*(f"boot.{name}.printk" for name in BEFORE_INIT), "mem.kernel.available", "mem.kernel.total")


@dataclass(frozen=True)
class AgentOptions:
    env: dict[str, str]      # KL_* for the agent
    block_file_mib: int      # the scratch file's size, when a block directory is given
    kernel_words: list[str]  # kernel parameters: for a kernel kexec'd into (targets.kexec)


def agent_options(cmdline: str, kernel_booted: bool) -> AgentOptions:
    """The run's command line, for an agent started as a program: KL_* words are its
    options; anything else is a kernel parameter, which only a boot can set."""
    env, kernel_words = {}, []
    for word in cmdline.split():
        key, eq, value = word.partition("=")
        if key.startswith("KL_") and eq:
            if not _AGENT_OPTION.fullmatch(key):
                raise LabError(f"bad agent option {word!r}: KL_ and letters, digits or '_' only (KL_ONLY=...)")
            env[key] = value
        else:
            kernel_words.append(word)
    if kernel_words and not kernel_booted:
        raise LabError(f"{' '.join(kernel_words)}: kernel parameters (boot:, sysctl:, --initcalls) need a boot, "
                       "and the running kernel's were fixed when it booted; measure them as a built variant "
                       "(under QEMU, or kexec'd on an ssh target)")
    block_mb = env.get("KL_BLOCK_MB", str(DEFAULT_BLOCK_MB))
    if not (block_mb.isascii() and block_mb.isdigit() and 0 < int(block_mb) <= MAX_BLOCK_MB):
        raise LabError(f"bad KL_BLOCK_MB={block_mb!r}: give the scratch file's size in MiB, 1 to {MAX_BLOCK_MB}")
    return AgentOptions(env, int(block_mb), kernel_words)


_AGENT_OPTION = re.compile(r"KL_[A-Za-z0-9_]+")


def _name(kind: str, hexdigest: str) -> str:
    """A copy's file name under AGENT_DIR: the only names PRUNE_SCRIPT ever removes."""
    assert kind in COPY_KINDS, kind
    return f"{kind}-{hexdigest[:16]}"


CAPABILITIES = Capabilities(boots_kernels=False, measures_running=True, deterministic=False, agent="program",
                            scratch_dir=True, host_link=True)


class LocalSite:
    """--target local: the kernel this machine runs, measured with the agent as a program."""
    name = "local"

    def __init__(self, spec: str, options: TargetOptions):
        self.spec = spec
        self.capabilities = CAPABILITIES
        self.machine: RunningTarget | None = RunningTarget(LocalShell(), "local", options.arch, options.block_dir)

    def target(self, want: Want, log: Callable[[str], None]) -> Target:
        assert self.machine is not None
        return self.machine


class RunningTarget:
    """A real machine and the kernel it runs."""

    def __init__(self, shell: Shell, name: str, arch: str | None = None, block_dir: str | None = None):
        self.shell, self.name = shell, name
        self.asked_arch, self.block_dir = arch, block_dir
        self.capabilities = CAPABILITIES
        self._pruned: set[str] = set()   # the kinds of copy whose older copies this command removed
        self._owners: dict[str, Owner] = {}   # each program asked of the machine's dpkg in this command

    @cached_property
    def facts(self) -> Facts:
        return read_facts(self.shell)

    def reset(self) -> None:
        """The machine booted another kernel: read its facts again."""
        self.__dict__.pop("facts", None)

    @cached_property
    def profile(self) -> ArchProfile:
        return arch_profile(self.facts["machine"], self.asked_arch)

    def describe(self, mode: str) -> TargetInfo:
        details = {"target": self.shell.where, **self.facts.details()}
        return TargetInfo(f"hardware: {self.facts.description()}", details, TIMING)

    @cached_property
    def link_address(self) -> str:
        """The machine's address as the host reaches it, for the workloads that talk to the
        host: this one's loopback, or the address kernellab's ssh connection reached
        ($SSH_CONNECTION's third word: through a jump host, the address the jump host used)."""
        if self.shell.here:
            return "127.0.0.1"
        return ssh_server_address(self.shell.run(script(SSH_CONNECTION_SCRIPT)).text, self.shell.where)

    def installed(self, instances: Sequence[Instance]) -> Packages:
        """Where the instances' programs came from on the machine: the Debian package that
        owns each and its version, or why not known; asked of its dpkg once per program in
        a command (the machine's packages do not change under a run, nor with a kexec)."""
        asked, own = machine_programs(instances)
        new = [program for program in asked if program not in self._owners]
        self._owners.update(program_owners(self.shell, self.facts, new))
        owners = {program: self._owners[program] for program in asked}
        return Packages({o.package: o.version for o in owners.values() if o.package and o.version},
                        {program: o.package for program, o in owners.items() if o.package},
                        {**{program: o.why for program, o in owners.items() if o.why}, **own})

    def workdir_free_mib(self) -> tuple[str, int]:
        """Where the workloads' {workdir} is made on the machine, and the MiB free there (to
        a user: a file system's reserve for root left out, as df counts it)."""
        if self.shell.here:
            try:
                fs = os.statvfs(WORKDIR_PARENT)
            except OSError as exc:
                raise LabError(f"cannot read the free space under {WORKDIR_PARENT} on this machine "
                               f"({exc.strerror}): check that it exists") from None
            return WORKDIR_PARENT, fs.f_bavail * fs.f_frsize >> 20
        result = self.shell.run(script(DF_SCRIPT, WORKDIR_PARENT))
        if result.code != 0:
            said = (result.stderr.strip().splitlines() or ["no message"])[-1]
            raise LabError(f"`df -Pk {WORKDIR_PARENT}` failed on {self.shell.where} ({said[:120]!r}): check that "
                           "df works there")
        return WORKDIR_PARENT, df_free_kib(result.text, WORKDIR_PARENT, self.shell.where) >> 10

    def capacity(self) -> Capacity:
        """The CPUs the workloads may run on and the memory the machine's kernel manages:
        here the affinity kernellab runs with and /proc/meminfo, there what CAPACITY_SCRIPT
        prints (in the same form, read by one parser)."""
        if not self.shell.here:
            result = self.shell.run(script(CAPACITY_SCRIPT))
            if result.code != 0:
                said = (result.stderr.strip().splitlines() or ["no message"])[-1]
                raise LabError(f"`nproc` and /proc/meminfo could not be read on {self.shell.where} "
                               f"({said[:120]!r}): check that nproc (coreutils or busybox) is there")
            return capacity_of(result.text, self.shell.where)
        try:
            meminfo = Path(MEMINFO).read_text(errors="replace")
        except OSError as exc:
            raise LabError(f"cannot read {MEMINFO} on this machine ({exc.strerror}): is /proc mounted?") from None
        total = next((line for line in meminfo.splitlines() if line.startswith("MemTotal:")), "")
        return capacity_of(f"{len(os.sched_getaffinity(0))}\n{total}\n", self.shell.where)

    def install(self, agent: Path) -> str:
        """The agent's path on the machine."""
        return str(agent) if self.shell.here else self.copy(agent, "agent")

    def place_workloads(self, options: AgentOptions) -> AgentOptions:
        """The agent's options with KL_WORKLOADS naming the workloads file on the machine:
        on another one, a copy of the file and its bin/ (the user's own programs), beside
        the agent. The programs the workloads name otherwise are the machine's own."""
        local = options.env.get(WORKLOADS_OPTION)
        if local is None or self.shell.here:
            return options
        return replace(options, env={**options.env, WORKLOADS_OPTION: self.copy_workloads(Path(local))})

    def copy_workloads(self, local: Path) -> str:
        """The workloads file `local` and the programs in bin/ beside it, in a directory on
        the machine named by their content: sent only when not there already, the file
        last, so that a directory holding it is whole."""
        programs = sorted(p for p in (local.parent / "bin").glob("*") if p.is_file())
        contents = [(f"bin/{p.name}", p.read_bytes()) for p in programs] + [(WORKLOADS_FILE, local.read_bytes())]
        digest = hashlib.sha256()
        for name, data in contents:
            digest.update(f"{name}\0{len(data)}\0".encode() + data)
        name = _name("workloads", digest.hexdigest())
        directory = f"{AGENT_DIR}/{name}"
        if not self._exists(f"{directory}/{WORKLOADS_FILE}"):
            for file, data in contents:
                self._send(data, f"{directory}/{file}", "workloads")
        self._prune("workloads", name)
        return f"{directory}/{WORKLOADS_FILE}"

    def copy(self, local: Path, kind: str) -> str:
        """`local` on the machine, named by its content under AGENT_DIR: sent only when it is
        not there already, and renamed into place, so that no reader sees half a file."""
        data = local.read_bytes()
        name = _name(kind, hashlib.sha256(data).hexdigest())
        path = f"{AGENT_DIR}/{name}"
        if not self._exists(path):
            self._send(data, path, kind)
        self._prune(kind, name)
        return path

    def remove(self, path: str) -> None:
        """A copy of `copy` that is needed no more (a kernel kexec has loaded). Failing to
        reach the machine here is not the run's failure: the next command's pruning clears it."""
        try:
            self.shell.run(script(REMOVE_SCRIPT, path))
        except LabError:
            pass

    def _prune(self, kind: str, keep: str) -> None:
        """Once a command: the copies of `kind` older than `keep`, the one it uses, removed."""
        if kind in self._pruned:
            return
        self._pruned.add(kind)
        self.shell.run(script(PRUNE_SCRIPT, AGENT_DIR, keep, kind))

    def _exists(self, path: str) -> bool:
        return self.shell.run(script(EXISTS_SCRIPT, path)).code == 0

    def _send(self, data: bytes, path: str, what: str) -> None:
        """`data` as the file `path` there (executable: the agent, a kernel, the user's
        programs), through ssh's stdin: the path is a script argument, the content data."""
        result = self.shell.run(script(COPY_SCRIPT, path, path.rpartition("/")[0]), stdin=data, timeout_s=600)
        if result.code != 0:
            raise LabError(f"cannot copy the {what} to {self.shell.where}:{path}: {result.stderr.strip()[-200:]}")

    def agent_script(self, agent_path: str, options: AgentOptions) -> Script:
        settings = [f"{k}={v}" for k, v in sorted(options.env.items())]
        return script(AGENT_SCRIPT, agent_path, self.block_dir or "", str(options.block_file_mib), *settings)

    @contextmanager
    def start(self, kernel: Path | None, agent: Path | None, cmdline: str, mode: str,
              timeout_s: float) -> Iterator[RunningConsole]:
        if kernel is not None:
            raise LabError(f"the {self.name} target measures the kernel the machine runs; "
                           "to boot a built kernel there use an ssh target (kexec)")
        if agent is None:
            raise LabError("no agent to run")
        options = self.place_workloads(agent_options(cmdline, kernel_booted=False))
        log, why = kernel_log(self.shell, self.facts)
        path = self.install(agent)
        console = RunningConsole(self.shell, self.agent_script(path, options), timeout_s, log, why,
                                 lambda: self.link_address)
        try:
            yield console
        finally:
            console.close()


def df_free_kib(text: str, directory: str, where: str) -> int:
    """The KiB available that `df -Pk DIRECTORY` printed: a heading and one line of
    POSIX's format; anything else refused in one line."""
    lines = text.splitlines()
    found = _DF_LINE.fullmatch(lines[1]) if len(lines) == 2 else None
    if found is None:
        raise LabError(f"cannot read the free space under {directory} on {where}: `df -Pk {directory}` printed "
                       f"{text[:160]!r}, not POSIX's heading and one line: check that df there is coreutils' or "
                       "busybox's")
    return int(found.group(1))


def ssh_server_address(text: str, where: str) -> str:
    """The machine's own address in what SSH_CONNECTION_SCRIPT printed (client address,
    client port, server address, server port); anything else refused in one line."""
    words = text.split()
    try:
        if len(words) == 4:
            return str(ipaddress.ip_address(words[2]))
    except ValueError:
        pass
    raise LabError(f"cannot tell the address of {where} as kernellab's ssh connection reached it: its "
                   f"$SSH_CONNECTION is {text.strip()[:120]!r}, not four words with an IP address third; a "
                   "workload that talks to the host needs it")


def capacity_of(text: str, where: str) -> Capacity:
    """The machine's CPUs and memory from what CAPACITY_SCRIPT printed: a count of CPUs
    (1 or more) and /proc/meminfo's MemTotal line; anything else refused in one line."""
    found = _CAPACITY.fullmatch(text)
    if found is None or int(found.group(1)) < 1:
        raise LabError(f"cannot read the CPUs and memory of {where}: `nproc` and /proc/meminfo's MemTotal printed "
                       f"{text[:160]!r}, not a count of CPUs and a line `MemTotal: N kB`: check that nproc there is "
                       "coreutils' or busybox's")
    return Capacity("the machine", int(found.group(1)), int(found.group(2)) >> 10)


class RunningConsole(ProcessConsole):
    """The kernel's log, replayed, then the agent's records as they arrive."""

    def __init__(self, shell: Shell, agent_script: Script, timeout_s: float, log: list[str] | None,
                 log_reason: str, link_address: Callable[[], str] | None = None):
        self.shell, self.log, self.log_reason = shell, log, log_reason
        self.link_address = link_address   # the machine's address as the host reaches it, asked when needed
        self.first: list[ConsoleLine] = []   # kernellab's own lines before the agent's (targets.kexec)
        self.remote_pid: str | None = None
        command = ["sh", "-c", agent_script] if shell.here else [shell.where, agent_script]
        super().__init__(command, timeout_s, shell.popen(agent_script))

    def lines(self) -> Iterator[ConsoleLine]:
        for text in self.log or []:
            yield ConsoleLine(0.0, text, replayed=True)
        yield from self.first
        for line in super().lines():
            if line.text.startswith(PID_LINE):
                self.remote_pid = line.text.removeprefix(PID_LINE).strip()
                continue
            yield line

    def host_address(self, port: int) -> tuple[str, int]:
        """A real machine's ports are where they are: at its own address."""
        address = self.link_address() if self.link_address is not None else "127.0.0.1"
        return address, port

    def unavailable(self) -> dict[str, str]:
        """The boot figures the kernel's log no longer (or never) gave."""
        if self.log is None:
            why = f"the kernel log: {self.log_reason}"
            return {m: why for m in LOG_METRICS}
        found = {s.metric for s in console_samples([ConsoleLine(0.0, t, replayed=True) for t in self.log])}
        return {m: "not in the kernel log any more (its ring buffer has wrapped since boot)"
                for m in LOG_METRICS if m not in found}

    def facts_after(self) -> dict[str, str]:
        """The load after the run, and the kernel that ran it (a kexec'd one is not the
        kernel the machine was described with before)."""
        try:
            result = self.shell.run(script(AFTER_SCRIPT), timeout_s=30)
        except LabError:
            return {}
        lines = result.text.splitlines()
        if result.code != 0 or len(lines) != 3:
            return {}
        return {"loadavg_after": lines[0], "release": lines[1], "version": lines[2]}

    def kill(self) -> None:
        """Stops the agent there too: closing ssh's channel does not."""
        if self.remote_pid and self.remote_pid.isdigit() and not self.shell.here:
            try:
                self.shell.run(script(KILL_SCRIPT, self.remote_pid), timeout_s=15)
            except LabError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the shell started in a session of its own
        except ProcessLookupError:
            pass

    def _finish(self, timed_out: bool) -> None:
        if self._exit is not None:
            return
        super()._finish(timed_out)
        assert self._exit is not None
        code = self._exit.code
        if code is not None and 128 < code < 255:  # sh's `wait` on a killed agent; 255 is ssh's own
            self._exit.stderr += f"\nthe agent was killed by signal {code - 128}"
        self._exit = replace(self._exit, ended="the agent stopped before its end record")


registry.register("local", LocalSite, CAPABILITIES)
