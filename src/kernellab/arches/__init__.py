"""Architecture profiles: data files that say how to build and boot each arch.

One TOML file per profile in this package. A profile without a [qemu] table is
build-only: QEMU has no machine for it, so kernellab builds it and reports build cost
and sizes, and refuses to boot it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from .. import datafile
from ..errors import LabError, did_you_mean

# Said by every report of a build-only variant, and by the refusal to boot one.
BUILD_ONLY_NOTE = "build only: no QEMU machine for this arch"


@dataclass(frozen=True)
class QemuProfile:
    binary: str
    args: tuple[str, ...]
    console: str
    # The agent's scratch disk (wall mode); empty where the machine has no virtio.
    disk_args: tuple[str, ...] = ()
    # The machine's deterministic-timing arguments; None: targets.qemu's default.
    icount_args: tuple[str, ...] | None = None
    # Kernel arguments this machine needs besides console= (e.g. an early console).
    kernel_args: str = ""
    # The cheap device a variant's devices:N adds N of (-device KIND each); empty: the
    # machine has no room for hundreds of devices, and devices:N is refused.
    extra_device: str = ""
    # The NIC a workload that talks to the host comes in through (-device KIND,netdev=...,
    # with QEMU's user networking; wall mode); empty: the machine gives no host link.
    net_device: str = ""
    # The most vCPUs this machine brings up under icount (None: no known limit): beyond it
    # the guest hangs, so kernellab refuses the run instead of waiting for the timeout.
    icount_max_vcpus: int | None = None


@dataclass(frozen=True)
class ArchProfile:
    name: str
    kernel_arch: str
    cross_compile: str
    build_target: str
    boot_image: str
    lab_minimal_fragment: str
    debian_config: str
    qemu: QemuProfile | None = None
    # The make target lab-minimal starts from: tinyconfig, or a board's defconfig where
    # the board's platform code is what makes the kernel boot at all.
    lab_minimal_base: str = "tinyconfig"
    # Which agent build (agent/cross.toml) runs in the guest; empty: the profile's name.
    agent: str = ""
    # Kernel arguments that shorten a boot without touching what a probe measures; used
    # only by sweep and bisect probes whose metrics are not timer or boot metrics.
    fast_boot_args: str = ""
    # What `uname -m` says on a machine this profile's kernels and agent run on: how a
    # real machine (--target local or ssh) finds its profile. Several 32-bit PowerPC
    # profiles say "ppc"; such a machine needs --arch.
    uname: tuple[str, ...] = ()
    # Whether kernellab builds this arch with Clang too (`make LLVM=1`): only where the
    # kernel's Documentation/kbuild/llvm.rst lists the arch with LLVM=1, not CC=clang only.
    llvm: bool = False

    @property
    def cc(self) -> str:
        return f"{self.cross_compile}gcc"

    @property
    def build_only(self) -> bool:
        return self.qemu is None

    @property
    def agent_arch(self) -> str:
        return self.agent or self.name

    def require_machine(self) -> QemuProfile:
        """The QEMU profile, or a one-line refusal for a build-only arch."""
        if self.qemu is None:
            raise LabError(f"cannot boot {self.name}: {BUILD_ONLY_NOTE} "
                           "(kernellab builds it and reports build cost and sizes only)")
        return self.qemu


def _shipped() -> dict[str, Traversable]:
    """The profiles this package ships, by name: the only arches there are. An arch is a
    name, never a path: `--arch some/dir/x` or `arch = "../studies/y"` in a shared
    experiment must not load a TOML file of someone's choosing (it names the QEMU binary
    kernellab runs), so a name is looked up here, never joined to a directory."""
    return {p.name.removesuffix(".toml"): p
            for p in resources.files(__package__).iterdir() if p.name.endswith(".toml")}


def available() -> list[str]:
    return sorted(_shipped())


def load(name: str) -> ArchProfile:
    path = _shipped().get(name)
    if path is None:
        known = f"use one of {', '.join(available())}"
        hint = did_you_mean(name, available())
        raise LabError(f"unknown arch {name!r}: {f'{hint} ({known})' if hint else known}")
    origin = f"arch profile {name}.toml"
    profile = datafile.load(ArchProfile, datafile.read_toml(path, origin), origin)
    if profile.name != name:   # the name goes into cache paths: it is the file's, checked
        raise LabError(f"{origin}: name {profile.name!r} is not the file's name {name!r}")
    return profile
