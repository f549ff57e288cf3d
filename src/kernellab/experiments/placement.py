"""Where a command's variants run (`--target`, `--accel`): QEMU, this machine, or a
machine over ssh; and what that changes for the experiment (its arch, its timing mode).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import modes
from ..build import Build
from ..config.modules import module_options
from ..errors import LabError
from ..targets import Target
from ..targets.accel import ACCELS, choose
from ..targets.kexec import COME_BACK_S, KexecTarget
from ..targets.machine import running_config_file
from ..targets.qemu import QemuTarget
from ..targets.running import RunningTarget
from ..targets.shell import LocalShell, SshShell, parse_ssh_url
from .lab import RUNNING, Prepared, RunOptions
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
    come_back_s: float = COME_BACK_S     # how long a kexec'd (or rebooted) ssh target may take


def real_machine(options: TargetOptions) -> RunningTarget:
    """The machine of --target local or ssh://..."""
    if options.target == "local":
        return RunningTarget(LocalShell(), "local", options.arch, options.block_dir)
    if options.target.startswith("ssh://"):
        shell = SshShell(parse_ssh_url(options.target), options.ssh_config, options.accept_new_host_key)
        return RunningTarget(shell, "ssh", options.arch, options.block_dir)
    raise LabError(f"unknown --target {options.target!r}: use qemu, local or ssh://[user@]host[:port]")


def running_config_path(options: TargetOptions) -> Path:
    """The config of the kernel --target runs (qemu: this machine's) as a file."""
    local = dataclasses.replace(options, target="local")
    return running_config_file(real_machine(options if options.target != "qemu" else local).shell)


class Placement:
    """The target of every run of one command."""

    def __init__(self, options: TargetOptions, log: Callable[[str], None]):
        self.options, self.log = options, log
        self._accels: dict[str, str] = {}
        self._checked: set[str] = set()
        self.machine: RunningTarget | None = None
        self.kexec: KexecTarget | None = None
        if options.accel not in ACCELS:
            raise LabError(f"unknown --accel {options.accel!r}: use one of {', '.join(ACCELS)}")
        if options.target != "qemu":
            self.machine = real_machine(options)
        if self.machine is not None and self.machine.name == "ssh":
            self.kexec = KexecTarget(self.machine, options.power_cycle, options.come_back_s)
        if self.machine is None and options.block_dir:
            raise LabError("--block-dir is for --target local or ssh (QEMU guests get a scratch disk of their own)")
        if self.kexec is None and options.power_cycle:
            raise LabError("--power-cycle is for ssh targets, which kernellab boots with kexec")
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
            if spec.vcpus is not None:
                raise LabError(f"variant {spec.name}: vcpus:{spec.vcpus} is a QEMU machine's setting; a real machine "
                               "runs with the CPUs it has (use the kernel's maxcpus=N, boot:maxcpus=N, on a kexec'd "
                               "variant)")
            if spec.fs:
                raise LabError(f"variant {spec.name}: fs:{spec.fs} is a disk image QEMU attaches; a real machine "
                               "has the disks it has (leave fs: out)")
            if spec.devices:
                raise LabError(f"variant {spec.name}: devices:{spec.devices} adds devices to a QEMU machine; a real "
                               "machine has the devices it has (leave devices: out)")

    def target(self, p: Prepared, build: Build | None, options: RunOptions) -> Target:
        if self.kexec is not None:
            if build is not None and p.spec.name not in self._checked:
                self._check_kexec_variant(p, self.kexec)
                self._checked.add(p.spec.name)
            return self.kexec
        if self.machine is not None:
            if build is not None:
                raise LabError(f"variant {p.spec.name}: the local target measures the kernel this machine runs; "
                               "boot built variants under QEMU, or on an ssh target (kexec)")
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
        return QemuTarget(p.profile, options.scratch_mib, accel, vcpus=p.spec.vcpus, devices=p.spec.devices,
                          fs=p.spec.file_system)

    @staticmethod
    def _check_kexec_variant(p: Prepared, kexec: KexecTarget) -> None:
        """A kernel kexec'd on a remote must bring back its network and root file system:
        based on the remote's own config, and keeping the drivers ssh depends on."""
        if p.spec.base != RUNNING:
            raise LabError(f"variant {p.spec.name}: booting on {kexec.machine.shell.where} needs a variant based "
                           f"on `running` (its own config, e.g. {p.spec.name}=running+CHANGES): a kernel without "
                           "its network and root file system drivers never answers again")
        kexec.check_variant(p.spec.name, p.config.values, module_options(p.source.tree))
