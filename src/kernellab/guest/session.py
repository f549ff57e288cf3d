"""One measurement session: read a booted kernel's console and turn it into what the lab
stores. Agent records become samples, "not available" notices and facts about the run;
the console itself gives the boot milestones, the "Memory:" line and initcall times; and
the session decides the verdict: ok, panic, timeout, incomplete, coarse-clock, or
damaged records.

The session tells the console when it has heard enough (the agent's end record, a
panic's backtrace, the kernel's last words), and hands every sample to its sink the
moment it is read, so that whatever stops the boot loses nothing already measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from ..agent.version import check_hello
from ..errors import LabError
from ..metrics.catalog import describe
from .console import (
    INITRAMFS_FAILED,
    MILESTONES,
    Console,
    ConsoleLine,
    Exit,
    initcalls,
    is_panic,
    memory_line,
    milestones,
)
from .records import Record, RecordStream
from .vulnerabilities import PREFIX as VULNERABILITY
from .workloads import Reader as WorkloadReader

# After the agent's last record the kernel powers off by itself; after a panic, let the
# backtrace reach the log before stopping.
EXIT_GRACE_S = 5.0
PANIC_GRACE_S = 1.0
# The kernel's last words on the agent's reboot (kernel/reboot.c). Some machines ignore
# the reset request (QEMU 7.2's bamboo keeps running after the 440 kernel's DBCR0 system
# reset), and would spin until the grace ran out: after this line there is nothing left
# to read.
FINAL_LINE = re.compile(r"^reboot: (Restarting system|Power down|System halted)")
# A guest clock that ticks in jiffies cannot time a 2 ms interval.
COARSE_CLOCKSOURCES = ("jiffies", "refined-jiffies")
# The kernel's word when a sysctl.KEY=VALUE boot parameter did not take (fs/proc/proc_sysctl.c).
SYSCTL_FAILED = re.compile(r"Failed to set sysctl parameter '([^']*)'")

STATUSES = ("ok", "panic", "timeout", "incomplete", "coarse-clock", "damaged", "bad-sysctl",
            "agent-mismatch", "interrupted", "lost")


@dataclass(frozen=True)
class Sample:
    metric: str
    unit: str
    rep: int
    iters: int
    value: float
    seq: int | None = None  # the agent record's sequence number; None for console metrics


class Sink(Protocol):
    """Where a session puts what it reads, as it reads it (the lab's store)."""
    def sample(self, sample: Sample) -> None: ...
    def unavailable(self, metric: str, reason: str) -> None: ...
    def console(self, text: str) -> None: ...   # one line of the console log, as log_line writes it


class Watcher(Protocol):
    """Who follows a boot as it happens (the progress display)."""
    def milestone(self, name: str) -> None: ...
    def metric(self, name: str) -> None: ...


class _Unwatched:
    def milestone(self, name: str) -> None:
        pass

    def metric(self, name: str) -> None:
        pass


@dataclass
class SessionResult:
    status: str
    reason: str
    lines: list[ConsoleLine] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    agent_version: int | None = None
    clocksource: str | None = None
    vulnerabilities: dict[str, str] = field(default_factory=dict)
    exit: Exit | None = None

    @property
    def console_log(self) -> str:
        return "".join(log_line(line) for line in self.lines)


def log_line(line: ConsoleLine) -> str:
    """A console line as the run's console log keeps it."""
    return f"[kernel log] {line.text}\n" if line.replayed else f"[host {line.host_s:9.6f}] {line.text}\n"


class Session:
    def __init__(self, sink: Sink, watcher: Watcher | None = None, workloads: WorkloadReader | None = None) -> None:
        """`workloads`: what reads the run's workloads back (None: it has none)."""
        self.sink = sink
        self.watcher = watcher or _Unwatched()
        self.workloads = workloads
        self.stream = RecordStream()
        self.result = SessionResult("incomplete", "")
        self.rebooted = False
        self._ahead = [(name, pattern) for name, pattern in MILESTONES]   # milestones not yet reached
        self._early: set[str] = set()   # console samples stored when their line arrived

    def read(self, console: Console) -> SessionResult:
        """Reads the console to its end. A KeyboardInterrupt passes through: what was read
        before it is already in the sink."""
        r = self.result
        for line in console.lines():
            self._take(line, console)
        r.exit = console.exit
        r.records, r.rejected = self.stream.records, self.stream.rejected
        self._verdict(console.exit)
        if self.workloads is not None:
            self.workloads.finish(r.reason or r.status)
        self.store_console_samples()
        return r

    def store_console_samples(self) -> None:
        """What the console said (milestones, the Memory: line, initcalls) and was not
        stored as it arrived: at the end of a boot, or when it is cut short."""
        for sample in console_samples(self.result.lines):
            if sample.metric not in self._early:
                self._early.add(sample.metric)
                self.sink.sample(sample)

    def _take(self, line: ConsoleLine, console: Console) -> None:
        r = self.result
        r.lines.append(line)
        self.sink.console(log_line(line))
        if line.replayed:
            return  # the kernel's past (a running machine's log): milestones only
        self._milestone(line)
        if FINAL_LINE.match(line.message):
            self.rebooted = True
            console.stop_in(0)
        if r.status != "incomplete":
            return  # the verdict is in (a panic's backtrace is still being logged)
        if is_panic(line.text):
            r.status, r.reason = "panic", line.message.strip()
            console.stop_in(PANIC_GRACE_S)
            return
        unpacked = INITRAMFS_FAILED.search(line.text)
        if unpacked and self.workloads is not None:
            # The agent comes first and is whole; the workloads' programs after it may not be.
            self.workloads.damaged(f"the kernel could not unpack all of the initramfs ({unpacked.group(1).strip()}), "
                                   "so the workloads' programs may be missing in the guest")
        failed = SYSCTL_FAILED.search(line.text)
        if failed:
            r.status = "bad-sysctl"
            r.reason = (f"the kernel did not set sysctl {failed.group(1)}: {line.message.strip()}; "
                        "check the name and value in the variant")
            console.stop_in(0)
            return
        try:
            # An intact record no kernellab agent sends (records.InvalidRecord) stops the
            # run as a different agent would: its numbers cannot be trusted.
            record = self.stream.feed(line.text)
            if record is None:
                return
            self._record(record)
        except LabError as exc:
            r.status, r.reason = "agent-mismatch", str(exc)
            console.stop_in(0)
            return
        if self.stream.ended:
            r.status = "ok"
            console.stop_in(EXIT_GRACE_S)

    def _milestone(self, line: ConsoleLine) -> None:
        """Stores and tells the watcher each milestone this line reaches (the first line is
        two: first output, and often the Linux version): a boot cut short keeps them."""
        reached = [name for name, pattern in self._ahead if pattern is None or pattern.search(line.text)]
        self._ahead = [(name, pattern) for name, pattern in self._ahead if name not in reached]
        for name in reached:
            times = [(f"boot.{name}.host", line.host_s), (f"boot.{name}.printk", line.printk_s)]
            for metric, value in times:
                # first_output's printk time, when the decompressor spoke first, is known
                # only from a later line: it is stored at the end (store_console_samples).
                if value is not None:
                    self._early.add(metric)
                    self.sink.sample(Sample(metric, "s", 0, 1, value))
            self.watcher.milestone(name)

    def _record(self, record: Record) -> None:
        r, f = self.result, record.fields
        if record.type == "hello":
            check_hello(f)
            r.agent_version = int(f["v"])
        elif record.type == "meta" and f.get("key") == "clocksource":
            r.clocksource = f.get("value", "")
        elif record.type == "meta" and f.get("key", "").startswith(VULNERABILITY):
            r.vulnerabilities[f["key"].removeprefix(VULNERABILITY)] = f.get("value", "")
        elif record.type == "sample":
            if r.clocksource in COARSE_CLOCKSOURCES and describe(f["metric"], f["unit"]).clock == "guest":
                return  # a tick-resolution timing is not a measurement
            self.sink.sample(Sample(f["metric"], f["unit"], int(f["rep"]), int(f["iters"]),
                                    float(f["value"]), record.seq))
            self.watcher.metric(f["metric"])
        elif record.type == "na":
            self.sink.unavailable(f.get("metric", "?"), f.get("reason", "not available"))
        elif record.type.startswith("wl_") and self.workloads is not None:
            self.workloads.record(record)
        elif record.type == "meta" and f.get("key") == "workloads" and self.workloads is not None:
            self.workloads.finish(f"the agent could not read its workloads file: {f.get('value', '')}")

    def _verdict(self, exit: Exit) -> None:
        r = self.result
        if r.status == "incomplete":
            if exit.timed_out:
                r.status, r.reason = "timeout", f"no end record after {exit.wall_s:.0f} s; killed"
            elif self.rebooted:
                r.reason = "the guest rebooted before the agent finished"
            else:
                last = exit.stderr.strip().splitlines()[-1:] or [f"exit code {exit.code}"]
                r.reason = f"{exit.ended} ({last[0]})"
        elif r.status == "ok" and r.clocksource in COARSE_CLOCKSOURCES:
            r.status = "coarse-clock"
            r.reason = (f"the guest kernel timed with the {r.clocksource} clocksource (tick resolution): "
                        "its timings were discarded; give it a reference clock (e.g. CONFIG_ACPI for "
                        "the HPET and PM timer on x86) or use --mode icount")
        elif r.status == "ok" and self.stream.rejected:
            r.status = "damaged"
            r.reason = (f"damaged agent records ({len(self.stream.rejected)} problem(s), first: "
                        f"{self.stream.rejected[0]}); the intact records were kept")


def console_samples(lines: list[ConsoleLine]) -> list[Sample]:
    """Boot milestones, the "Memory:" line and initcall times, read off the console."""
    out = []
    for m in milestones(lines):
        if m.host_s is not None:
            out.append(Sample(f"boot.{m.name}.host", "s", 0, 1, m.host_s))
        if m.printk_s is not None:
            out.append(Sample(f"boot.{m.name}.printk", "s", 0, 1, m.printk_s))
    for line in lines:
        fields = memory_line(line.text)
        if fields:
            out += [Sample(f"mem.kernel.{key}", "KiB", 0, 1, kib) for key, kib in fields.items()]
            break
    for function, usecs in initcalls(lines).items():
        out.append(Sample(f"boot.initcall.{function}", "us", 0, 1, usecs))
    return out
