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

A parse costs ~2 s on this machine's class of CPU: two thirds in the ~90 `$(shell,...)`
calls of the Kconfig preprocessor (cc-option and friends run the compiler), the rest in
kconfiglib. The parsed tree is pickled per source id, arch, compiler and kconfiglib version,
sealed with an HMAC under the user's private key (see _SEALED); loading it takes ~0.2 s.
(Caching only the $(shell) outputs was measured too: it leaves a ~0.5 s parse.)
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import hmac
import os
import pickle
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kconfiglib

from .. import paths
from ..arches import ArchProfile
from ..errors import LabError, did_you_mean
from ..sources import Source
from ..toolchain import Toolchain
from .dotconfig import Setting, parse_settings
from .resolve import kconfig_symbols, resolve

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

BOOL_TRISTATE = (kconfiglib.BOOL, kconfiglib.TRISTATE)

# The values kconfig takes for each type; it ignores others (and "n" unsets any type).
_INT = re.compile(r"^-?[0-9]+$")
_HEX = re.compile(r"^(0[xX])?[0-9a-fA-F]+$")
_VALID: dict[int, Callable[[str], bool]] = {
    kconfiglib.BOOL: lambda v: v in ("y", "n"),
    kconfiglib.TRISTATE: lambda v: v in ("y", "m", "n"),
    kconfiglib.INT: lambda v: bool(_INT.match(v)) or v == "n",
    kconfiglib.HEX: lambda v: bool(_HEX.match(v)) or v == "n",
    kconfiglib.STRING: lambda v: v.startswith('"') or v == "n",
}

# Bump when the compatibility layer changes what a parse produces: old caches are ignored.
_CACHE_FORMAT = 1
_PICKLE_DEPTH = 600_000
_PICKLE_STACK = 256 << 20


def make_environment(source: Source, profile: ArchProfile, toolchain: Toolchain) -> dict[str, str]:
    """What `make` exports to kconfig that the Kconfig files (and the scripts their
    `$(shell,...)` calls run, e.g. rust_is_available.sh) read, computed as the top-level
    Makefile computes it for `make ARCH=... CC=...` (user-settable variables such as
    USERCFLAGS or CLANG_FLAGS stay empty, as kernellab never sets them)."""
    cross = toolchain.cross_compile
    # As the Makefile runs it: no rustc, no text.
    try:
        rustc_version = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout
    except OSError:
        rustc_version = ""
    return {
        "srctree": str(source.tree),
        "ARCH": profile.kernel_arch,
        "SRCARCH": _SRCARCH.get(profile.kernel_arch, profile.kernel_arch),
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
        "RUSTC_VERSION_TEXT": rustc_version.strip().replace("#", ""),
        # kconfiglib's documented hook for preprocessor functions (`functions` below).
        "KCONFIG_FUNCTIONS": __name__,
    }


def _shell(kconf: _Kconfig, _name: str, command: str) -> str:
    """$(shell,...) as kconfiglib runs it, but in a directory of kernellab's: cc-option makes
    and removes a .tmp_$$ directory where it runs (make's object tree, under make), which
    must not be the user's working directory."""
    # The command is the Kconfig file's own shell text (a kernel source is trusted code), run
    # by /bin/sh as make and kconfiglib run it; kernellab adds nothing to it.
    result = subprocess.run(["/bin/sh", "-c", command], cwd=kconf.scratch, capture_output=True)
    stdout = result.stdout.decode(errors="replace")
    # kconfiglib's _shell_fn: the trailing newline dropped, the others turned into spaces.
    return "\n".join(stdout.splitlines()).rstrip("\n").replace("\n", " ")


# Read by kconfiglib through KCONFIG_FUNCTIONS: (function, min args, max args).
functions = {"shell": (_shell, 1, 1)}


