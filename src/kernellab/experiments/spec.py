"""Variant and experiment specifications: the command-line short syntax and TOML files.

Short syntax:  NAME=BASE+FRAGMENT+CONFIG_X=y+boot:ARG+sysctl:KEY=VALUE+cc:TOOLCHAIN...   (NAME= may be left out)
  BASE      defconfig | tinyconfig | allnoconfig | debian | lab-minimal | path of a .config
  FRAGMENT  path of a fragment file, or a fragment kernellab ships (e.g. debug-kernel)
  CONFIG_X=VALUE inline; CONFIG_X=n unsets it
  boot:ARG  a kernel command-line parameter (boot:mitigations=off, boot:preempt=full)
  sysctl:KEY=VALUE  a sysctl set before anything is measured (sysctl:vm.swappiness=10)
  cc:TOOLCHAIN  gcc (the default) or clang (make LLVM=1): part of the config Kconfig
            resolves and of the build key, so a clang variant never shares a gcc build
  vcpus:N   boot with N virtual CPUs (default: the arch profile's machine, one); part of
            the runs' key, not of the build
  devices:N boot with N extra devices of the arch profile's cheap kind ([qemu] extra_device,
            virtio-rng-ccw on s390x): part of the runs' key, not of the build
  fs:NAME   the scratch disk's file system, made on the host: ext4-4k, ext4-64k (ext4 with
            that block size, holding a 1 GiB file for the file.* metrics); wall mode only;
            part of the runs' key, not of the build
The boot parameters and sysctls are part of the variant's identity and of its runs' key:
two variants with one config and different parameters share a build, never a run.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from .. import datafile, modes
from .. import toolchain as toolchains
from ..config.dotconfig import Setting, parse_line, parse_settings
from ..errors import LabError
from ..targets import fsimage

DEFAULT_SOURCE = "debian:6.1"
DEFAULT_ARCH = "x86_64"
MAX_VCPUS = 64
MAX_DEVICES = 4096   # devices:N, extra devices on the QEMU command line


@dataclass
class VariantSpec:
    name: str
    base: str
    fragments: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)   # inline CONFIG_X=v
    source: str = DEFAULT_SOURCE
    arch: str = DEFAULT_ARCH
    boot_args: list[str] = field(default_factory=list)   # kernel command-line parameters
    sysctls: dict[str, str] = field(default_factory=dict)
    toolchain: str = toolchains.DEFAULT   # "gcc" or "clang"
    vcpus: int | None = None              # None: the arch profile's machine (-smp 1)
    devices: int | None = None            # extra devices of the profile's extra_device; None: 0
    fs: str | None = None                 # the scratch disk's file system (ext4-4k); None: a raw disk
    # fs parsed, once, here: what the run's command line and the target are given
    file_system: fsimage.FsSpec | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.vcpus is not None and not 1 <= self.vcpus <= MAX_VCPUS:
            raise LabError(f"variant {self.name!r}: vcpus must be 1 to {MAX_VCPUS}, got {self.vcpus}")
        if self.devices is not None and not 0 <= self.devices <= MAX_DEVICES:
            raise LabError(f"variant {self.name!r}: devices must be 0 to {MAX_DEVICES}, got {self.devices}")
        if self.fs is not None:
            try:
                self.file_system = fsimage.parse(self.fs)
            except LabError as exc:
                raise LabError(f"variant {self.name!r}: {exc}") from None
        if self.toolchain not in toolchains.TOOLCHAINS:
            raise LabError(f"variant {self.name!r}: unknown toolchain {self.toolchain!r}: use one of "
                           f"{', '.join(toolchains.TOOLCHAINS)}")
        for arg in self.boot_args:
            if not arg or any(c.isspace() for c in arg) or arg.startswith("KL_"):
                raise LabError(f"variant {self.name!r}: bad boot parameter {arg!r}: one word such as "
                               "mitigations=off (KL_* words are the agent's own)")
        for key, value in self.sysctls.items():
            if not _SYSCTL_KEY.fullmatch(key) or not value or any(c.isspace() for c in value):
                raise LabError(f"variant {self.name!r}: bad sysctl {key}={value!r}: give KEY=VALUE such as "
                               "vm.swappiness=10 (values with spaces are not supported)")

    def boot_words(self) -> list[str]:
        """The kernel command-line words this variant adds: its parameters, then its sysctls
        in the kernel's own `sysctl.KEY=VALUE` form (Linux >= 5.8), which the kernel sets
        before init starts and reports when one does not take."""
        return [*self.boot_args, *(f"sysctl.{k}={v}" for k, v in self.sysctls.items())]

    def settings(self) -> list[Setting]:
        """Fragment files in order, then inline options: later settings win."""
        out: list[Setting] = []
        for fragment in self.fragments:
            path, text = _fragment_text(fragment)
            out += parse_settings(text, path)
        for i, option in enumerate(self.options, start=1):
            setting = parse_line(option, f"variant {self.name!r} option {i}")
            if setting is None:
                raise LabError(f"variant {self.name!r}: empty option {option!r}")
            out.append(setting)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The variant's axes as given (its identity in the store): `fs` is left out when
        unset, as it was before the axis existed, so that older variants keep their identity."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.init and not (f.name == "fs" and self.fs is None)}


_SYSCTL_KEY = re.compile(r"[a-z0-9_][a-z0-9_.\-]*")


@dataclass
class Experiment:
    name: str
    variants: list[VariantSpec]
    mode: str | None = None        # None: the target's default (icount on QEMU TCG, else wall)
    runs: int | None = None        # None: the mode's default
    description: str = ""
    # Opt-in groups of metrics the agent runs too (the catalog's opt_in: "net").
    with_groups: list[str] = field(default_factory=list)
    # Build every variant from scratch without ccache, so its build times can be compared.
    cold_builds: bool = False
    # Real programs every run of every variant measures too, as `--workload SPEC` names
    # them (a shipped workload with its parameters, or a file): resolved by the command
    # (compare.resolve_workloads), which registers their WORKLOAD.METRIC names.
    workloads: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _ExperimentFile:
    variant: list[dict[str, Any]]   # each a VariantSpec's axes, loaded strictly as one
    name: str | None = None
    description: str = ""
    source: str = DEFAULT_SOURCE
    arch: str = DEFAULT_ARCH
    toolchain: str = toolchains.DEFAULT
    mode: str | None = None
    runs: int | None = None
    with_: list[str] = field(default_factory=list)
    cold_builds: bool = False
    workloads: list[str] = field(default_factory=list)


def check_groups(groups: list[str], where: str) -> list[str]:
    """Opt-in metric groups the catalog knows, or a one-line error listing them."""
    from ..metrics.catalog import opt_in_groups
    known = opt_in_groups()
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise LabError(f"{where}: unknown metric group {unknown[0]!r} to run too (groups: {', '.join(sorted(known))})")
    return groups


def _fragment_text(fragment: str) -> tuple[str, str]:
    path = Path(fragment).expanduser()
    if datafile.is_file(path, "fragment"):
        return str(path), datafile.read_text(path, "fragment")
    # A packaged fragment is looked up by name, never joined to the package's directory:
    # `../studies/debug-cost` must not read another file of the package as a fragment.
    packaged = _packaged_fragments().get(fragment)
    if packaged is not None:
        return f"kernellab:{fragment}", packaged.read_text()
    raise LabError(f"fragment {fragment!r} not found: give a file path or one of "
                   f"{', '.join(packaged_fragments())}")


def _packaged_fragments() -> dict[str, Traversable]:
    folder = resources.files("kernellab.config") / "fragments"
    return {p.name.removesuffix(".config"): p for p in folder.iterdir() if p.name.endswith(".config")}


def packaged_fragments() -> list[str]:
    """The fragments a user names (the lab-minimal-* ones belong to the arch profiles)."""
    return sorted(name for name in _packaged_fragments() if not name.startswith("lab-minimal-"))


def _count(part: str, prefix: str, text: str, example: str) -> int:
    """The N of `vcpus:N` or `devices:N`: ASCII digits only (str.isdigit takes `²`, which
    int() refuses), and few enough of them that the range check sees a number."""
    count = part.removeprefix(prefix)
    if not _COUNT.fullmatch(count):
        raise LabError(f"bad variant {text!r}: {part!r} needs a number of {example}")
    return int(count)


_COUNT = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class _Word:
    """A `+`-separated word of the short syntax that sets one axis of the variant."""
    prefix: str
    axis: str        # the VariantSpec field it sets
    kind: str        # "list" (appended), "setting" (KEY=VALUE), "text", "count"
    example: str     # what a bad one should look like, for the error


_WORDS = (
    _Word("CONFIG_", "options", "list", ""),   # kept whole: CONFIG_X=y is the option
    _Word("boot:", "boot_args", "list", ""),
    _Word("sysctl:", "sysctls", "setting", "KEY=VALUE (sysctl:vm.swappiness=10)"),
    _Word("cc:", "toolchain", "text", ""),
    _Word("vcpus:", "vcpus", "count", "virtual CPUs (vcpus:2)"),
    _Word("devices:", "devices", "count", "extra devices (devices:100)"),
    _Word("fs:", "fs", "text", ""),
)


def parse_short(text: str, source: str = DEFAULT_SOURCE, arch: str = DEFAULT_ARCH) -> VariantSpec:
    head, sep, rest = text.partition("=")
    if sep and "+" not in head and ":" not in head and not head.startswith("CONFIG_") and rest:
        name, body = head, rest
    else:
        name, body = text, text
    parts = body.split("+")
    if not parts[0] or any(not p for p in parts):
        raise LabError(f"bad variant {text!r}: expected NAME=BASE+FRAGMENT+CONFIG_X=y+boot:ARG+sysctl:KEY=VALUE"
                       "+cc:clang")
    axes: dict[str, Any] = {"fragments": [], "options": [], "boot_args": [], "sysctls": {}}
    for part in parts[1:]:
        word = next((w for w in _WORDS if part.startswith(w.prefix)), None)
        if word is None:
            axes["fragments"].append(part)
            continue
        value = part if word.prefix == "CONFIG_" else part.removeprefix(word.prefix)
        if word.kind == "list":
            axes[word.axis].append(value)
        elif word.kind == "setting":
            key, eq, setting = value.partition("=")
            if not eq:
                raise LabError(f"bad variant {text!r}: {part!r} needs {word.example}")
            axes[word.axis][key] = setting
        elif word.kind == "count":
            axes[word.axis] = _count(part, word.prefix, text, word.example)
        else:
            axes[word.axis] = value
    return VariantSpec(name, parts[0], source=source, arch=arch, **axes)


def load_experiment(path: Path | None) -> Experiment:
    """A TOML experiment file; None loads the built-in default experiment."""
    if path is None:
        file, origin = resources.files(__package__) / "default.toml", "default.toml"
        data = datafile.read_toml(file, origin)
    else:
        origin = str(path)
        data = datafile.read_toml(Path(path), origin)
    return experiment_from_data(data, origin)


def experiment_from_data(data: Any, origin: str) -> Experiment:
    """An experiment's TOML table (a file, or a study's [experiment]) as an Experiment."""
    exp = datafile.load(_ExperimentFile, data, f"experiment {origin}")
    if not exp.variant:
        raise LabError(f"experiment {origin}: no [[variant]] tables")
    if exp.mode is not None and exp.mode not in modes.NAMES:
        raise LabError(f"experiment {origin}: unknown mode {exp.mode!r} (modes: {', '.join(modes.NAMES)})")
    if exp.runs is not None and not 1 <= exp.runs <= modes.MAX_RUNS:
        raise LabError(f"experiment {origin}: runs must be 1 to {modes.MAX_RUNS}, got {exp.runs}")
    inherited = {"source": exp.source, "arch": exp.arch, "toolchain": exp.toolchain}
    variants = [datafile.load(VariantSpec, {**inherited, **table}, f"experiment {origin}: variant #{i}")
                for i, table in enumerate(exp.variant, start=1)]
    return Experiment(exp.name or Path(origin).stem, variants, exp.mode, exp.runs, exp.description,
                      check_groups(exp.with_, f"experiment {origin}: with"), exp.cold_builds, list(exp.workloads))
