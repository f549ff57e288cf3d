"""A description of the host the numbers were measured on, for every report."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from functools import cache


@cache
def describe(qemu_binary: str = "qemu-system-x86_64") -> dict:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
            "kernel": platform.release(), "qemu": _qemu_version(qemu_binary)}


def _qemu_version(qemu_binary: str) -> str:
    binary = shutil.which(qemu_binary)
    if not binary:
        return "not installed"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "unknown"
