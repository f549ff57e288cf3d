"""The machine kernellab runs on (the host), as every report describes it."""

from __future__ import annotations

import os
import platform
import socket
from functools import cache


@cache
def describe() -> dict[str, object]:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
            "kernel": platform.release()}
