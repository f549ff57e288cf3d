"""`kernellab doctor`: is every external tool the lab uses here, and if not, how to get it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .packages import manifest


@dataclass(frozen=True)
class Check:
    what: str      # the command or file
    purpose: str
    package: str
    ok: bool
    found: str

    def to_dict(self) -> dict[str, object]:
        return {"tool": self.what, "purpose": self.purpose, "package": self.package, "ok": self.ok,
                "found": self.found}


def _probe(target: str) -> str | None:
    if target.startswith("/"):
        return target if Path(target).exists() else None
    return shutil.which(target)


def checks() -> list[Check]:
    """One check per tool of the package manifest (packages.txt)."""
    out = []
    for tool in manifest():
        if tool.tool == "-":
            continue
        found = _probe(tool.tool)
        out.append(Check(tool.tool, tool.purpose, tool.package, found is not None,
                         found or f"missing: package {tool.package}"))
    return out


def install_command(failed: list[Check]) -> str:
    packages = sorted({c.package for c in failed})
    return f"apt-get install -y --no-install-recommends {' '.join(packages)}"
