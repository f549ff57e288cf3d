"""Booting a built kernel on a remote machine with kexec, measuring it, and returning the
machine to its default kernel.

Safety rules, each enforced here:
- never touch the bootloader or /boot: the kernel goes to /tmp/kernellab, `kexec -l`
  loads it with the running kernel's command line and initramfs (the machine's own, in
  /boot, only read), the copy is removed once loaded, and a reboot returns the machine to
  whatever its bootloader starts;
- refuse where kexec is disabled (kernel.kexec_load_disabled, lockdown) or missing;
- a variant must keep what ssh needs (the network driver of the route back to us and the
  root file system's): checked on the variant's config before anything starts;
- a variant that does not come back: the user's power-cycle command, if configured (as
  ktest's POWER_CYCLE), and the run fails with the reason; without one, stop and say
  what state the machine is in.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import LabError
from ..guest.console import ConsoleLine
from . import Capabilities, Capacity, Exit, Target, TargetInfo, TargetOptions, Want, registry
from .running import RunningConsole, RunningTarget, agent_options
from .shell import SshShell, parse_ssh_url, script

if TYPE_CHECKING:
    from ..guest.workloads import Packages
    from ..workloads import Instance

COME_BACK_S = 300.0     # from `kexec -e` (or a reboot) to ssh answering again
POLL_S = 0.5
SSH_READY_LINE = "kernellab: ssh reachable"

# Where distributions keep the initramfs of a kernel release.
INITRD_SCRIPT = r"""r=$(uname -r)
for f in "/boot/initrd.img-$r" "/boot/initramfs-$r.img" "/boot/initrd-$r"; do
  [ -r "$f" ] && { echo "$f"; exit 0; }
