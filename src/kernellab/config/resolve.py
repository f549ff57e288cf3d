"""Turn base + fragments into the .config the kernel itself accepts.

`make olddefconfig` is the authority: kernellab only merges the requested settings
onto the base, lets kconfig resolve them, and reports every request that did not
survive ("asked CONFIG_FOO=y, got n").
"""

from __future__ import annotations

import functools
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .. import datafile, paths
from ..arches import ArchProfile
from ..errors import LabError, did_you_mean
from ..locks import locked
from ..sources import Source
from ..toolchain import LLVM_TOOLS, Toolchain, file_identity, make_vars
from .dotconfig import Setting, effective, format_config, parse_config, parse_settings

MAKE_BASES = ("defconfig", "tinyconfig", "allnoconfig")
# debian-reduced: lab-minimal with Debian's kernel-wide choices (debugging, hardening,
# mitigations; kernellab.config.reduce) and none of its drivers: what Debian's choices
# cost, measured at the price of lab kernel builds.
REDUCED = "debian-reduced"
BASES = MAKE_BASES + ("debian", "lab-minimal", REDUCED)


@dataclass
class ResolvedConfig:
    base: str
    text: str
    requested: list[Setting]
    dropped: list[dict[str, str]] = field(default_factory=list)

    @property
    def values(self) -> dict[str, str]:
        return parse_config(self.text, "resolved .config")

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def packaged_fragment(name: str) -> list[Setting]:
    # Looked up by name among the package's fragments, never joined to their directory.
    path = {p.name: p for p in (resources.files(__package__) / "fragments").iterdir()}.get(name)
    if path is None or not path.is_file():
        raise LabError(f"kernellab has no packaged fragment {name!r}")
    return parse_settings(path.read_text(), f"kernellab:{name}")


def resolve(source: Source, profile: ArchProfile, toolchain: Toolchain,
            base: str, settings: list[Setting]) -> ResolvedConfig:
    workdir = paths.cache_dir("resolve", _tree_name(source, profile, toolchain))
    # Made of two resolutions of its own, before this one takes the lock.
    reduced = _debian_reduced(source, profile, toolchain) if base == REDUCED else None
    with locked(workdir):
        base_text, base_requests = reduced or _base(source, profile, toolchain, base, workdir)
        _check_known(source, settings)
        requested = _last_per_name(base_requests + settings)
        merged = parse_config(base_text, f"base {base}")
        for s in requested:
            # Re-append rather than update in place: for a choice (SLOB/SLUB, the kernel
            # compression), kconfig lets the last `=y` of the group win.
            merged.pop(s.name, None)
            merged[s.name] = s.value
        text = _olddefconfig(source, profile, toolchain, workdir, format_config(merged))
    resolved = ResolvedConfig(base, text, requested)
    values = resolved.values
    for s in requested:
        got = effective(values, s.name, s.value)
        if got != s.value:
            resolved.dropped.append({"option": s.name, "asked": s.value,
                                     "got": got if got is not None else "(unset)",
                                     "origin": s.origin})
    return resolved


# -- olddefconfig, once per input ----------------------------------------------------------

# What `make olddefconfig` made of each input this process saw, by its cache entry (the
# cache directory and the key): a process that moves to another cache directory starts afresh.
_RESOLVED: dict[Path, str] = {}

# Environment variables kbuild and kconfig read by name, and kernellab's own (the fake
# kernel tree of the tests runs kconfiglib with KERNELLAB_FAKE_PYTHON).
_ENVIRONMENT = ("KBUILD_", "KCONFIG_", "KERNELLAB_")
# What Kconfig's $(shell,...) probes run besides the compiler (LD_VERSION, AS_VERSION,
# PAHOLE_VERSION, RUSTC_VERSION...): an upgraded binutils changes the config too.
_PROBED = ("ld", "as", "ar", "nm", "objcopy")
_TOOLS = ("pahole", "rustc", "bindgen", "make")


def _olddefconfig(source: Source, profile: ArchProfile, toolchain: Toolchain, workdir: Path, config: str) -> str:
    """What `make olddefconfig` makes of `config`, made once per key (`_key`) and kept in
    this process and in the cache: it costs a second or two on Linux, and commands resolve
    the same variants again and again (every prepare, every probe, under other names)."""
    entry = workdir / paths.component("resolved config key",
                                      f"olddefconfig-{_key(source, profile, toolchain, config)}.json")
    text = _RESOLVED.get(entry) or _read_entry(entry)
    if text is None:
        (workdir / ".config").write_text(config)
        _make(source, profile, toolchain, workdir, "olddefconfig")
        text = (workdir / ".config").read_text()
        _write_entry(entry, text)
    _RESOLVED[entry] = text
    return text


