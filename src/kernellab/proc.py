"""Running external commands with errors the user can act on."""

from __future__ import annotations

import shutil
import signal
import subprocess
from types import FrameType
from typing import Any

from .errors import LabError
from .packages import package_for


def require_tool(tool: str) -> str:
    """The tool's path, or a one-line error naming the Debian package (packages.txt) to install."""
    path = shutil.which(tool)
    if path is None:
        raise LabError(f"{tool} not found: run `apt-get install -y {package_for(tool)}` (or `kernellab doctor`)")
    return path


def run_checked(argv: list[str], what: str, **kwargs: Any) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    except FileNotFoundError:
        raise LabError(f"{argv[0]} not found while running {what}: run `kernellab doctor`") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise LabError(f"{what} failed: {lines[-1] if lines else 'exit ' + str(result.returncode)}")
    stdout: str = result.stdout   # text=True
    return stdout


def stop_on_signals() -> None:
    """Make a kill (SIGTERM) or a closed terminal (SIGHUP) take the path of Ctrl-C: the run
    in progress is marked interrupted, a build's make is stopped with its compilers, and
    everything measured so far stays in the store. Python's default for these signals is
    to die on the spot, cleaning up nothing."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)
