"""Where a command's variants run (`--target`, `--accel`): QEMU, this machine, or a
machine over ssh; and what that changes for the experiment (its arch, its timing mode).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from .. import arches, modes, targets
from ..build import Build
from ..config.modules import module_options
from ..errors import LabError
from ..guest import workloads as guest_workloads
from ..targets import Site, Target, TargetOptions, Want, registry
from ..targets.accel import ACCELS
from ..targets.kexec import KexecTarget
from ..targets.machine import running_config_file
from ..targets.qemu import check_disk_room, net_device
from ..targets.registry import Ask, check
from ..targets.running import RunningTarget
from ..workloads import Instance
from . import lab
from .lab import RUNNING, Prepared, RunOptions, is_running
from .spec import VariantSpec

__all__ = ["Placement", "TargetOptions", "running_config_path"]


def running_config_path(options: TargetOptions) -> Path:
    """The config of the kernel --target runs (a target with no machine of its own, such
    as qemu: this machine's) as a file."""
    machine = targets.open(options.target, options).machine or targets.open("local").machine
    assert machine is not None
    return running_config_file(machine.shell)


class Placement:
    """The target of every run of one command (targets.open), and what it changes for the
    experiment (its arch, its timing mode); every refusal is the registry's (check)."""

    def __init__(self, options: TargetOptions, log: Callable[[str], None]):
        self.options, self.log = options, log
        self._checked: set[str] = set()
        if options.accel not in ACCELS:
            raise LabError(f"unknown --accel {options.accel!r}: use one of {', '.join(ACCELS)}")
        self.site: Site = targets.open(options.target, options)
        self.require(Ask(live=True))
        self.machine: RunningTarget | None = self.site.machine
        self.kexec: KexecTarget | None = getattr(self.site, "kexec", None) if self.site.capabilities.kexec else None

    def require(self, ask: Ask) -> None:
        """Refuse, in one line, what this target cannot do (targets.registry.refusal)."""
        check(self.site.spec, self.site.capabilities, ask)

    def default_mode(self) -> str:
        """A target without deterministic time keeps time with its own clock: wall mode."""
        return modes.DEFAULT if modes.DEFAULT in self.site.capabilities.modes else "wall"

    def check_mode(self, mode: str) -> None:
        self.require(Ask(mode=mode))

    def adapt(self, spec: VariantSpec) -> None:
        """A variant measured on a real machine is of that machine's arch; it asks only for
        what the target can give."""
        if self.kexec is not None and not is_running(spec):
            self._check_kexec_base(spec)   # before anything reaches the machine
        if self.machine is not None:
            spec.arch = self.machine.profile.name
        self.require(Ask(variant=spec.name, vcpus=spec.vcpus, fs=spec.fs or None, devices=spec.devices,
                         running=is_running(spec)))

    def target(self, p: Prepared, build: Build | None, options: RunOptions) -> Target:
        return self._place(p, build, options, base_checked=False)

    def _place(self, p: Prepared, build: Build | None, options: RunOptions, base_checked: bool) -> Target:
        self.require(Ask(variant=p.spec.name, built=build is not None, running=build is None))
        if self.kexec is not None and build is not None and p.spec.name not in self._checked:
            if not base_checked:
                self._check_kexec_base(p.spec)
            self.kexec.check_variant(p.spec.name, p.config.values, module_options(p.source.tree))
            self._checked.add(p.spec.name)
        return self.site.target(Want(p.profile, options.mode, build.image if build is not None else None,
                                     vcpus=p.spec.vcpus, devices=p.spec.devices, fs=p.spec.file_system,
                                     disk_mib=options.disk_mib, host_ports=options.host_ports),
                                self.log)

    def for_probes(self, command: str, mode: str,
                   base: VariantSpec) -> Callable[[Prepared, Build | None, RunOptions], Target]:
        """Where the probes of `command` (sweep, bisect, noise-floor, profile, audit --measure:
        built kernels) boot; refused in one line, before anything is built, on a target that
        cannot."""
        self.require(Ask(probes=command, mode=mode, variant=base.name, vcpus=base.vcpus, fs=base.fs or None,
                         devices=base.devices))
        if self.kexec is not None:
            # A probe names its resolved base by file: what makes it safe to kexec is that base
            # being the remote's own config, checked here once, and each probe's drivers.
            self._check_kexec_base(base)
        return lambda p, build, options: self._place(p, build, options, base_checked=True)

    def prepare(self, spec: VariantSpec) -> Prepared:
        """The variant as it builds for this target: `running` is the target machine's kernel."""
        return lab.prepare(spec, self.machine)

    def _check_kexec_base(self, spec: VariantSpec) -> None:
        """A kernel kexec'd on a remote must bring back its network and root file system:
        it starts from the remote's own config (the drivers it keeps are checked per kernel)."""
        assert self.kexec is not None
        if spec.base != RUNNING:
            raise LabError(f"variant {spec.name}: booting on {self.kexec.machine.shell.where} needs a variant based "
                           f"on `running` (its own config, e.g. {spec.name}=running+CHANGES): a kernel without "
                           "its network and root file system drivers never answers again")


def check_workloads(placement: Placement | None, instances: Sequence[Instance], mode: str,
                    arch_names: Sequence[str] = ()) -> None:
    """Refuse, in one line before anything is built, a workload that needs what the
    command's target (QEMU TCG when it names none) cannot give in `mode`: files on a guest's
    disk (wall mode: targets.qemu.check_disk_room) the host has no room for, too, and a link
    from the host where a guest of one of `arch_names` has no NIC (targets.qemu.net_device)
    or the host no program for its side (guest.workloads.check_host_programs), and, where
    kernellab makes the guest's initramfs, a workload whose programs a guest of one of
    `arch_names` cannot get (lab.check_guest_programs). A machine's room is asked at each
    run (lab.run): a workload it cannot hold is not available then."""
    site = placement.site if placement is not None else lab.default_site()
    registry.check_workloads(site.spec, site.capabilities, instances, mode)
    if site.capabilities.agent == "init":
        for profile in (arches.load(a) for a in dict.fromkeys(arch_names)):
            if not profile.build_only:
                lab.check_guest_programs(tuple(instances), profile)
    if site.capabilities.disks and not modes.get(mode).deterministic:
        check_disk_room(instances)
    linked = next((i for i in instances if i.workload.client_on_host), None)
    if linked is not None and site.capabilities.disks:   # a QEMU machine: the arch's NIC
        for arch in dict.fromkeys(arch_names):
            net_device(arches.load(arch), linked.label)
    guest_workloads.check_host_programs(instances)
