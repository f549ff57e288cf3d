"""The timing modes (modes.toml): their names, how many boots each takes, and what every
report says about the numbers they give."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from . import datafile
from .errors import LabError

# Why a disk (the fs: axis's, a workload's: targets.fsimage) is for wall mode only.
DISK_WALL_ONLY = "a disk's I/O completes in host time, which icount mode's determinism cannot have"
# Boots per variant, asked for (--runs, --max-runs, an experiment's runs): a number past
# this is a typo or a digit string from elsewhere (int() reads any script's digits), not an
# experiment, and would boot for days before saying anything.
MAX_RUNS = 1000


@dataclass(frozen=True)
class Mode:
    name: str
    deterministic: bool
    runs: int          # boots per variant by default (the minimum, in wall mode)
    max_runs: int      # the cap while some median is still imprecise
    probe_runs: int    # boots per sweep or bisect probe
    note: str          # how the numbers were obtained, for report headers
    summary: str       # the same, for the text of sweep and bisect
    default: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.runs <= self.max_runs:
            raise ValueError(f"runs must be between 1 and max_runs ({self.runs}, {self.max_runs})")


@dataclass(frozen=True)
class _File:
    mode: list[Mode]


@cache
def all_modes() -> dict[str, Mode]:
    path = resources.files(__package__) / "modes.toml"
    modes = datafile.load(_File, datafile.read_toml(path, "modes.toml"), "modes.toml").mode
    if sum(m.default for m in modes) != 1:
        raise LabError("modes.toml: exactly one mode must have default = true")
    return {m.name: m for m in modes}


NAMES: tuple[str, ...] = tuple(all_modes())
DEFAULT: str = next(m.name for m in all_modes().values() if m.default)


def get(name: str) -> Mode:
    """The mode named `name`: what a command resolves once, at its entry, and passes on."""
    mode = all_modes().get(name)
    if mode is None:
        raise LabError(f"unknown timing mode {name!r}: use one of {', '.join(NAMES)}")
    return mode


def default() -> Mode:
    return get(DEFAULT)


def deterministic() -> list[Mode]:
    """The modes whose reruns are identical."""
    return [m for m in all_modes().values() if m.deterministic]