class _Kconfig(kconfiglib.Kconfig):  # type: ignore[misc]  # subclassing Any: kconfiglib is untyped
    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        # The kernel's own Kconfig files draw a few dozen harmless kconfiglib warnings
        # (whitespace in prompts, selects of choice symbols): not the user's business.
        super().__init__("Kconfig", warn=False, warn_to_stderr=False)

    def _tokenize(self, s: str) -> list[Any]:
        tokens: list[Any] = super()._tokenize(s)
        if tokens[0] is kconfiglib._T_MODULES:   # bare `modules` (Linux >= 5.13)
            return [kconfiglib._T_OPTION, *tokens]
        return tokens

    def __getstate__(self) -> tuple[dict[str, Any], dict[str, Any]]:
        state, slots = super().__getstate__()
        # The method of the Kconfig file the parse read (closed since): nothing reads it later.
        return state, {k: v for k, v in slots.items() if k != "_readline"}


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
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
def _gc_paused() -> Iterator[None]:
    """A parse or a load allocates about a million long-lived objects and frees none: the
    cyclic collector would rescan them again and again for nothing (twice as long)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class KconfigTree:
    """The parsed Kconfig of a source for an arch, holding one config's values at a time."""

    def __init__(self, source: Source, profile: ArchProfile, toolchain: Toolchain,
                 kconf: kconfiglib.Kconfig):
        self.source = source
        self.profile = profile
        self.toolchain = toolchain
        self.kconf = kconf
        self.loaded: str | None = None    # which config the symbol values are from
        self._base: tuple[list[Setting], str] = ([], "no config")

    @property
    def where(self) -> str:
        return f"Linux {self.source.version} {self.profile.name}"

    # --- symbols --------------------------------------------------------------------------

    def symbol(self, name: str) -> kconfiglib.Symbol | None:
        """A symbol this tree defines for this arch, by name with or without CONFIG_."""
        sym = self.kconf.syms.get(name.removeprefix("CONFIG_"))
        return sym if sym is not None and sym.nodes else None

    def suggestion(self, name: str, n: int = 3) -> str:
        """"did you mean CONFIG_A?" with the options of this tree closest to `name`, or ""."""
        return did_you_mean(name, (s.name for s in self.kconf.unique_defined_syms), n=n, prefix="CONFIG_")

    def require(self, name: str) -> kconfiglib.Symbol:
        sym = self.symbol(name)
        if sym is None:
            raise LabError(self.missing(name))
        return sym

    @functools.cached_property
    def any_arch_symbols(self) -> set[str]:
        """Every symbol some Kconfig file of the tree defines, for any arch."""
        return kconfig_symbols(self.source)

    def missing(self, name: str, suggest: bool = True) -> str:
        """Why this tree has no such option, in one line."""
        name = "CONFIG_" + name.removeprefix("CONFIG_")
        if name.removeprefix("CONFIG_") in self.any_arch_symbols:
            return f"{name} is arch-specific: not defined for {self.profile.name} in Linux {self.source.version}"
        if not suggest:
            return f"{name} does not exist in Linux {self.source.version}"
        hint = self.suggestion(name) or "no option has a similar name"
        return f"{name} does not exist in Linux {self.source.version}; {hint}"

    def value(self, sym: kconfiglib.Symbol) -> str | None:
        """The option's value as a .config writes it: y/m/n, a number, a quoted string;
        None for a non-bool option the config does not set (its dependencies are unmet)."""
        if sym.orig_type not in BOOL_TRISTATE and not sym.config_string:
            return None
        text: str = sym.str_value
        if sym.orig_type is kconfiglib.STRING:
            return f'"{kconfiglib.escape(text)}"'
        return text

    def resolved(self) -> dict[str, str]:
        """The config make olddefconfig would write for the loaded values, as a dict."""
        out: dict[str, str] = {}
        for sym in self.kconf.unique_defined_syms:
            if sym.config_string or _written_for_imply(sym):
                value = self.value(sym)
                # Never None here: a bool/tristate always has a value, any other symbol
                # has one when it has a config_string.
                if value is not None:
                    out["CONFIG_" + sym.name] = value
        return out

    # --- loading configs ------------------------------------------------------------------

    def load(self, path: str | Path) -> list[str]:
        """Load a .config. A malformed line (file:line) or another arch's config is a
        LabError; unknown options and values of the wrong type, which kconfig itself
        ignores, come back as warnings, one line each."""
        return self.load_text(_read_text(Path(path)), str(path))

    def load_defconfig(self) -> list[str]:
        """The arch's default config, made by `make defconfig` (each arch's Makefile picks
        its defconfig file its own way)."""
        made = resolve(self.source, self.profile, self.toolchain, "defconfig", [])
        return self.load_text(made.text, f"{self.profile.name} defconfig")

    def load_text(self, text: str, path: str) -> list[str]:
        """`load` for a config in memory; `path` names it in messages."""
        settings = parse_settings(text, path)
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
        self._load_settings(known, path)
        self._base = (known, path)
        self._check_arch(settings, path)
        if (cannot := self._cannot_hold(known)):
            warnings.insert(0, f"{path}: {len(cannot)} option(s) cannot hold in {self.where} and resolve "
                               f"otherwise (the answer below is for the resolved values): " + "; ".join(cannot))
        if unknown:
            warnings.insert(0, self._unknown_warning(path, unknown))
        return warnings

    def apply(self, settings: list[Setting], label: str) -> None:
        """Merge settings onto the loaded config, as kernellab's resolve merges a fragment."""
        self._load_settings(settings, label, replace=False)

    def restore(self) -> None:
        """Back to the values of the config last loaded, without what `apply` added."""
        self._load_settings(*self._base)

    def _load_settings(self, settings: list[Setting], label: str, replace: bool = True) -> None:
        # kconfiglib reads files only; hand it the lines dotconfig validated, so both read
        # the same thing (their notions of a line differ on exotic separators).
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".config") as f:
            f.write("".join(s.line() + "\n" for s in settings))
            f.flush()
            self.kconf.load_config(f.name, replace=replace)
        self.loaded = label if replace else f"{self.loaded} + {label}"

    def _check_arch(self, settings: list[Setting], path: str) -> None:
        for s in settings:
            arch = ARCH_SYMBOLS.get(s.name.removeprefix("CONFIG_"))
            if arch and s.value == "y":
                sym = self.symbol(s.name)
                if sym is None or sym.tri_value != 2:
                    raise LabError(f"{path} is a config for {arch} ({s.origin}: {s.name}=y), "
                                   f"not for {self.profile.name}: pass --arch for its arch")

    def _cannot_hold(self, settings: list[Setting], detailed: int = 10) -> list[str]:
        """Settings of options a user can set (with a prompt) that the tree resolves to
        another value (an unmet dependency, a select), each with what decides it. Derived
        options (the compiler's version, pahole's features) follow the build host."""
        out: list[str] = []
        for s in settings:
            sym = self.symbol(s.name)
            got = self.value(sym) if sym is not None else None
            if sym is None or not any(n.prompt for n in sym.nodes) or (got if got is not None else "n") == s.value or \
                    (got is None and s.value == "n"):
                continue
            why = ""
            if len(out) < detailed:
                if sym.orig_type in BOOL_TRISTATE and kconfiglib.expr_value(sym.rev_dep) > 0:
                    names = selecting(sym)
                    why = f" (selected by {', '.join(names[:6])}{' and more' if len(names) > 6 else ''})"
                elif kconfiglib.expr_value(sym.direct_dep) == 0:
                    why = f" (depends on {kconfiglib.expr_str(sym.direct_dep)})"
            out.append(f"{s.name}={s.value} -> {got if got is not None else '(unset)'}{why}")
        if len(out) > detailed:
            out[detailed:] = [f"and {len(out) - detailed} more"]
        return out

    def _unknown_warning(self, path: str, unknown: list[Setting], detailed: int = 5) -> str:
        # Suggestions cost a scan of every name each: worth it for the first few only.
        parts = []
        for i, s in enumerate(unknown):
            hint = self.suggestion(s.name, n=1) if i < detailed else ""
            line = s.origin.rsplit(":", 1)[-1]
            parts.append(f"{s.name} (line {line}{'; ' + hint if hint else ''})")
        shown = ", ".join(parts[:10]) + (f" and {len(parts) - 10} more" if len(parts) > 10 else "")
        return f"{path}: {len(unknown)} option(s) unknown to {self.where}, ignored: {shown}"


