"""Running external commands with errors the user can act on."""

from __future__ import annotations

import shutil
import subprocess

from .errors import LabError


def require_tool(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise LabError(f"{tool} not found: run `apt-get install -y {package}` (or `kernellab doctor`)")
    return path


def run_checked(argv: list[str], what: str, **kwargs) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    except FileNotFoundError:
        raise LabError(f"{argv[0]} not found while running {what}: run `kernellab doctor`") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise LabError(f"{what} failed: {lines[-1] if lines else 'exit ' + str(result.returncode)}")
    return result.stdout