def _key(source: Source, profile: ArchProfile, toolchain: Toolchain, config: str) -> str:
    """A hash of everything olddefconfig's output depends on: the input .config, the
    tree's content, the make variables, the compiler's version and every probed tool's
    file, the environment make reads and kernellab's code that resolves."""
    parts = {
        "code": _code_identity(),
        "source": [source.version, source.content_hash, str(source.tree)],
        "arch": profile.name,
        "make": make_vars(profile, toolchain),
        "toolchain": [toolchain.cc, toolchain.cross_compile, toolchain.version_text, toolchain.kind],
        "tools": _tool_identities(toolchain),
        "environment": sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENVIRONMENT)),
        "config": config,
    }
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


@functools.cache
def _code_identity() -> str:
    """kernellab's own resolution code: a checkout that changes it resolves again."""
    here = Path(__file__).parent
    return hashlib.sha256(b"".join((here / name).read_bytes() for name in
                                   ("resolve.py", "dotconfig.py"))).hexdigest()


def _tool_identities(toolchain: Toolchain) -> list[list[str]]:
    names = [toolchain.cc, *(toolchain.cross_compile + t for t in _PROBED), *_TOOLS,
             *(LLVM_TOOLS if toolchain.llvm else ())]
    return [[name, file_identity(shutil.which(name))] for name in names]


def _read_entry(entry: Path) -> str | None:
    """The cached output, or None: a missing, damaged or foreign file is resolved over."""
    try:
        data = json.loads(entry.read_text())
    except (OSError, ValueError):
        return None
    text = data.get("text") if isinstance(data, dict) else None
    return text if isinstance(text, str) else None


def _write_entry(entry: Path, text: str) -> None:
    # Written whole under another name, then renamed: a reader never sees half an entry.
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"text": text}))
    tmp.replace(entry)


def base_file_warnings(source: Source, profile: ArchProfile, toolchain: Toolchain | None, base: str) -> list[str]:
    """What a user's own .config given as a base holds that this tree cannot (unknown
    options, values of the wrong type, unmet dependencies): olddefconfig changes those, so
    the resolved config is not the file. `resolve` and `compare` both say it from here."""
    path = Path(base).expanduser()
    if toolchain is None or base in BASES or not path.is_file():
        return []
    from .kconfig import open_tree  # kconfig resolves defconfigs with this module
    return open_tree(source, profile, toolchain).load(path)


def _tree_name(source: Source, profile: ArchProfile, toolchain: Toolchain) -> str:
    """The name of a source, arch and compiler's directory in the cache: each name checked."""
    return "-".join([paths.component("source id", source.id), paths.component("arch name", profile.name),
                     paths.component("toolchain id", toolchain.id)])


def _base(source: Source, profile: ArchProfile, toolchain: Toolchain, base: str,
          workdir: Path) -> tuple[str, list[Setting]]:
    """The base config text, and any settings that come with the base and must be checked."""
    if base in MAKE_BASES:
        return _make_base(source, profile, toolchain, base, workdir), []
    if base == "lab-minimal":
        # Each profile names its starting point: tinyconfig, or the board's defconfig
        # where only the board's platform code makes the kernel boot on its machine.
        text = _make_base(source, profile, toolchain, profile.lab_minimal_base, workdir)
        return text, packaged_fragment(profile.lab_minimal_fragment)
    if base == "debian":
        return _debian_config(source, profile), []
    path = Path(base).expanduser()
    if datafile.is_file(path, "base config"):
        text = datafile.read_text(path, "base config")
        parse_config(text, str(path))  # a malformed base is reported with its file:line
        return text, []
    hint = did_you_mean(base, BASES)
    if hint:
        raise LabError(f"unknown config base {base!r}: {hint} (a base is one of {', '.join(BASES)}, or a .config path)")
    raise LabError(f"unknown config base {base!r}: no such file, and not one of {', '.join(BASES)}")