def menus(node: kconfiglib.MenuNode) -> list[str]:
    """The menus above a node, outermost first: ["Kernel hacking", "Lock Debugging (...)"]."""
    parts = []
    parent = node.parent
    while parent is not None and parent.parent is not None:
        if parent.prompt:
            parts.append(parent.prompt[0])
        parent = parent.parent
    return parts[::-1]


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
    valid = _VALID.get(sym.orig_type)
    if valid is None or valid(value):
        return None
    return f"CONFIG_{sym.name} is a {kconfiglib.TYPE_TO_STR[sym.orig_type]} option: {value} is not a valid value"


def _written_for_imply(sym: kconfiglib.Symbol) -> bool:
    """The C tools write "is not set" for a symbol an active `imply` points at even when
    its own dependencies are unmet (symbol.c: sym_calc_value); kconfiglib does not."""
    return (sym.orig_type in BOOL_TRISTATE and sym.choice is None
            and kconfiglib.expr_value(sym.weak_rev_dep) > 0)


def open_tree(source: Source, profile: ArchProfile, toolchain: Toolchain) -> KconfigTree:
    """The parsed Kconfig of `source` for `profile`: from the cache, or parsed and cached."""
    cache = cache_path(source, profile, toolchain)
    kconf = _load_cached(cache)
    if kconf is None:
        kconf = _parse(source, profile, toolchain, cache.parent)
        _save(kconf, cache)
    return KconfigTree(source, profile, toolchain, kconf)


