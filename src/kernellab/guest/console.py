"""The kernel's console log: boot milestones, the "Memory:" line, panics; and the console
itself, as any target hands it back (Console, Exit).

Each line arrives with the host time (seconds since QEMU started) at which it was read,
and most carry the kernel's own printk time ("[    0.123456]"), so every milestone is
known on both clocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

# printk's "%5lu.%06lu": a longer number is no kernel's, and would not stay finite.
PRINTK_TIME = re.compile(r"^\[\s*([0-9]{1,10}\.[0-9]{1,9})\]\s?")

# (name, what to look for, before init: the kernel's own line from before it runs init),
# in the order a healthy boot reaches them.
_MILESTONE_TABLE: tuple[tuple[str, re.Pattern[str] | None, bool], ...] = (
    ("first_output", None, True),
    ("linux_version", re.compile(r"Linux version \d"), True),
    ("freeing_unused", re.compile(r"Freeing unused kernel"), True),
    ("init_start", re.compile(r"Run \S+ as init process"), False),
    ("agent_ready", re.compile(r"kernellab-agent: ready"), False),
    # kernellab's own line when a kexec'd remote answers ssh (targets.kexec): host time only
    ("ssh_ready", re.compile(r"^kernellab: ssh reachable"), False),
)
# (name, what to look for), in boot order.
MILESTONES = tuple((name, pattern) for name, pattern, _ in _MILESTONE_TABLE)
# The milestones of the kernel's own lines before init, which a running machine's log
# (dmesg) gives with their printk times while its ring buffer still holds them (targets.running).
BEFORE_INIT = tuple(name for name, _, before_init in _MILESTONE_TABLE if before_init)

PANIC = re.compile(r"Kernel panic - not syncing")
# The kernel went on without the rest of an initramfs it could not unpack (out of memory,
# an unknown compression): the files after the failure are missing in the guest.
INITRAMFS_FAILED = re.compile(r"Initramfs unpacking failed: (.{1,200})")

# "initcall pci_subsys_init+0x0/0x6d returned 0 after 1171 usecs" (initcall_debug)
# Numbers are ASCII digits of a bounded length (the kernel's are ints and longs): what
# the store keeps must fit its 64-bit integers, whatever a console says.
_INITCALL = re.compile(r"initcall (\S{1,200}?)(?:\+0x[0-9a-f]+/0x[0-9a-f]+)?(?: \[[\w-]+\])? "
                       r"returned (-?[0-9]{1,10}) after ([0-9]{1,12}) usecs")
_MEMORY = re.compile(r"Memory: ([0-9]{1,15})K/([0-9]{1,15})K available \((.*)\)")
_MEMORY_FIELD = re.compile(r"(?<![0-9])([0-9]{1,15})K ([a-z][a-z -]*)")


@dataclass(frozen=True)
class ConsoleLine:
    host_s: float
    text: str
    # Read back from the kernel's log (dmesg on a running machine), not watched as it
    # arrived: its host time says nothing about the boot, and its verdicts are history.
    replayed: bool = False

    @property
    def printk_s(self) -> float | None:
        m = PRINTK_TIME.match(self.text)
        return float(m.group(1)) if m else None

    @property
    def message(self) -> str:
        return PRINTK_TIME.sub("", self.text, count=1)


@dataclass
class Exit:
    code: int | None   # the process's exit code; None when kernellab stopped it
    timed_out: bool    # stopped because the time limit ran out
    stderr: str        # what the target said besides the console (QEMU's own errors)
    wall_s: float
    ended: str = "the kernel stopped before the agent finished"   # an early end, on this target


class Console(Protocol):
    """One running kernel's console, as a target (kernellab.targets) hands it back."""
    command: list[str]   # what was started, for the record

    def lines(self) -> Iterator[ConsoleLine]:
        """Lines as they arrive, host-timestamped; ends when the kernel is gone, the time
        limit runs out or a stop_in() delay has passed."""
        ...

    def stop_in(self, seconds: float) -> None:
        """The reader has heard what it needs: stop after `seconds` more (0: now)."""
        ...

    @property
    def exit(self) -> Exit:
        """How it ended; valid once lines() is exhausted."""
        ...

    def unavailable(self) -> dict[str, str]:
        """Metrics (or metric prefixes ending in ".") the target could not give, and why:
        boot milestones from a kernel log root may not read."""
        ...

    def facts_after(self) -> dict[str, str]:
        """What the target learned by the end of the run (a real machine's load average)."""
        ...


@dataclass(frozen=True)
class Milestone:
    name: str
    host_s: float | None   # None when the line was replayed from the kernel's log
    printk_s: float | None


def milestones(lines: list[ConsoleLine]) -> list[Milestone]:
    """The first line that matches each milestone."""
    found: dict[str, Milestone] = {}
    for line in lines:
        for name, pattern in MILESTONES:
            if name in found:
                continue
            if pattern is None or pattern.search(line.text):
                printk = line.printk_s
                if name == "first_output" and printk is None:
                    # The decompressor speaks before printk exists; take printk's zero point.
                    printk = next((ln.printk_s for ln in lines if ln.printk_s is not None), None)
                found[name] = Milestone(name, None if line.replayed else line.host_s, printk)
    return [found[name] for name, _ in MILESTONES if name in found]


def memory_line(text: str) -> dict[str, int] | None:
    """Fields of "Memory: 239636K/261624K available (1412K kernel code, ...)" in KiB."""
    m = _MEMORY.search(text)
    if not m:
        return None
    fields = {"available": int(m.group(1)), "total": int(m.group(2))}
    for amount, label in _MEMORY_FIELD.findall(m.group(3)):
        fields[label.strip().replace(" ", "_").replace("-", "_")] = int(amount)
    return fields


def is_panic(text: str) -> bool:
    return PANIC.search(text) is not None


def initcalls(lines: list[ConsoleLine]) -> dict[str, int]:
    """Function -> microseconds, from a boot with `initcall_debug` (printk's own clock)."""
    found: dict[str, int] = {}
    for line in lines:
        m = _INITCALL.search(line.text)
        if m:
            found[m.group(1)] = found.get(m.group(1), 0) + int(m.group(3))
    return found