def _debian_reduced(source: Source, profile: ArchProfile, toolchain: Toolchain) -> tuple[str, list[Setting]]:
    """lab-minimal, and Debian's values of the reduction's options as requests: those the
    lean kernel cannot hold come back as dropped, like any variant's."""
    from .kconfig import open_tree  # kconfig resolves defconfigs with this module
    from .reduce import reduce
    lean = resolve(source, profile, toolchain, "lab-minimal", [])
    debian = resolve(source, profile, toolchain, "debian", [])
    values = reduce(open_tree(source, profile, toolchain), lean.values, debian.values)
    origin = f"Debian's {profile.name} config, reduced onto lab-minimal"
    return lean.text, [Setting(name, value, origin) for name, value in values.items()]


def _make_base(source: Source, profile: ArchProfile, toolchain: Toolchain, target: str, workdir: Path) -> str:
    # Board defconfigs live in subdirectories (44x/bamboo_defconfig): flatten the name.
    cached = workdir / paths.component("config base", f"base-{target.replace('/', '_')}.config")
    if not cached.exists():
        _make(source, profile, toolchain, workdir, target)
        cached.write_text((workdir / ".config").read_text())
    return cached.read_text()


def _debian_config(source: Source, profile: ArchProfile) -> str:
    series = ".".join(source.version.split(".")[:2])
    if not profile.debian_config:
        raise LabError(f"Debian ships no Linux {series} config for {profile.name}: use another base "
                       f"(lab-minimal, defconfig or the path of a .config)")
    path = Path(f"/usr/src/linux-config-{series}/{profile.debian_config}")
    if not path.exists():
        raise LabError(f"Debian's {profile.name} config for {series} not found at {path}: "
                       f"run `{_debian_config_install(series, profile.debian_config)}`")
    return lzma.decompress(path.read_bytes()).decode()


def _debian_config_install(series: str, filename: str) -> str:
    """The command that installs a Debian config. linux-config-<series> holds the configs
    of one Debian architecture, named config.<debian-arch>_<featureset>_<flavour>.xz, and is
    Multi-Arch: same, so another architecture's package installs beside the host's."""
    package = f"linux-config-{series}"
    debian_arch = filename.removeprefix("config.").split("_", 1)[0]
    if debian_arch == _host_debian_arch():
        return f"apt-get install -y {package}"
    return (f"dpkg --add-architecture {debian_arch} && apt-get update && "
            f"apt-get install -y {package}:{debian_arch}")


def _host_debian_arch() -> str:
    try:
        out = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout
    except FileNotFoundError:  # not a Debian host: the plain install line is the best advice
        return ""
    return out.strip()


def _make(source: Source, profile: ArchProfile, toolchain: Toolchain, workdir: Path, target: str) -> None:
    argv = ["make", "-s", "-C", str(source.tree), f"O={workdir}",
            *make_vars(profile, toolchain), target]
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [text for text in (result.stderr + result.stdout).splitlines() if text.strip()]
        raise LabError(f"`make {target}` failed for {source.spec} {profile.name}: "
                       f"{lines[-1] if lines else 'no output'}")


def _last_per_name(settings: list[Setting]) -> list[Setting]:
    last = {s.name: s for s in settings}
    return list(last.values())


def _check_known(source: Source, settings: list[Setting]) -> None:
    known = kconfig_symbols(source)
    for s in settings:
        name = s.name.removeprefix("CONFIG_")
        if name not in known:
            hint = did_you_mean(name, sorted(known), prefix="CONFIG_")
            hint = f"; {hint}" if hint else ""
            raise LabError(f"{s.origin}: unknown option {s.name} in Linux {source.version}{hint}")


_SYMBOL = re.compile(r"^\s*(?:menu)?config\s+([A-Za-z0-9_]+)\s*$", re.M)


def kconfig_symbols(source: Source) -> set[str]:
    """Every symbol any Kconfig file of the tree defines (all arches), cached per source."""
    cache = paths.cache_file("resolve", f"{paths.component('source id', source.id)}-symbols.json")
    if cache.exists():
        return set(json.loads(cache.read_text()))
    names: set[str] = set()
    for root, _dirs, files in os.walk(source.tree):
        for fname in files:
            if fname.startswith("Kconfig"):
                names.update(_SYMBOL.findall(Path(root, fname).read_text(errors="replace")))
    cache.write_text(json.dumps(sorted(names)))
    return names