def needs(tree: KconfigTree, options: list[str]) -> dict[str, set[str]]:
    """For each option (CONFIG_ names), the others of `options` that decide whether
    olddefconfig sets it, directly or through options outside the list: those its
    dependencies name (FUNCTION_TRACER needs FTRACE; RETPOLINE needs CPU_MITIGATIONS), and
    for an option without a prompt, which follows its defaults and what selects it, those
    named there too (BASE_SMALL follows BASE_FULL)."""
    wanted = {o.removeprefix("CONFIG_") for o in options}
    syms = tree.kconf.syms

    def direct(name: str) -> set[str]:
        sym = syms.get(name)
        if sym is None:
            return set()
        exprs = [sym.direct_dep] + ([sym.choice.direct_dep] if sym.choice is not None else [])
        if not any(node.prompt for node in sym.nodes):
            exprs += [e for value, cond in sym.defaults for e in (value, cond)] + [sym.rev_dep, sym.weak_rev_dep]
        return {item.name for e in exprs for item in kconfiglib.expr_items(e)
                if isinstance(item, kconfiglib.Symbol) and not item.is_constant and item.name != name}

    out: dict[str, set[str]] = {}
    for name in sorted(wanted):
        seen, todo, found = {name}, list(direct(name)), set()
        while todo:
            other = todo.pop()
            if other in seen:
                continue
            seen.add(other)
            if other in wanted:
                found.add(f"CONFIG_{other}")
            todo += direct(other)
        out[f"CONFIG_{name}"] = found
    return out


def cache_path(source: Source, profile: ArchProfile, toolchain: Toolchain) -> Path:
    """Where the parsed tree is kept: per source, arch, compiler (its whole version line, as
    CC_VERSION_TEXT ends up in the config) and kconfiglib. Installing a tool the Kconfig
    probes look for (rustc, bindgen, pahole) is not noticed: delete the file to probe again."""
    compiler = hashlib.sha256(toolchain.version_text.encode()).hexdigest()[:8]
    version = ".".join(map(str, kconfiglib.VERSION))
    return paths.cache_file("kconfig", f"{source.id}-{profile.name}-{toolchain.id}-{compiler}-"
                                       f"kconfiglib{version}-{_CACHE_FORMAT}.pickle")


