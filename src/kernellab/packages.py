"""The package manifest (packages.txt): which Debian package provides each tool kernellab
uses. scripts/setup.sh reads the same file with bash, before Python is installed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from .errors import LabError


@dataclass(frozen=True)
class Tool:
    tool: str      # a command on PATH, an absolute path, or "-" (installed, never checked)
    package: str
    purpose: str


@cache
def manifest() -> tuple[Tool, ...]:
    tools = []
    text = (resources.files(__package__) / "packages.txt").read_text()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = line.split(None, 2)
        if len(words) < 3:
            raise LabError(f"packages.txt:{number}: expected TOOL PACKAGE PURPOSE, got {line.strip()!r}")
        tools.append(Tool(*words))
    return tuple(tools)


def package_for(tool: str) -> str:
    """The Debian package of a tool; the tool's own name for one the manifest lacks."""
    return next((t.package for t in manifest() if t.tool == tool), tool)
