"""The Kconfig model of one kernel tree for one arch, through kconfiglib.

`make olddefconfig` stays the authority for resolving configs (config/resolve.py); this
model answers the questions make cannot: where an option lives in the menus, why it has
its value, what it depends on. Its resolution is tested to equal make's, symbol for symbol,
on Debian's 6.1 and 6.12 configs.

Compatibility with Linux >= 5.13 and kconfiglib 14.1.0 (the last release, 2020) takes two
narrow patches instead of a copy of the kernel's Kconfig files:
- `modules`, the attribute that marks MODULES, lost its `option` prefix in 5.13; kconfiglib
  rejects the bare form. `_Kconfig._tokenize` turns the bare keyword back into the old
  `option modules` line, which kconfiglib accepts and treats the same way (the C tools and
  kconfiglib both know MODULES as the modules symbol).
- An active `imply` makes the C tools write "# CONFIG_X is not set" even when X's own
  dependencies are unmet; kconfiglib leaves the line out. Neither changes a value, but
  `KconfigTree.resolved` follows the C rule so the two resolved configs are identical.
Everything else is the environment: the Kconfig files read variables the top-level
Makefile exports (`make_environment`).

Parsing the tree costs ~2 s, two thirds of it in the ~90 `$(shell,...)` calls of the Kconfig
preprocessor (cc-option and friends run the compiler). Their outputs are cached per source,
arch and compiler (`_ShellMemo`), which brings a parse down to ~0.5 s. Pickling the parsed
tree instead was measured and rejected: kconfiglib's menu nodes are long linked lists, so
pickle needs a recursion depth above 30000 (a thread with a huge stack) to save a further
~0.3 s on load.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import kconfiglib

from .. import paths
from ..arches import ArchProfile
from ..errors import LabError
from ..sources import Source
from ..toolchain import Toolchain
from .dotconfig import Setting, parse_settings

# ARCH= values whose Kconfig lives under another directory (the top-level Makefile's SRCARCH).
_SRCARCH = {"i386": "x86", "x86_64": "x86", "sparc32": "sparc", "sparc64": "sparc",
            "parisc64": "parisc"}

# The symbol each arch's Kconfig sets: a config that has one of these at y, while this tree
# cannot give it y, was made for another arch.
ARCH_SYMBOLS = {
    "X86_64": "x86_64", "X86_32": "i386", "ARM64": "arm64", "ARM": "arm", "PPC64": "powerpc64",
    "PPC32": "powerpc", "RISCV": "riscv", "S390": "s390", "MIPS": "mips", "LOONGARCH": "loongarch",
    "SPARC": "sparc", "PARISC": "parisc", "ALPHA": "alpha", "M68K": "m68k", "SUPERH": "sh",
    "MICROBLAZE": "microblaze", "XTENSA": "xtensa", "CSKY": "csky", "ARC": "arc",
    "OPENRISC": "openrisc", "NIOS2": "nios2", "HEXAGON": "hexagon", "UML": "um",
}

_INT = re.compile(r"^-?[0-9]+$")
_HEX = re.compile(r"^(0[xX])?[0-9a-fA-F]+$")

BOOL_TRISTATE = (kconfiglib.BOOL, kconfiglib.TRISTATE)


def srcarch(profile: ArchProfile) -> str:
    return _SRCARCH.get(profile.kernel_arch, profile.kernel_arch)


def make_environment(source: Source, profile: ArchProfile, toolchain: Toolchain,
                     shell: _ShellMemo) -> dict[str, str]:
    """What `make` exports to kconfig that the Kconfig files (and the scripts their
    `$(shell,...)` calls run, e.g. rust_is_available.sh) read, computed as the top-level
    Makefile computes it for `make ARCH=... CC=...` (user-settable variables such as
    USERCFLAGS or CLANG_FLAGS stay empty, as kernellab never sets them)."""
    cross = toolchain.cross_compile
    return {
        "srctree": str(source.tree),
        "ARCH": profile.kernel_arch,
        "SRCARCH": srcarch(profile),
        "KERNELVERSION": source.version,
        "CC": toolchain.cc,
        "LD": f"{cross}ld",
        "AR": f"{cross}ar",
        "NM": f"{cross}nm",
        "OBJCOPY": f"{cross}objcopy",
        "PAHOLE": "pahole",
        "PYTHON3": "python3",
        "RUSTC": "rustc",
        "BINDGEN": "bindgen",
        # The Makefile strips '#' from both: kconfig would read it as a comment.
        "CC_VERSION_TEXT": toolchain.version_text.replace("#", ""),
        "RUSTC_VERSION_TEXT": shell.run("rustc --version 2>/dev/null").replace("#", ""),
        # kconfiglib's documented hook for preprocessor functions: routes $(shell,...)
        # through the memo (`functions` below).
        "KCONFIG_FUNCTIONS": __name__,
    }


class _ShellMemo:
    """The outputs of the Kconfig preprocessor's `$(shell,...)` calls, kept on disk.

    They depend on the tree, the arch and the tools; the file is keyed by source id, arch
    and compiler version. Installing another tool the probes look for (rustc, bindgen,
    pahole) is not noticed: delete the kconfig cache directory to probe again.
    """

    def __init__(self, path: Path):
        self.path = path
        # cc-option makes and removes a .tmp_$$ directory in its working directory, as it
        # does in make's object tree: give it one of its own.
        self.cwd = path.parent
        try:
            self.outputs: dict[str, str] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.outputs = {}
        self.changed = False

    def run(self, command: str) -> str:
        if command not in self.outputs:
            result = subprocess.run(command, shell=True, cwd=self.cwd, capture_output=True)
            stdout = result.stdout.decode(errors="replace")
            # kconfiglib's own _shell_fn: trailing newline dropped, the others become spaces.
            self.outputs[command] = "\n".join(stdout.splitlines()).rstrip("\n").replace("\n", " ")
            self.changed = True
        return self.outputs[command]

    def save(self) -> None:
        if self.changed:
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.outputs, indent=1, sort_keys=True))
            tmp.replace(self.path)


def _shell(kconf: _Kconfig, _name: str, command: str) -> str:
    return kconf.shell.run(command)


# Read by kconfiglib through KCONFIG_FUNCTIONS: (function, min args, max args).
functions = {"shell": (_shell, 1, 1)}


class _Kconfig(kconfiglib.Kconfig):
    def __init__(self, shell: _ShellMemo):
        self.shell = shell
        # The kernel's own Kconfig files draw a few dozen harmless kconfiglib warnings
        # (whitespace in prompts, selects of choice symbols): not the user's business.
        super().__init__("Kconfig", warn=False, warn_to_stderr=False)

    def _tokenize(self, s):
        tokens = super()._tokenize(s)
        if tokens[0] is kconfiglib._T_MODULES:   # bare `modules` (Linux >= 5.13)
            return [kconfiglib._T_OPTION, *tokens]
        return tokens


@contextlib.contextmanager
def _environment(env: dict[str, str]):
    """kconfiglib reads the environment (srctree, $(VAR) expansion) while it parses."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _gc_paused():
    """A parse allocates about a million long-lived objects and frees none: the cyclic
    collector would rescan them again and again for nothing (a parse takes twice as long)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class LoadedConfig:
    path: str
    settings: list[Setting]     # the file as written, in order
    warnings: list[str]         # one line each: unknown options, values of the wrong type


class KconfigTree:
    """The parsed Kconfig of a source for an arch, holding one config's values at a time."""

    def __init__(self, source: Source, profile: ArchProfile, kconf: kconfiglib.Kconfig):
        self.source = source
        self.profile = profile
        self.kconf = kconf
        self.loaded: str | None = None    # which config the symbol values are from

    @property
    def where(self) -> str:
        return f"Linux {self.source.version} {self.profile.name}"

    # --- symbols --------------------------------------------------------------------------

    def symbol(self, name: str) -> kconfiglib.Symbol | None:
        """A symbol this tree defines for this arch, by name with or without CONFIG_."""
        sym = self.kconf.syms.get(name.removeprefix("CONFIG_"))
        return sym if sym is not None and sym.nodes else None

    def closest(self, name: str, n: int = 3) -> list[str]:
        names = [s.name for s in self.kconf.unique_defined_syms]
        return ["CONFIG_" + c for c in difflib.get_close_matches(name.removeprefix("CONFIG_"), names, n=n)]

    def require(self, name: str) -> kconfiglib.Symbol:
        sym = self.symbol(name)
        if sym is None:
            close = self.closest(name)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise LabError(f"unknown option CONFIG_{name.removeprefix('CONFIG_')} in {self.where}{hint}")
        return sym

    def value(self, sym: kconfiglib.Symbol) -> str | None:
        """The option's value as a .config writes it: y/m/n, a number, a quoted string;
        None for a non-bool option the config does not set (its dependencies are unmet)."""
        if sym.orig_type in BOOL_TRISTATE:
            return sym.str_value
        if not sym.config_string:
            return None
        if sym.orig_type is kconfiglib.STRING:
            return f'"{kconfiglib.escape(sym.str_value)}"'
        return sym.str_value

    def resolved(self) -> dict[str, str]:
        """The config make olddefconfig would write for the loaded values, as a dict."""
        out = {}
        for sym in self.kconf.unique_defined_syms:
            if sym.config_string or _written_for_imply(sym):
                out["CONFIG_" + sym.name] = self.value(sym)
        return out

    # --- loading configs ------------------------------------------------------------------

    def load(self, path: str | Path) -> LoadedConfig:
        """Load a .config: LabError for a malformed line (file:line) or another arch's
        config; warnings for unknown options and values of the wrong type, which kconfig
        itself ignores."""
        path = Path(path)
        settings = parse_settings(_read_text(path), str(path))
        known, warnings = [], []
        unknown = []
        for s in settings:
            sym = self.symbol(s.name)
            if sym is None:
                unknown.append(s)
            elif (problem := _invalid(sym, s.value)) is not None:
                warnings.append(f"{s.origin}: {problem}; kconfig ignores it")
            else:
                known.append(s)
        self._load_settings(known, str(path))
        self._check_arch(settings, path)
        if unknown:
            warnings.insert(0, self._unknown_warning(path, unknown))
        return LoadedConfig(str(path), settings, warnings)

    def load_defconfig(self) -> LoadedConfig:
        """The arch's default config, as `make defconfig` picks it."""
        configs = self.source.tree / "arch" / srcarch(self.profile) / "configs"
        for name in (f"{self.profile.kernel_arch}_defconfig", "defconfig"):
            if (configs / name).is_file():
                return self.load(configs / name)
        raise LabError(f"{self.where} has no defconfig in {configs}: give a config with --config")

    def apply(self, settings: list[Setting], label: str) -> None:
        """Merge settings onto the loaded config, as kernellab's resolve merges a fragment."""
        self._load_settings(settings, label, replace=False)

    def _load_settings(self, settings: list[Setting], label: str, replace: bool = True) -> None:
        # kconfiglib reads files only; hand it the lines dotconfig validated, so both read
        # the same thing (their notions of a line differ on exotic separators).
        with tempfile.NamedTemporaryFile("w", suffix=".config", dir=paths.cache_dir("kconfig")) as f:
            f.write("".join(s.line() + "\n" for s in settings))
            f.flush()
            self.kconf.load_config(f.name, replace=replace)
        self.loaded = label if replace else f"{self.loaded} + {label}"

    def _check_arch(self, settings: list[Setting], path: Path) -> None:
        for s in settings:
            arch = ARCH_SYMBOLS.get(s.name.removeprefix("CONFIG_"))
            if arch and s.value == "y":
                sym = self.symbol(s.name)
                if sym is None or sym.tri_value != 2:
                    raise LabError(f"{path} is a config for {arch} ({s.origin}: {s.name}=y), "
                                   f"not for {self.profile.name}: pass --arch for its arch")

    def _unknown_warning(self, path: Path, unknown: list[Setting], detailed: int = 5) -> str:
        # Suggestions cost a scan of every name each: worth it for the first few only.
        parts = []
        for i, s in enumerate(unknown):
            close = self.closest(s.name, n=1) if i < detailed else []
            line = s.origin.rsplit(":", 1)[-1]
            parts.append(f"{s.name} (line {line}{'; did you mean ' + close[0] + '?' if close else ''})")
        shown = ", ".join(parts[:10]) + (f" and {len(parts) - 10} more" if len(parts) > 10 else "")
        return f"{path}: {len(unknown)} option(s) unknown to {self.where}, ignored: {shown}"


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LabError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LabError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def _invalid(sym: kconfiglib.Symbol, value: str) -> str | None:
    """Why kconfig would ignore this value for this symbol, or None."""
    kind = kconfiglib.TYPE_TO_STR[sym.orig_type]
    ok = {kconfiglib.BOOL: lambda v: v in ("y", "n"),
          kconfiglib.TRISTATE: lambda v: v in ("y", "m", "n"),
          kconfiglib.INT: lambda v: bool(_INT.match(v)) or v == "n",
          kconfiglib.HEX: lambda v: bool(_HEX.match(v)) or v == "n",
          kconfiglib.STRING: lambda v: v.startswith('"') or v == "n"}.get(sym.orig_type)
    if ok is None or ok(value):
        return None
    return f"CONFIG_{sym.name} is a {kind} option: {value} is not a valid value"


def _written_for_imply(sym: kconfiglib.Symbol) -> bool:
    """The C tools write "is not set" for a symbol an active `imply` points at even when
    its own dependencies are unmet (symbol.c: sym_calc_value); kconfiglib does not."""
    return (sym.orig_type in BOOL_TRISTATE and sym.choice is None
            and kconfiglib.expr_value(sym.weak_rev_dep) > 0)


def open_tree(source: Source, profile: ArchProfile, toolchain: Toolchain) -> KconfigTree:
    memo = _ShellMemo(paths.cache_dir("kconfig") / f"{source.id}-{profile.name}-{toolchain.id}.json")
    env = make_environment(source, profile, toolchain, memo)
    try:
        with _environment(env), _gc_paused():
            kconf = _Kconfig(memo)
    except kconfiglib.KconfigError as exc:
        raise LabError(f"kconfiglib cannot parse the Kconfig of {source.spec} for {profile.name}: "
                       f"{str(exc).strip().splitlines()[0]}") from None
    except OSError as exc:
        raise LabError(f"cannot read the Kconfig of {source.spec}: {exc}") from None
    memo.save()
    return KconfigTree(source, profile, kconf)