def _parse(source: Source, profile: ArchProfile, toolchain: Toolchain, scratch: Path) -> _Kconfig:
    try:
        with _environment(make_environment(source, profile, toolchain)), _gc_paused():
            return _Kconfig(scratch)
    except kconfiglib.KconfigError as exc:
        raise LabError(f"kconfiglib cannot parse the Kconfig of {source.spec} for {profile.name}: "
                       f"{str(exc).strip().splitlines()[0]}") from None
    except OSError as exc:
        raise LabError(f"cannot read the Kconfig of {source.spec}: {exc}") from None


# A cache file: this header, the HMAC-SHA256 of the pickle under the user's private key
# (kernellab.paths.private_key), then the pickle. Unpickling runs any code a pickle names
# (a __reduce__ that calls os.system), and the cache directory may be writable by others
# or copied from another machine: a pickle is loaded only when its HMAC proves this user's
# kernellab wrote it; any other file is parsed over, never loaded.
_SEALED = b"kernellab kconfig cache, hmac-sha256\n"
_MAC_BYTES = hashlib.sha256().digest_size


def _seal(data: bytes, key: bytes) -> bytes:
    return _SEALED + hmac.new(key, data, hashlib.sha256).digest() + data


def _unseal(sealed: bytes, key: bytes) -> bytes | None:
    """The pickle, if its HMAC is the key's; else None."""
    if not sealed.startswith(_SEALED):
        return None
    mac, data = sealed[len(_SEALED):len(_SEALED) + _MAC_BYTES], sealed[len(_SEALED) + _MAC_BYTES:]
    return data if hmac.compare_digest(mac, hmac.new(key, data, hashlib.sha256).digest()) else None


def _load_cached(path: Path) -> _Kconfig | None:
    """None when there is no usable cache: a damaged, foreign or forged file is parsed over."""
    key = paths.private_key()
    try:
        sealed = path.read_bytes() if key is not None else b""
    except OSError:
        return None
    data = _unseal(sealed, key) if key is not None else None
    if data is None:
        return None
    try:
        with _gc_paused():
            kconf = pickle.loads(data)
    except Exception:   # whatever unpickling a damaged file raises, the remedy is a new parse
        return None
    return kconf if isinstance(kconf, _Kconfig) else None


def _save(kconf: _Kconfig, path: Path) -> None:
    """Pickle recurses along kconfiglib's menu nodes, linked lists ~60000 deep in Linux
    6.12 (each level takes ~100 bytes of C stack): pickle in a thread whose stack holds
    ten times that depth. Loading is iterative and needs none of this. A cache that cannot
    be written only costs the next command a parse."""
    key = paths.private_key()
    if key is None:
        return   # a cache nobody could trust is not written

    def dump() -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(_PICKLE_DEPTH)
        try:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with _gc_paused():   # pickle's memo of a million entries would set it off again and again
                data = pickle.dumps(kconf, protocol=pickle.HIGHEST_PROTOCOL)
            tmp.write_bytes(_seal(data, key))
            tmp.replace(path)
        except (OSError, RecursionError, pickle.PicklingError):
            pass
        finally:
            sys.setrecursionlimit(limit)

    previous = threading.stack_size(_PICKLE_STACK)
    try:
        worker = threading.Thread(target=dump, name="kconfig-cache")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(previous)


def selecting(sym: kconfiglib.Symbol) -> list[str]:
    """The options that select `sym` now, by name: of a select list that can run to dozens
    of drivers, the ones that decide it. (kconfiglib builds each term of the reverse
    dependency as the selecting symbol AND its condition.)"""
    terms = [t for t in kconfiglib.split_expr(sym.rev_dep, kconfiglib.OR) if kconfiglib.expr_value(t)]
    return sorted({getattr(kconfiglib.split_expr(t, kconfiglib.AND)[0], "name", "?") for t in terms})
