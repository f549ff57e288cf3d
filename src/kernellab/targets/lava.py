"""A LAVA job's log as a target: the board's console, replayed from the log the lab kept.

A LAVA job log (`lavacli jobs logs --raw JOB`, or log.yaml from the job's page) is a YAML
list of entries, one per line the dispatcher logged:

    - {"dt": "2024-05-02T10:00:01.123456+00:00", "lvl": "info", "msg": "start: 1 tftp-deploy"}
    - {"dt": "2024-05-02T10:00:09.654321+00:00", "lvl": "target", "msg": "[    0.000000] Linux version ..."}

`lvl: target` entries are the board's serial console, one line each; the others are the
dispatcher's own (info, debug, results, ...), whose `msg` may be a dict. A dispatcher run
alone (`lava-run`, no server) prints the same entries on its standard error without the
list's `- `: the worker adds it when it sends them (lava_common.log.sender), and the
server keeps the lines as sent (output.yaml). Such a stream is read as the server's log. The console is
replayed through the same measurement session as a live boot, so record framing, CRCs and
verdicts apply unchanged; its host time is seconds since the log's first entry.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import LabError
from ..guest.console import ConsoleLine
from . import Capabilities, Exit, Target, TargetInfo, TargetOptions, Want, registry

TIMING = "the board's own clock, read back from a LAVA job's console log (a hardware figure, noisy)"
HOW_TO_GET = "download it with `lavacli jobs logs --raw JOB > log.yaml` or as log.yaml from the job's page"

# Where a log names its job: the dispatcher's per-job directories, <dir>/<prefix><job id>/
# (lava_dispatcher.job.Job.mkdtemp), in the deploy's "saving as" and the final cleanup lines.
# A multinode job's parts are numbered JOB.N.
_JOB_DIR = (re.compile(r"/[^/\s]*?(\d+(?:\.\d+)?)/tftp-deploy-"),
            re.compile(r"/dispatcher/tmp/[^/\s]*?(\d+(?:\.\d+)?)(?:/|$)"))
_DOWNLOADING = re.compile(r"^downloading (\S+)")
# A firmware's terminal reset (SeaBIOS: ESC c, ESC [?7l, ESC [2J) left in front of the
# kernel's first line on a QEMU device, its ESC bytes dropped by the dispatcher's log, and
# sometimes the firmware's own "Booting from ROM.." before it: the screen was cleared, so
# nothing before the clear is on that line, and its printk time must be its first word.
_BIOS_RESET = re.compile(r"^.{0,200}?\[2J(?=\[\s*[0-9]{1,10}\.[0-9]{1,9}\])")


# A kernellab job's log is a few megabytes (its console and the dispatcher's lines); a
# file far larger is no such log, and would take the memory of many times its size.
MAX_LOG_BYTES = 64 * 2**20


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """Safe loading (libyaml's when there: logs run to megabytes). Dispatchers that ran on
    Python 2 tagged some strings `!!python/unicode`; they are plain strings."""


_Loader.add_constructor("tag:yaml.org,2002:python/unicode", lambda loader, node: loader.construct_scalar(node))


class _Alias(Exception):
    """A node the document reaches twice: an alias (*name) of an anchored one."""


def _load(text: str) -> Any:
    """The document, composed and checked before it is built: LAVA writes each entry on
    its own, so a log has no aliases, and an alias bomb ("billion laughs") would expand a
    few lines into gigabytes as soon as anything walks it."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_aliases(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_aliases(root: yaml.Node) -> None:
    # Each alias is the very node object it names: a node met twice is an alias. Depth
    # first without recursion (libyaml bounds the nesting, this walk need not rely on it).
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            raise _Alias()
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            todo.extend(item for pair in node.value for item in pair)


@dataclass(frozen=True)
class Entry:
    t: float    # seconds since the log's first entry
    lvl: str
    msg: Any    # a string, or for some dispatcher entries (results) a dict


@dataclass(frozen=True)
class LavaLog:
    path: Path
    entries: list[Entry]

    def console(self) -> list[ConsoleLine]:
        return [ConsoleLine(e.t, _BIOS_RESET.sub("", e.msg, count=1)) for e in self.entries
                if e.lvl == "target" and isinstance(e.msg, str)]

    def job_id(self) -> str | None:
        """The job's number as the dispatcher's paths name it, when the log has them."""
        for e in self.entries:
            if isinstance(e.msg, str) and e.lvl != "target":
                for pattern in _JOB_DIR:
                    m = pattern.search(e.msg)
                    if m:
                        return m.group(1)
        return None

    def downloads(self) -> list[str]:
        """The URLs the job's deploy downloaded (kernel, ramdisk, ...)."""
        return [m.group(1) for e in self.entries if e.lvl != "target" and isinstance(e.msg, str)
                for m in [_DOWNLOADING.match(e.msg)] if m]

    def errors(self) -> list[str]:
        """What the dispatcher said went wrong (a job that ended before the agent did)."""
        return [str(e.msg) for e in self.entries if e.lvl in ("error", "exception")]


def read_log(path: Path) -> LavaLog:
    """The log's entries; a file that is no LAVA job log is one LabError saying so."""
    not_a_log = f"{path} is not a LAVA job log (a YAML list of {{dt, lvl, msg}} entries)"
    text = _as_list(_read_text(path))
    try:
        data = _load(text)
    except _Alias:
        raise LabError(f"{not_a_log}: it has YAML aliases (*name), which LAVA never writes and which can expand "
                       f"a small file into gigabytes; {HOW_TO_GET}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise LabError(f"{not_a_log}: it is not YAML{at}; {HOW_TO_GET}") from None
    except (ValueError, OverflowError) as exc:   # a YAML timestamp or number out of range (2024-13-45)
        raise LabError(f"{not_a_log}: it holds a value YAML cannot represent ({exc}); {HOW_TO_GET}") from None
    if not isinstance(data, list) or not data:
        raise LabError(f"{not_a_log}: {HOW_TO_GET}")
    entries, start = [], None
    for i, item in enumerate(data, start=1):
        if not isinstance(item, dict) or not {"dt", "lvl", "msg"} <= item.keys():
            raise LabError(f"{not_a_log}: entry {i} is not a {{dt, lvl, msg}} mapping; {HOW_TO_GET}")
        dt = _timestamp(item["dt"])
        if dt is None:
            raise LabError(f"{not_a_log}: entry {i} has no ISO 8601 time in dt ({item['dt']!r}); {HOW_TO_GET}")
        if start is None:
            start = dt
        if dt < start:   # the dispatcher logs in order: a console line before the job began is forged
            raise LabError(f"{not_a_log}: entry {i} is dated {item['dt']}, before the log's first entry; {HOW_TO_GET}")
        entries.append(Entry((dt - start).total_seconds(), str(item["lvl"]), item["msg"]))
    log = LavaLog(path, entries)
    if not log.console():
        raise LabError(f"{path}: the job logged no console output (no 'target' entries): it never reached "
                       "the board's kernel, so there is nothing to import; see the job's errors in LAVA")
    return log


def _read_text(path: Path) -> str:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise LabError(f"cannot read the LAVA job log {path}: {exc.strerror}") from None
    if len(raw) > MAX_LOG_BYTES:
        raise LabError(f"{path} is larger than {MAX_LOG_BYTES // 2**20} MiB, far more than a LAVA job log of a "
                       f"kernellab job: is it the right file? {HOW_TO_GET}")
    return raw.decode(errors="replace")


def _as_list(text: str) -> str:
    """A dispatcher's own stream (each line one {dt, lvl, msg} flow mapping) as the server
    stores it: each line an item of one list, so that a YAML error's line number is still
    the file's. Anything else is left to the YAML parser as it is."""
    if not text.lstrip().startswith("{"):
        return text
    return "".join(f"- {line}\n" if line.strip() else "\n" for line in text.splitlines())


def _timestamp(value: object) -> datetime.datetime | None:
    """LAVA writes dt quoted (a string); a log that went through another YAML tool may
    carry it as a YAML timestamp. Older dispatchers wrote no zone: their times are UTC."""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime.datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


# A board lab's device: it booted a built kernel with the agent as init; kernellab reads the
# job's log afterwards (`kernellab lava-job`, then `kernellab import-lava`), it starts nothing.
# Its workloads run from the userland segment of the job's ramdisk, as in a QEMU guest, but
# the board has no disk kernellab attaches and no link from this machine (registry.refusal).
CAPABILITIES = Capabilities(boots_kernels=True, measures_running=False, deterministic=False, live=False,
                            machine="the board")


class LavaSite:
    """--target lava:DEVICE-TYPE: named so that a command which would boot there says
    where LAVA's boots go instead (registry.refusal)."""
    name = "lava"
    machine = None

    def __init__(self, spec: str, options: TargetOptions):
        self.spec = spec
        self.capabilities = CAPABILITIES

    def target(self, want: Want, log: Callable[[str], None]) -> Target:
        registry.check(self.spec, self.capabilities, registry.Ask(live=True))
        raise AssertionError("unreachable")


class LavaLogTarget:
    """One LAVA job's board, as its log saw it: boots nothing, replays what was logged."""
    name = "lava"
    capabilities = CAPABILITIES

    def __init__(self, log: LavaLog, device_type: str, job_id: str):
        self.log, self.device_type, self.job_id = log, device_type, job_id

    def describe(self, mode: str) -> TargetInfo:
        return TargetInfo(f"LAVA device {self.device_type}",
                          {"device_type": self.device_type, "job_id": self.job_id, "log": str(self.log.path)},
                          TIMING)

    @contextmanager
    def start(self, kernel: Path | None, agent: Path | None, cmdline: str, mode: str,
              timeout_s: float) -> Iterator[LavaLogConsole]:
        # The kernel, agent and command line were the job's; the time limit was LAVA's.
        yield LavaLogConsole(self.log, ["lava-job", self.job_id, "--device-type", self.device_type,
                                        "--log", str(self.log.path)])


class LavaLogConsole:
    def __init__(self, log: LavaLog, command: list[str]):
        self.log, self.command = log, command
        self.stop_at = float("inf")   # on the log's clock
        self._last = 0.0

    def lines(self) -> Iterator[ConsoleLine]:
        for line in self.log.console():
            if line.host_s >= self.stop_at:
                return
            self._last = line.host_s
            yield line

    def stop_in(self, seconds: float) -> None:
        # What a live console would still have shown in that time, on the log's clock.
        self.stop_at = min(self.stop_at, self._last + seconds)

    @property
    def exit(self) -> Exit:
        # LAVA's own errors explain a console that ends before the agent's end record.
        return Exit(0, False, "\n".join(self.log.errors()), self._last,
                    ended="the LAVA job's console log ended before the agent finished")

    def unavailable(self) -> dict[str, str]:
        return {}

    def facts_after(self) -> dict[str, str]:
        return {}


registry.register("lava:", LavaSite, CAPABILITIES, "lava:DEVICE-TYPE")
