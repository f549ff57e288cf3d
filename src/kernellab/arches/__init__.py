"""Architecture profiles: data files that say how to build and boot each arch."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources

from ..errors import LabError


@dataclass(frozen=True)
class QemuProfile:
    binary: str
    package: str
    args: tuple[str, ...]
    console: str
    disk_args: tuple[str, ...]


@dataclass(frozen=True)
class ArchProfile:
    name: str
    kernel_arch: str
    cross_compile: str
    build_target: str
    boot_image: str
    lab_minimal_fragment: str
    debian_config: str
    compiler_package: str
    qemu: QemuProfile

    @property
    def cc(self) -> str:
        return f"{self.cross_compile}gcc"


def available() -> list[str]:
    return sorted(p.name.removesuffix(".toml")
                  for p in resources.files(__package__).iterdir() if p.name.endswith(".toml"))


def load(name: str) -> ArchProfile:
    path = resources.files(__package__) / f"{name}.toml"
    if not path.is_file():
        raise LabError(f"unknown arch {name!r}: use one of {', '.join(available())}")
    data = tomllib.loads(path.read_text())
    qemu = data.pop("qemu")
    return ArchProfile(**data, qemu=QemuProfile(qemu["binary"], qemu["package"], tuple(qemu["args"]),
                                                qemu["console"], tuple(qemu.get("disk_args", ()))))
