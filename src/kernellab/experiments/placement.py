"""Where a command's variants run (`--target`, `--accel`): QEMU, this machine, or a
machine over ssh; and what that changes for the experiment (its arch, its timing mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import modes
from ..build import Build
from ..errors import LabError
from ..targets import Target
from ..targets.accel import ACCELS, choose
from ..targets.qemu import QemuTarget
from ..targets.running import RunningTarget
from ..targets.shell import LocalShell, SshShell, parse_ssh_url
from .lab import Prepared, RunOptions
from .spec import VariantSpec


@dataclass(frozen=True)
class TargetOptions:
    target: str = "qemu"                 # qemu | local | ssh://[user@]host[:port]
    accel: str = "auto"                  # the qemu target's accelerator
    ssh_config: Path | None = None       # ssh -F
    accept_new_host_key: bool = False
    block_dir: str | None = None         # where block I/O metrics may write a file
    power_cycle: str | None = None       # a command that power-cycles the ssh target (kexec)
    arch: str | None = None              # --arch as the user gave it


class Placement:
    """The target of every run of one command."""

    def __init__(self, options: TargetOptions, log: Callable[[str], None]):
        self.options, self.log = options, log
        self._accels: dict[str, str] = {}
        self.machine: RunningTarget | None = None
        if options.accel not in ACCELS:
            raise LabError(f"unknown --accel {options.accel!r}: use one of {', '.join(ACCELS)}")
        if options.target == "local":
            self.machine = RunningTarget(LocalShell(), "local", options.arch, options.block_dir)
        elif options.target.startswith("ssh://"):
            shell = SshShell(parse_ssh_url(options.target), options.ssh_config, options.accept_new_host_key)
            self.machine = RunningTarget(shell, "ssh", options.arch, options.block_dir)
        elif options.target != "qemu":
            raise LabError(f"unknown --target {options.target!r}: use qemu, local or ssh://[user@]host[:port]")
        if self.machine is None and options.block_dir:
            raise LabError("--block-dir is for --target local or ssh (QEMU guests get a scratch disk of their own)")
        if self.machine is not None and options.accel == "kvm":
            raise LabError("--accel kvm is for the qemu target")

    def default_mode(self) -> str:
        """Real machines keep time with their own clock: wall mode."""
        return modes.DEFAULT if self.machine is None else "wall"

    def check_mode(self, mode: str) -> None:
        if self.machine is not None and modes.get(mode).deterministic:
            raise LabError(f"--mode {mode} needs QEMU's instruction counting; a real machine ({self.options.target}) "
                           "measures in wall mode: use --mode wall")

    def adapt(self, spec: VariantSpec) -> None:
        """A variant measured on a real machine is of that machine's arch."""
        if self.machine is not None:
            spec.arch = self.machine.profile.name

    def target(self, p: Prepared, build: Build | None, options: RunOptions) -> Target:
        if self.machine is not None:
            if build is not None:
                raise LabError(f"variant {p.spec.name}: booting a built kernel on {self.options.target} "
                               "is not supported yet; measure `running` there, or the variant under QEMU")
            return self.machine
        if build is None:
            raise LabError(f"variant {p.spec.name} is the kernel a machine runs: measure it with "
                           "--target local or --target ssh://HOST")
        accel = self._accels.get(p.profile.name)
        if accel is None:
            choice = choose(self.options.accel, p.profile, options.mode, build.image)
            if choice.why:
                self.log(choice.why)
            accel = self._accels[p.profile.name] = choice.accel
        return QemuTarget(p.profile, options.scratch_mib, accel)
