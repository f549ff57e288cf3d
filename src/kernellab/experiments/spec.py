"""Variant and experiment specifications: the command-line short syntax and TOML files.

Short syntax:  NAME=BASE+FRAGMENT+CONFIG_X=y+...   (NAME= may be left out)
  BASE      defconfig | tinyconfig | allnoconfig | debian | lab-minimal | path of a .config
  FRAGMENT  path of a fragment file, or a fragment kernellab ships (e.g. debug-kernel)
  CONFIG_X=VALUE inline; CONFIG_X=n unsets it
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..config.dotconfig import Setting, parse_line, parse_settings
from ..errors import LabError

DEFAULT_SOURCE = "debian:6.1"
DEFAULT_ARCH = "x86_64"


@dataclass
class VariantSpec:
    name: str
    base: str
    fragments: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)   # inline CONFIG_X=v
    source: str = DEFAULT_SOURCE
    arch: str = DEFAULT_ARCH

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

    def to_dict(self) -> dict:
        return {"name": self.name, "base": self.base, "fragments": self.fragments,
                "options": self.options, "source": self.source, "arch": self.arch}


@dataclass
class Experiment:
    name: str
    variants: list[VariantSpec]
    mode: str = "icount"
    runs: int | None = None        # None: the mode's default
    description: str = ""


def _fragment_text(fragment: str) -> tuple[str, str]:
    path = Path(fragment).expanduser()
    if path.is_file():
        return str(path), path.read_text(errors="replace")
    packaged = resources.files("kernellab.config") / "fragments" / f"{fragment}.config"
    if packaged.is_file():
        return f"kernellab:{fragment}", packaged.read_text()
    raise LabError(f"fragment {fragment!r} not found: give a file path or one of "
                   f"{', '.join(packaged_fragments())}")


def packaged_fragments() -> list[str]:
    folder = resources.files("kernellab.config") / "fragments"
    return sorted(p.name.removesuffix(".config") for p in folder.iterdir()
                  if p.name.endswith(".config") and not p.name.startswith("lab-minimal-"))


def parse_short(text: str, source: str = DEFAULT_SOURCE, arch: str = DEFAULT_ARCH) -> VariantSpec:
    head, sep, rest = text.partition("=")
    if sep and "+" not in head and not head.startswith("CONFIG_") and rest:
        name, body = head, rest
    else:
        name, body = text, text
    parts = [p for p in body.split("+")]
    if not parts[0] or any(not p for p in parts):
        raise LabError(f"bad variant {text!r}: expected NAME=BASE+FRAGMENT+CONFIG_X=y")
    base, fragments, options = parts[0], [], []
    for part in parts[1:]:
        (options if part.startswith("CONFIG_") else fragments).append(part)
    return VariantSpec(name, base, fragments, options, source, arch)


def load_experiment(path: Path | None) -> Experiment:
    """A TOML experiment file; None loads the built-in default experiment."""
    if path is None:
        text, origin = (resources.files(__package__) / "default.toml").read_text(), "default.toml"
    else:
        try:
            text, origin = Path(path).read_text(), str(path)
        except OSError as exc:
            raise LabError(f"cannot read experiment {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LabError(f"{origin}: not valid TOML ({exc})") from None
    source = data.get("source", DEFAULT_SOURCE)
    arch = data.get("arch", DEFAULT_ARCH)
    variants = []
    for i, v in enumerate(data.get("variant", []), start=1):
        if "name" not in v or "base" not in v:
            raise LabError(f"{origin}: variant {i} needs a name and a base")
        variants.append(VariantSpec(v["name"], v["base"], list(v.get("fragments", [])),
                                    list(v.get("options", [])), v.get("source", source),
                                    v.get("arch", arch)))
    if not variants:
        raise LabError(f"{origin}: no [[variant]] tables")
    return Experiment(data.get("name", Path(origin).stem), variants, data.get("mode", "icount"),
                      data.get("runs"), data.get("description", ""))
