"""A fake target (the target interface, replaying a scripted console) and the pieces to
run the real lab, session, store and report builder on it without building or booting."""

from __future__ import annotations

import types
from contextlib import contextmanager
from pathlib import Path

from kernellab import arches
from kernellab.build import Build
from kernellab.config.resolve import ResolvedConfig
from kernellab.experiments import lab
from kernellab.guest.console import ConsoleLine
from kernellab.guest.records import frame
from kernellab.targets import Capabilities, Exit, TargetInfo

BOOT = ["[    0.000000] Linux version 6.1.0-fake (kernellab@kernellab)",
        "[    0.010000] Memory: 239636K/261624K available (1412K kernel code, 300K rwdata, 400K rodata, "
        "500K init, 600K bss, 21988K reserved, 0K cma-reserved)",
        "[    0.200000] Freeing unused kernel image (initmem) memory: 500K",
        "[    0.210000] Run /init as init process",
        "[    0.300000] kernellab-agent: ready"]


def agent_lines(samples: dict[str, list[float]], unavailable: dict[str, str] | None = None,
                clocksource: str = "tsc", version: int = 1, end: bool = True,
                flaws: dict[str, str] | None = None) -> list[str]:
    """What the agent prints for these samples (ns), framed and checksummed as it does;
    `flaws`: /sys/devices/system/cpu/vulnerabilities, as the agent sends it."""
    payloads = [f"t=hello v={version} agent=kernellab-agent mode=pid1",
                f"t=meta key=clocksource value={clocksource}"]
    for metric, values in samples.items():
        payloads += [f"t=sample metric={metric} unit=ns rep={i} iters=1000 value={v}" for i, v in enumerate(values)]
    payloads += [f"t=na metric={m} reason={r.replace(' ', '_')}" for m, r in (unavailable or {}).items()]
    payloads += [f"t=meta key=vulnerability.{name} value={state}" for name, state in (flaws or {}).items()]
    lines = [frame(f"seq={seq} {p}") for seq, p in enumerate(payloads)]
    if end:
        lines.append(frame(f"seq={len(payloads)} t=end records={len(payloads)}"))
    return lines


class ListSink:
    """A session's sink that keeps what it is given."""

    def __init__(self):
        self.samples, self.unavailable_metrics, self.console_lines = [], {}, []

    def console(self, text):
        self.console_lines.append(text)

    def sample(self, s):
        self.samples.append(s)

    def unavailable(self, metric, reason):
        self.unavailable_metrics[metric] = reason


class FakeConsole:
    def __init__(self, script: list[str], hang: bool = False, interrupt_after: int | None = None):
        self.command = ["fake-target"]
        self.script, self.hang, self.interrupt_after = script, hang, interrupt_after
        self.stopped = False
        self.read = 0

    def lines(self):
        for i, text in enumerate(self.script):
            if self.stopped:
                return
            if self.interrupt_after is not None and i == self.interrupt_after:
                raise KeyboardInterrupt("SIGTERM")
            self.read += 1
            yield ConsoleLine(0.01 * (i + 1), text)

    def unavailable(self) -> dict[str, str]:
        return {}

    def facts_after(self) -> dict[str, str]:
        return {}

    def stop_in(self, seconds: float) -> None:
        if seconds == 0:
            self.stopped = True

    @property
    def exit(self) -> Exit:
        # A hanging kernel says nothing more until the time limit kills it.
        return Exit(None if self.hang else 0, self.hang, "", 0.5)


class FakeTarget:
    """Replays `script(cmdline)` as a kernel's console: the target interface, no kernel."""
    name = "fake"
    capabilities = Capabilities(boots_kernels=True, measures_running=False, deterministic=True)

    def __init__(self, script, hang: bool = False, interrupt_after: int | None = None):
        self.script, self.hang, self.interrupt_after = script, hang, interrupt_after
        self.cmdlines: list[str] = []
        self.consoles: list[FakeConsole] = []

    def describe(self, mode: str) -> TargetInfo:
        return TargetInfo(f"fake {mode}", {"cpu": "none"})

    @contextmanager
    def start(self, kernel, initramfs, cmdline, mode, timeout_s):
        self.cmdlines.append(cmdline)
        console = FakeConsole(self.script(cmdline), self.hang, self.interrupt_after)
        self.consoles.append(console)
        yield console


def prepared(spec, config_text: str = "CONFIG_UNIX=y\n") -> lab.Prepared:
    source = types.SimpleNamespace(version="6.1.192", spec="debian:6.1", id="6.1.192-fake", kind="debian",
                                   content_hash="0" * 64,
                                   to_dict=lambda: {"spec": "debian:6.1", "kind": "debian", "version": "6.1.192",
                                                    "content_hash": "0" * 64, "tree": "/nonexistent"})
    return lab.Prepared(spec, source, arches.load(spec.arch), None,
                        ResolvedConfig(spec.base, config_text, []))


def build(key: str, image_kib: int = 2048) -> Build:
    return Build(key=key, artifacts=Path("/nonexistent"), image=Path("/nonexistent/bzImage"), wall_s=60.0,
                 user_s=100.0, sys_s=10.0, image_bytes=image_kib << 10, vmlinux_bytes=3 << 20, text=2 << 20,
                 data=512 << 10, bss=128 << 10, compiler="gcc 12.2.0", ccache="", ccache_hit_pct=None,
                 jobs=2, cached=False)