done"""

# The drivers the remote needs to be reached again: those of the network device on the
# route back to us, and of the root file system's device and type. One "module" per line.
DRIVERS_SCRIPT = r"""client=${SSH_CONNECTION%% *}
dev=$(ip route get "$client" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)
[ -n "$dev" ] || dev=$(ip route show default 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)
walk() {
  p=$(readlink -f "$1")
  while [ -n "$p" ] && [ "$p" != /sys/devices ] && [ "$p" != / ]; do
    if [ -e "$p/driver" ]; then
      if [ -e "$p/driver/module" ]; then m=$(readlink -f "$p/driver/module"); else m=$(readlink -f "$p/driver"); fi
      echo "$2 ${m##*/}"
    fi
    p=${p%/*}
  done
}
[ -n "$dev" ] && walk "/sys/class/net/$dev/device" "net:$dev"
set -- $(awk '$2 == "/" { print $1, $3 }' /proc/mounts | tail -n 1)
echo "fs:/ $2"
case "$1" in /dev/*) b=$(readlink -f "$1"); walk "/sys/class/block/${b##*/}/device" "disk:$1";; esac
"""

# `kexec -l` of "$1" (the kernel there), with "$2" as its initramfs if not empty, and the
# running kernel's command line followed by the rest of the parameters, one word each.
LOAD_SCRIPT = r"""kernel=$1 initrd=$2
shift 2
cmdline="$(cat /proc/cmdline) $*"
if [ -n "$initrd" ]; then
  exec kexec -l "$kernel" --initrd="$initrd" --command-line="$cmdline"
fi
exec kexec -l "$kernel" --command-line="$cmdline"
"""

# Runs the command in "$@" a second after this ssh session has closed: in a session of its
# own (no hangup when the login ends) and holding none of the channel's fds, which would
# keep the session open.
DETACHED_SCRIPT = r"""setsid sh -c 'sleep 1; sync; exec "$@"' sh "$@" </dev/null >/dev/null 2>&1 &"""

BOOT_ID_SCRIPT = "cat /proc/sys/kernel/random/boot_id"
BOOT_ID_AND_CMDLINE_SCRIPT = "cat /proc/sys/kernel/random/boot_id /proc/cmdline"

# File systems that need no driver: the root of an initramfs.
BUILTIN_FS = {"rootfs", "ramfs", "tmpfs"}


CAPABILITIES = Capabilities(boots_kernels=True, measures_running=True, deterministic=False, agent="program",
                            kexec=True, scratch_dir=True, host_link=True)


class SshSite:
    """--target ssh://[user@]host[:port]: the kernel a remote machine runs, and built
    kernels booted there with kexec."""

    def __init__(self, spec: str, options: TargetOptions):
        self.spec = self.name = spec
        self.capabilities = CAPABILITIES
        shell = SshShell(parse_ssh_url(spec), options.ssh_config, options.accept_new_host_key)
        # Named by its spec, as the store files its runs: a run on one host is never reused for another.
        self.machine: RunningTarget | None = RunningTarget(shell, spec, options.arch, options.block_dir)
        self.kexec = KexecTarget(self.machine, options.power_cycle, options.come_back_s)

    def target(self, want: Want, log: Callable[[str], None]) -> Target:
        return self.kexec


class KexecTarget:
    """An ssh target that boots built kernels with kexec (and measures the running one)."""

    def __init__(self, machine: RunningTarget, power_cycle: str | None = None, come_back_s: float = COME_BACK_S):
        self.machine, self.power_cycle, self.come_back_s = machine, power_cycle, come_back_s
        self.name = machine.name
        self.capabilities = CAPABILITIES

    def describe(self, mode: str) -> TargetInfo:
        return self.machine.describe(mode)

    def installed(self, instances: Sequence[Instance]) -> Packages:
        return self.machine.installed(instances)

    def workdir_free_mib(self) -> tuple[str, int]:
        """Asked before a run starts: of the kernel the machine runs, before a built one is
        kexec'd into (the same file systems, /tmp's size aside where it is a tmpfs)."""
        return self.machine.workdir_free_mib()

    def capacity(self) -> Capacity:
        """Asked before a run starts, as workdir_free_mib: of the kernel the machine runs. A
        built kernel kexec'd into sees the same CPUs and memory unless it is made to see
        fewer (maxcpus=, mem=, a config without SMP): its workloads then get less than this."""
        return self.machine.capacity()

    # -- before anything starts ---------------------------------------------------

    def refuse_unless_kexec_works(self) -> None:
        facts, where = self.machine.facts, self.machine.shell.where
        if not facts["kexec"]:
            raise LabError(f"{where} has no kexec: install kexec-tools there to boot variants on it")
        if facts["kexec_load_disabled"] == "1":
            raise LabError(f"{where} forbids kexec (kernel.kexec_load_disabled=1, which only a reboot resets)")
        if re.search(r"\[(integrity|confidentiality)\]", facts["lockdown"]):
            raise LabError(f"{where} is in kernel lockdown ({facts['lockdown']}): it loads no unsigned kernel "
                           "with kexec")
        if not facts.is_root:
            raise LabError(f"booting a variant on {where} needs root there (kexec): log in as root")

    def drivers(self) -> list[tuple[str, str]]:
        """(what, driver or file system) pairs the remote's ssh depends on."""
        result = self.machine.shell.run(script(DRIVERS_SCRIPT))
        out = []
        for line in result.text.splitlines():
            what, _, module = line.partition(" ")
            if module and not (what == "fs:/" and module in BUILTIN_FS):
                out.append((what, module.replace("-", "_")))
        return out

    def check_variant(self, name: str, values: dict[str, str], options: dict[str, str]) -> None:
        """`options`: module name -> its CONFIG_ option (from the source tree's Makefiles)."""
        self.refuse_unless_kexec_works()
        for what, module in self.drivers():
            option = options.get(module)
            if option is None:
                continue  # a driver the source does not build (a platform's own): nothing to check
            value = values.get(option, "n")
            if value == "m":
                raise LabError(f"variant {name}: {option}=m ({module}, for {what}); kernellab copies no modules: "
                               f"build it in ({option}=y)")
            if value != "y":
                raise LabError(f"variant {name} lacks {option} ({module}, for {what}): booted with kexec, the "
                               "machine would never answer ssh again; base the variant on `running` and keep it")

    # -- a run ---------------------------------------------------------------------

    @contextmanager
    def start(self, kernel: Path | None, agent: Path | None, cmdline: str, mode: str,
              timeout_s: float) -> Iterator[RunningConsole | _NoConsole]:
        if kernel is None:
            with self.machine.start(None, agent, cmdline, mode, timeout_s) as running:
                yield running
            return
        options = agent_options(cmdline, kernel_booted=True)
        agent_words = " ".join(f"{k}={v}" for k, v in options.env.items())
        outcome = self.boot(kernel, options.kernel_words)
        try:
            if isinstance(outcome, str):
                yield _NoConsole(outcome)
                return
            with self.machine.start(None, agent, agent_words, mode, timeout_s) as console:
                console.first = [ConsoleLine(outcome, f"{SSH_READY_LINE} {outcome:.1f} s after kexec -e")]
                yield console
        finally:
            if not isinstance(outcome, str):
                self.return_to_default()

    def boot(self, kernel: Path, words: list[str]) -> float | str:
        """kexec into `kernel`: the seconds from `kexec -e` to ssh answering in it, or why it
        failed (after a power cycle)."""
        self.refuse_unless_kexec_works()
        shell, where = self.machine.shell, self.machine.shell.where
        marker = f"kernellab.boot={secrets.token_hex(6)}"
        path = self.machine.copy(kernel, "kernel")
        try:
            initrd = shell.run(script(INITRD_SCRIPT)).text.strip()
            loaded = shell.run(script(LOAD_SCRIPT, path, initrd, *words, marker), timeout_s=120)
        finally:
            self.machine.remove(path)   # in the kernel's memory once loaded: the file is needed no more
        if loaded.code != 0:
            raise LabError(f"kexec -l on {where} failed: {loaded.stderr.strip()[-300:] or f'exit {loaded.code}'}")
        before = self._boot_id()
        self._detached(["systemctl", "kexec"] if self.machine.facts["systemd"] == "yes" else ["kexec", "-e"])
        started = time.monotonic()
        state = self._wait_for(lambda boot_id, cmdline: boot_id != before, self.come_back_s)
        if state is None:
            if self._answers_with(before):
                return (f"{where} still runs its default kernel {self.come_back_s:.0f} s after kexec -e: "
                        "the kexec did not start the variant")
            return self._recover(f"did not answer within {self.come_back_s:.0f} s of kexec -e")
        if marker not in state[1]:
            return (f"came back in another kernel ({state[1].strip()[:120]}): the variant did not boot, or "
                    "panicked and the machine restarted its default kernel")
        self.machine.reset()
        return time.monotonic() - started - 1.0   # the detached command waits 1 s before kexec -e

    def return_to_default(self) -> None:
        """A reboot: the machine starts whatever its bootloader starts, untouched by kernellab."""
        before = self._boot_id()
        self._detached(["systemctl", "reboot"] if self.machine.facts["systemd"] == "yes" else ["reboot"])
        state = self._wait_for(lambda boot_id, cmdline: boot_id != before and "kernellab.boot=" not in cmdline,
                               self.come_back_s)
        self.machine.reset()
        if state is None:  # power-cycled back to its default kernel, or a LabError saying its state
            self._recover(f"did not come back from the reboot into its default kernel within {self.come_back_s:.0f} s")

    # -- helpers ------------------------------------------------------------------------

    def _detached(self, argv: list[str]) -> None:
        """Starts `argv` there, after a sync, a second after this ssh session has closed."""
        self.machine.shell.run(script(DETACHED_SCRIPT, *argv), timeout_s=30)

    def _answers_with(self, boot_id: str) -> bool:
        try:
            return self._boot_id() == boot_id
        except LabError:
            return False

    def _boot_id(self) -> str:
        return self.machine.shell.run(script(BOOT_ID_SCRIPT)).text.strip()

    def _wait_for(self, ready: Callable[[str, str], bool], within_s: float) -> tuple[str, str] | None:
        """Polls ssh until `ready(boot_id, cmdline)`; None when the time runs out."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            out = self.machine.shell.poll(script(BOOT_ID_AND_CMDLINE_SCRIPT))
            if out is not None and out.code == 0:
                boot_id, _, cmdline = out.text.partition("\n")
                if ready(boot_id.strip(), cmdline):
                    return boot_id.strip(), cmdline
            time.sleep(POLL_S)
        return None

    def _recover(self, what: str) -> str:
        where = self.machine.shell.where
        if not self.power_cycle:
            raise LabError(f"{where} {what}. It is running the variant or is hung; its disk is as it was (kexec "
                           "touched nothing there): power-cycle it by hand, or give --power-cycle CMD to let "
                           "kernellab do it")
        # The user's own command (--power-cycle), a shell command by design, as ktest's POWER_CYCLE.
        done = subprocess.run(["sh", "-c", self.power_cycle], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise LabError(f"{where} {what}, and the power-cycle command failed (exit {done.returncode}: "
                           f"{done.stderr.strip()[-200:]}): check the machine by hand")
        back = self._wait_for(lambda boot_id, cmdline: "kernellab.boot=" not in cmdline, self.come_back_s)
        if back is None:
            raise LabError(f"{where} {what}; kernellab power-cycled it, and it did not come back within "
                           f"{self.come_back_s:.0f} s: check the machine by hand")
        self.machine.reset()
        return f"{where} {what}; power-cycled with --power-cycle, back in its default kernel"


class _NoConsole:
    """The run of a variant that never came back: nothing to read, and why."""

    def __init__(self, reason: str):
        self.command: list[str] = []
        self.reason = reason

    def lines(self) -> Iterator[ConsoleLine]:
        return iter(())

    def stop_in(self, seconds: float) -> None:
        pass

    @property
    def exit(self) -> Exit:
        return Exit(None, False, self.reason, 0.0, ended="the variant never came back; nothing measured")

    def unavailable(self) -> dict[str, str]:
        return {}

    def facts_after(self) -> dict[str, str]:
        return {}


registry.register("ssh://", SshSite, CAPABILITIES, "ssh://[user@]host[:port]", "ssh://HOST")
