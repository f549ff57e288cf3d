"""A run's workloads (kernellab.workloads: real programs as data), as the agent runs them
and as the host reads them back.

The host writes one file for the agent (`encode`): per workload its label, timeout, whether
it needs a disk (needs.disk_mib), whether its client runs on the host (needs.network =
"host"), the stream to capture, the files to write into its directory, its argv (none for
one whose client is the host's) and its server's (with how the agent knows it is ready and
how it stops it), NUL-separated, so that an argv word may hold any character but NUL and
nothing goes through a shell. The workload's directory is the agent's to choose: "{workdir}"
stays in the words and the files, and the agent fills it in: on the file system of the disk QEMU
attaches for it (wall mode: targets.qemu) for one that needs a disk, else on the guest's
tmpfs; on a running machine, under the agent's own /tmp directory. Where a guest has no
file system for it, the agent does not run it and says why (status no_disk). Under QEMU
the file is /kernellab/workloads in the initramfs, the user's own programs (`binaries`) in
/kernellab/bin beside it; on a running machine it is a file in kernellab's cache that
KL_WORKLOADS names, with bin/ beside it.

The agent frames each program's output into t=wl_begin, t=wl_out and t=wl_end records, its
server's into t=wl_srv (agent/workload.c). For a workload that talks to the host, the agent
says t=wl_ready once its server is ready, and `Reader` runs the workload's command here, on
the host, against the server where the run's link says the host reaches it (a QEMU guest's
forward, a machine's address: the target's, handed in as `host_link`), until the agent's
t=wl_end; that command's output is the workload's. Where the guest has no network device
for the link, the agent does not run it (status no_link). `Reader` reassembles each
workload's output, parses it with the workload's parser and hands its metrics, named
WORKLOAD.METRIC, to the session's sink, or says why each is not available: the program did
not start, exited non-zero, ran past its timeout, printed nothing the parser reads, its
server did not start, was not ready in time or died under it, the host's command failed, or
the metric means nothing in the run's mode. The server's output follows the client's in the
run's log.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote_to_bytes

from .. import modes, paths, reaper
from ..errors import LabError
from ..metrics import catalog
from ..workloads import HOST_WAIT_S, Instance, ResolvedMetric, binary_paths
from .records import Record

# Where the host reaches a TCP port of the machine the run's workloads run on, as (address,
# port); a LabError where the run has no link to it. The target's (targets.HostLinked): a
# QEMU guest's forward on 127.0.0.1, a real machine's address.
HostLink = Callable[[int], tuple[str, int]]

MAGIC = "kernellab-workloads 5"
# Where the initramfs holds them (agent/workload.h: WORKLOADS_PID1_FILE).
INITRAMFS_DIR = "kernellab"
INITRAMFS_FILE = f"{INITRAMFS_DIR}/workloads"
WORKDIR = "{workdir}"   # the agent fills it in
LOG_KIND = "workload"   # the run's log of each workload's raw output: kind "workload LABEL"
# errno values the agent reports for a program that could not start.
_ENOENT, _EACCES, _ENOEXEC = 2, 13, 8
# What a run's log puts between the client's output and its server's.
SERVER_LOG_HEADING = "--- the server's output ({program}) ---\n"
# The agent matches a ready_line with POSIX extended regular expressions (regcomp): Python's
# own syntax would not mean there what it means here.
_PYTHON_ONLY = re.compile(r"\\[dDAZ]|\(\?|[*+?}]\?")


def metric_name(inst: Instance, m: ResolvedMetric) -> str:
    """WORKLOAD.METRIC: the name every report, the gate and the store know it by."""
    return f"{inst.workload.name}.{m.name}"


def check(instances: Sequence[Instance]) -> None:
    """What any run refuses of these workloads, in one line each before anything is built:
    two instances that would give the same metric names, a server's ready_line the agent's
    POSIX regular expressions would read otherwise than Python's."""
    owner: dict[str, Instance] = {}
    for inst in instances:
        for m in inst.metrics():
            name = metric_name(inst, m)
            first = owner.setdefault(name, inst)
            if first is not inst:
                raise LabError(f"--workload {first.label} and --workload {inst.label} both give {name}: give "
                               "them parameters that name their metrics apart (fio's {rw} does), or run them in "
                               "two compares")
        server = inst.workload.server
        if server is not None and _PYTHON_ONLY.search(server.ready_line):
            raise LabError(f"workload {inst.label}: its server's ready_line {server.ready_line!r} is matched in the "
                           "guest by POSIX extended regular expressions: write [0-9] for \\d, use no (?...) group, "
                           "no lazy quantifier, ^ and $ for \\A and \\Z")


def check_host_programs(instances: Sequence[Instance]) -> None:
    """Refuse, in one line before anything is built, a workload that talks to the host
    whose command's program this machine does not have: the host runs it."""
    for inst in instances:
        if not inst.workload.client_on_host:
            continue
        program = inst.argv(WORKDIR)[0]
        found = os.access(program, os.X_OK) if "/" in program else shutil.which(program) is not None
        if not found:
            packages = ", ".join(inst.workload.packages)
            install = f"install Debian's {packages}" if packages else f"install {program} or put it on PATH"
            raise LabError(f"workload {inst.label} runs {program} on this machine, the host's side of its link, and "
                           f"{program} is not installed here: {install}")


def _named(inst: Instance, label: str) -> str:
    """The label with the workload's name in front, unless it starts with the program's own
    ("redis GET: ...", "perf bench ...": the first part of the workload's name): never
    "redis: redis GET"."""
    program = inst.workload.name.split("-")[0]
    first = re.split(r"[\s:,]", label, maxsplit=1)[0]
    return label if first == program else f"{inst.workload.name}: {label}"


def catalog_metrics(instances: Sequence[Instance]) -> list[catalog.Metric]:
    """The instances' metrics as the catalog describes them."""
    out = []
    for inst in instances:
        for m in inst.metrics():
            out.append(catalog.Metric(metric_name(inst, m), _named(inst, m.label), m.unit,
                                      "lower" if m.better == "lower" else "higher", catalog.WORKLOAD_GROUP,
                                      "guest", "workload", m.modes, m.needs))
    return out


def register(instances: Sequence[Instance]) -> None:
    """The instances' metrics into the catalog, for every report and the gate to know."""
    try:
        catalog.add_workload_metrics(catalog_metrics(instances))
    except ValueError as exc:
        raise LabError(f"--workload: {exc}: rename the workload's metric") from None


@dataclass(frozen=True)
class Packages:
    """Where a run's programs came from: in a guest, the Debian packages kernellab assembled
    its userland from (kernellab.userland); on a machine that runs its own programs, the
    package its dpkg says owns each one (targets.running). Each package's version, the
    package each program (an argv[0]) came from, and why a program's version is not known."""

    versions: Mapping[str, str] = field(default_factory=dict)
    programs: Mapping[str, str] = field(default_factory=dict)
    unknown: Mapping[str, str] = field(default_factory=dict)   # program -> why no package versions it
    # program -> the compiler kernellab built it with from its package, a Debian source
    # package (kernellab.staticbuild): "powerpc-linux-gnu-gcc 12.2.0"
    built: Mapping[str, str] = field(default_factory=dict)


def machine_programs(instances: Sequence[Instance]) -> tuple[list[str], dict[str, str]]:
    """The instances' programs (argv[0]) as a machine that runs its own sees them: those to
    ask its package manager about, as the agent finds them (in PATH), and the workloads' own
    (`binaries`, found first; a file in {workdir}), with why no package says their version."""
    asked: list[str] = []
    own: dict[str, str] = {}
    for inst in instances:
        program = inst.argv(WORKDIR)[0]
        if program in binary_paths(inst.loaded):
            own[program] = "the workload file's own program (binaries)"
        elif WORKDIR in program:
            own[program] = "a file the workload writes"
        elif program not in asked:
            asked.append(program)
    return asked, own


@dataclass(frozen=True)
class Provenance:
    """What every report says of a workload it shows figures of: the program, its version
    as its Debian package says it, the package it came from when kernellab assembled the
    guest's userland, the argv it ran and the target it ran on. Stored with each run
    (Store.add_workload) and carried by compare, sweep and bisect results."""

    workload: str
    label: str                           # the spec it was asked as: fio:bs=4k
    origin: str                          # its workload file
    program: str                         # argv[0]
    argv: tuple[str, ...]                # "{workdir}" stands for the directory the agent gives it
    packages: tuple[str, ...]            # the Debian packages the workload names
    version: str | None = None           # the program's, from its package; None: not known
    package: str | None = None           # the package the program came from (the guest's userland, the machine's dpkg)
    package_versions: Mapping[str, str] = field(default_factory=dict)   # of `packages`, those the userland had
    target: str | None = None            # qemu, local, ssh://HOST, ...; None: a run stored before it was said
    params: Mapping[str, str] = field(default_factory=dict)
    fixed_work: bool = False
    why: str = ""
    version_unknown: str = ""            # why `version` is None, when that was said
    # Its command ran on the host, kernellab's machine, against its server on `target`
    # (needs.network = "host"): the program and version are the host's.
    command_on_host: bool = False
    # The compiler kernellab built the program with, statically, from `package`, Debian's
    # source package (kernellab.staticbuild); "": it ran as its package or machine has it.
    built_with: str = ""

    @classmethod
    def of(cls, inst: Instance, target: str | None = None, guest: Packages = Packages()) -> Provenance:
        """The provenance of `inst` run on `target`, whose programs `guest` describes."""
        argv = inst.argv(WORKDIR)
        package = guest.programs.get(argv[0])
        version = guest.versions.get(package) if package else None
        return cls(inst.workload.name, inst.label, str(inst.loaded.origin), argv[0], tuple(argv),
                   tuple(inst.workload.packages), version, package,
                   {p: guest.versions[p] for p in inst.workload.packages if p in guest.versions}, target,
                   dict(inst.params), inst.workload.fixed_work, inst.workload.why,
                   "" if version else guest.unknown.get(argv[0], ""), inst.workload.client_on_host,
                   guest.built.get(argv[0], "") if package else "")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        """A stored or reported provenance; one stored before a field was recorded lacks it."""
        argv = tuple(data.get("argv") or (data["program"],))
        return cls(data["workload"], data["label"], str(data.get("origin", "")), data["program"], argv,
                   tuple(data.get("packages") or ()), data.get("version"), data.get("package"),
                   dict(data.get("package_versions") or {}), data.get("target"), dict(data.get("params") or {}),
                   bool(data.get("fixed_work", False)), data.get("why", ""), data.get("version_unknown", ""),
                   bool(data.get("command_on_host", False)), str(data.get("built_with") or ""))

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "label": self.label, "origin": self.origin, "program": self.program,
                "version": self.version, "package": self.package, "packages": list(self.packages),
                "package_versions": dict(self.package_versions), "argv": list(self.argv), "target": self.target,
                "params": dict(self.params), "fixed_work": self.fixed_work, "why": self.why,
                "version_unknown": self.version_unknown, "command_on_host": self.command_on_host,
                **({"built_with": self.built_with} if self.built_with else {})}

    def program_version(self) -> str:
        """The program, its version (or why it is not known) and the Debian package it came
        from: the words every view gives them in (this line, a cross-check's table)."""
        unknown = f": {self.version_unknown}" if self.version_unknown else ""
        version = f" {self.version}" if self.version else f" (version not known{unknown})"
        if self.built_with:
            return (f"{self.program}{version}, built statically by kernellab from Debian's source package "
                    f"{self.package} with {self.built_with}")
        source = f" from Debian's {self.package}" if self.package else ""
        return f"{self.program}{version}{source}"

    def line(self) -> str:
        """One line of a report's header: which program, which version from where, the
        command line, and, for a workload without a fixed amount of work, that its figures
        are not reproducible under icount and why (nothing more for one with fixed work)."""
        where = f" on {self.target}" if self.target else ""
        if self.command_on_host:
            where = f" on this machine, the host, against its server{where}"
        command = shlex.join(self.argv)
        return f"workload {self.label}: {self.program_version()}{where}: {command}{self._unreproducible()}"

    def _unreproducible(self) -> str:
        if self.fixed_work:
            return ""
        return "; not reproducible under icount" + (f": {self.why}" if self.why else "")


def provenances(runs: Iterable[Sequence[Mapping[str, Any]]]) -> list[Provenance]:
    """One provenance per workload, from the first of `runs` (each Store.run_workloads) that
    ran it, in the order they ran."""
    found: dict[str, Provenance] = {}
    for workloads in runs:
        for w in workloads:
            if w["label"] not in found:
                found[w["label"]] = Provenance.from_dict(w["provenance"])
    return list(found.values())


def encode(instances: Sequence[Instance]) -> bytes:
    """The file the agent reads (agent/workload.c)."""
    words = [MAGIC, str(len(instances))]
    for inst in instances:
        w = inst.workload
        files = inst.files(WORKDIR)
        argv = inst.argv(WORKDIR)
        # The command of one that talks to the host runs there (Reader): the agent gets no argv.
        host = w.client_on_host
        words += [inst.label, str(max(1, round(w.run.timeout_s * 1000))), "1" if w.needs.disk_mib else "0",
                  "1" if host else "0", str(w.needs.vcpus), str(w.needs.memory_mib), w.output.stream,
                  str(len(files))]
        for name, content in files.items():
            words += [name, content]
        words += ["0"] if host else [str(len(argv)), *argv]
        words += _server_words(inst)
    bad = next((word for word in words if "\0" in word), None)
    if bad is not None:
        raise LabError(f"a workload's argv or file holds a NUL character ({bad[:40]!r}): remove it")
    return b"".join(word.encode() + b"\0" for word in words)


def _server_words(inst: Instance) -> list[str]:
    """The server's part of a workload in the agent's file: "0" for none."""
    server, argv = inst.workload.server, inst.server_argv(WORKDIR)
    if server is None or argv is None:
        return ["0"]
    ready = ["line", server.ready_line] if server.ready_line else ["port", str(server.ready_port)]
    return [str(len(argv)), *argv, *ready, str(max(1, round(server.ready_timeout_s * 1000))),
            server.stop_signal, str(round(server.stop_grace_s * 1000))]


def binaries(instances: Sequence[Instance], built: Mapping[str, Path] | None = None) -> dict[str, Path]:
    """The static programs of every instance: the user's own, and those kernellab `built`
    for them (kernellab.staticbuild: file name -> path); file name -> path on the host."""
    out: dict[str, Path] = {}
    found = [*((n, p) for inst in instances for n, p in binary_paths(inst.loaded).items()), *(built or {}).items()]
    for name, path in found:
        if out.setdefault(name, path).resolve() != path.resolve():
            raise LabError(f"two workloads bring a program named {name} ({out[name]} and {path}): rename one")
    return out


def initramfs_files(instances: Sequence[Instance],
                    built: Mapping[str, Path] | None = None) -> dict[str, tuple[int, bytes]]:
    """The workloads' part of the initramfs: the file the agent reads and its bin/, with the
    programs kernellab `built` for them (file name -> path) beside the user's own."""
    files = {INITRAMFS_DIR: (0o040755, b""), INITRAMFS_FILE: (0o100644, encode(instances)),
             f"{INITRAMFS_DIR}/bin": (0o040755, b"")}
    for name, path in binaries(instances, built).items():
        files[f"{INITRAMFS_DIR}/bin/{name}"] = (0o100755, path.read_bytes())
    return files


def digest(instances: Sequence[Instance]) -> str:
    """What the agent is given for these workloads, as a hash: part of a run's options key."""
    h = hashlib.sha256()
    for name, (mode, data) in sorted(initramfs_files(instances).items()):
        h.update(f"{name}\0{mode}\0".encode() + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


def local_file(instances: Sequence[Instance]) -> Path:
    """The workloads file for an agent run as a program on this machine (KL_WORKLOADS),
    with bin/ beside it, in kernellab's cache, named by its content."""
    files = initramfs_files(instances)
    root = paths.cache_dir("workloads", digest(instances))
    target = root / "workloads"
    if not target.exists():
        for name, (mode, data) in sorted(files.items()):
            relative = name.removeprefix(INITRAMFS_DIR).lstrip("/")
            path = root / relative if relative else root
            if mode & 0o040000:
                path.mkdir(parents=True, exist_ok=True)
            elif relative != "workloads":
                path.write_bytes(data)
                path.chmod(mode & 0o777)
        tmp = root / "workloads.tmp"
        tmp.write_bytes(files[INITRAMFS_FILE][1])
        tmp.replace(target)   # last: a file that exists is a bundle that is whole
    return target


class Sink(Protocol):
    """Where the reader puts metrics (the session's sink)."""
    def sample(self, sample: Any) -> None: ...
    def unavailable(self, metric: str, reason: str) -> None: ...


@dataclass
class Ended:
    """One workload of a run, as it ended: what the lab stores of it."""
    inst: Instance
    # ok, exit, signal, timeout, exec_failed, setup_failed, server_exec_failed, server_port_busy,
    # server_failed, server_not_ready, server_died, no_disk, no_link, too_small (as the agent says),
    # host_exit, host_signal, host_timeout, host_exec_failed, host_not_run (the host's command
    # of one that talks to the host), not_run (the run ended first, or the machine lacked
    # what it needs), unparsed (its output gave none of its metrics)
    status: str
    reason: str              # "" when every metric was read
    elapsed_s: float | None
    output: str              # the raw log: the client's output, then its server's (under a heading)


@dataclass
class _Running:
    inst: Instance
    output: bytearray = field(default_factory=bytearray)
    server: bytearray = field(default_factory=bytearray)

    def log(self) -> str:
        """The client's output, and the server's after it when the workload has one."""
        text = self.output.decode(errors="replace")
        argv = self.inst.server_argv(WORKDIR)
        if argv is None:
            return text
        newline = "\n" if text and not text.endswith("\n") else ""
        return (f"{text}{newline}{SERVER_LOG_HEADING.format(program=argv[0])}"
                f"{self.server.decode(errors='replace')}")


class _HostCommand:
    """The command of a workload that talks to the host, run on this machine against its
    server: in a process group of its own, its output in files, which it can never fill
    as it could a pipe while the console is being read."""

    def __init__(self, inst: Instance, argv: list[str]) -> None:
        stream = inst.workload.output.stream
        self.program = argv[0]
        self.parsed = tempfile.TemporaryFile()   # the stream its parser reads
        self.other = tempfile.TemporaryFile()    # the rest: what a failure's reason quotes
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=self.parsed if stream != "stderr" else self.other,
                                         stderr=self.parsed if stream != "stdout" else self.other,
                                         start_new_session=True)
        except OSError:
            self.close()
            raise
        # A kernellab killed outright leaves it to the next command's reaper.
        self.registration = reaper.register(self.proc.pid, f"{Path(self.program).name} (a workload's host side)")

    def end(self, wait_s: float) -> tuple[str, int]:
        """How it ended, waited for `wait_s` at most: ok, host_exit (its status),
        host_signal (the signal) or host_timeout (killed then)."""
        try:
            code = self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return "host_timeout", 0
        self.registration.unlink(missing_ok=True)
        if code < 0:
            return "host_signal", -code
        return ("host_exit", code) if code else ("ok", 0)

    def kill(self) -> None:
        """It and its group, still running (the leader not yet reaped holds the group's id)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.registration.unlink(missing_ok=True)

    def output(self) -> bytes:
        self.parsed.seek(0)
        return self.parsed.read()

    def said(self) -> str:
        """Its last line, of what the parser does not read, else of what it does."""
        for stream in (self.other, self.parsed):
            stream.seek(0)
            lines = [line for line in stream.read().decode(errors="replace").splitlines() if line.strip()]
            if lines:
                return lines[-1].strip()[:200]
        return ""

    def close(self) -> None:
        self.parsed.close()
        self.other.close()


class Reader:
    """Reassembles the t=wl_* records of one run into each workload's output, then stores
    its metrics (or why not) through `sink`, and tells `ended` how each workload ended.

    A workload that talks to the host has its command run here, on this machine, once the
    agent says its server is ready (t=wl_ready), against the server at `host_link`; that
    command's output is the workload's, read by its parser; its failure is the workload's,
    after the guest's own."""

    def __init__(self, instances: Sequence[Instance], mode: str, sink: Sink, make_sample: Callable[..., Any],
                 ended: Callable[[Ended], None], where: str = "the guest", debian: bool = True,
                 host_link: HostLink | None = None) -> None:
        self.instances, self.mode, self.sink = list(instances), mode, sink
        self.make_sample, self.ended, self.where = make_sample, ended, where
        self.debian = debian   # whether the machine takes Debian's package names
        self.host_link = host_link
        self.running: dict[int, _Running] = {}
        self.hosts: dict[int, _HostCommand | str] = {}   # the host's commands started (str: why it could not)
        self.done: set[int] = set()
        self.damage = ""   # why the workloads' files may be missing, told by the session

    def damaged(self, why: str) -> None:
        """Every workload that fails from now on says why its files may be missing."""
        self.damage = why

    def record(self, record: Record) -> None:
        f = record.fields
        index = int(f["w"])
        if index >= len(self.instances) or index in self.done:
            return   # not one the host asked for, or told twice: nothing to attribute it to
        if record.type == "wl_begin":
            self.running[index] = _Running(self.instances[index])
        elif record.type == "wl_out":
            self.running.setdefault(index, _Running(self.instances[index])).output += unquote_to_bytes(f["data"])
        elif record.type == "wl_srv":
            self.running.setdefault(index, _Running(self.instances[index])).server += unquote_to_bytes(f["data"])
        elif record.type == "wl_ready":
            self._start_host(index)
        elif record.type == "wl_end":
            got = self.running.pop(index, None) or _Running(self.instances[index])
            self.done.add(index)
            if f["status"] == "no_disk":
                self._no_disk(got.inst, f["reason"])
            elif f["status"] == "no_link":
                self._no_link(got.inst, f["reason"])
            elif f["status"] == "too_small":
                self._too_small(got.inst, f["reason"])
            else:
                self._end(got, f["status"], int(f["code"]), int(f["elapsed_ns"]) / 1e9, self.hosts.pop(index, None))

    def finish(self, why: str) -> None:
        """The run is over: each workload that did not end is not available, with why."""
        for index, inst in enumerate(self.instances):
            if index not in self.done:
                got = self.running.pop(index, None)
                output = got.log() if got else ""
                reason = f"the run ended before workload {inst.label} did ({why})"
                self._unavailable(inst, reason)
                self.done.add(index)
                self.ended(Ended(inst, "not_run", reason, None, output))
        self.close()

    def close(self) -> None:
        """The host's commands still running are killed: the run is over (or was stopped)."""
        for host in self.hosts.values():
            if isinstance(host, _HostCommand):
                host.kill()
                host.close()
        self.hosts.clear()

    def _start_host(self, index: int) -> None:
        """The agent says the server of a workload that talks to the host is ready: the
        host's command starts, against it."""
        inst = self.instances[index]
        server = inst.workload.server
        if not inst.workload.client_on_host or server is None or index in self.hosts:
            return
        try:
            if self.host_link is None:
                raise LabError(f"{self.where} gives the host no link to it")
            address, port = self.host_link(server.port)
            self.hosts[index] = _HostCommand(inst, inst.host_argv(address, port))
        except LabError as exc:
            self.hosts[index] = f"the host could not reach the server of {inst.label}: {exc}"
        except OSError as exc:
            self.hosts[index] = self._host_not_started(inst, exc)

    @staticmethod
    def _host_not_started(inst: Instance, exc: OSError) -> str:
        """Why the host's command did not start: not installed here (checked before the run,
        but this machine may have changed since, or be a Dask worker), or its exec's error."""
        program = inst.argv(WORKDIR)[0]
        if exc.errno != _ENOENT:
            return f"{program} could not start on this machine, the host's side of the link ({exc.strerror})"
        packages = ", ".join(inst.workload.packages)
        return (f"{program} is not installed on this machine, the host's side of the link"
                + (f": install Debian's {packages}" if packages else ""))

    def not_run(self, inst: Instance, reason: str) -> None:
        """A workload the run does not give the agent, as the machine lacks what it needs
        (`reason`: "needs ..."): its metrics not available, with why."""
        self._unavailable(inst, reason)
        self.ended(Ended(inst, "not_run", reason, None, ""))

    def _no_disk(self, inst: Instance, why: str) -> None:
        """The agent did not run `inst`: it needs a disk, and the guest's file system for it
        is not there (`why`: the agent's words, as file.* says them)."""
        need = f"needs a disk for its files (needs.disk_mib = {inst.workload.needs.disk_mib})"
        if modes.get(self.mode).deterministic:   # QEMU attaches none: consistent with a metric's `modes`
            reason = (f"{need}, which a guest gets in wall mode only ({modes.DISK_WALL_ONLY}): in {self.mode} "
                      "mode it is not run")
        else:
            reason = f"{need}, and {self.where} has no file system on one: {why}; not run on the tmpfs instead"
        self._unavailable(inst, reason)
        self.ended(Ended(inst, "no_disk", reason, None, ""))

    def _no_link(self, inst: Instance, why: str) -> None:
        """The agent did not run `inst`: it talks to the host, and the guest has no network
        device for the link (`why`: the agent's words)."""
        reason = (f"talks to the host over a network link, and {self.where} has no network device it could bring "
                  f"up for it ({why}): not run")
        self._unavailable(inst, reason)
        self.ended(Ended(inst, "no_link", reason, None, ""))

    def _too_small(self, inst: Instance, why: str) -> None:
        """The agent did not run `inst`: the machine has fewer CPUs or less memory than it
        needs (`why`: "vcpus_N" or "memory_mib_N", what the machine has). The host checks
        first where it can know (experiments.lab); a LAVA board is known only from here."""
        what, _, has = why.rpartition("_")
        need = inst.workload.needs
        if what == "vcpus" and has.isdigit():
            reason = f"needs {need.vcpus} vCPUs, {self.where} has {has}"
        elif what == "memory_mib" and has.isdigit():
            reason = f"needs {need.memory_mib} MiB of memory, {self.where} has {has} MiB"
        else:
            reason = f"needs more of the machine than {self.where} has (the agent said {why!r})"
        self._unavailable(inst, f"{reason}: not run")
        self.ended(Ended(inst, "too_small", f"{reason}: not run", None, ""))

    def _end(self, got: _Running, status: str, code: int, elapsed_s: float,
             host: _HostCommand | str | None = None) -> None:
        inst = got.inst
        host_status, host_reason = self._host_end(got, host) if inst.workload.client_on_host else ("ok", "")
        output = got.log()
        if status != "ok" or host_status != "ok":
            # The guest's failure first: the host's command fails when its server does.
            reason = (self._failure(inst, status, code) + (f"; {self.damage}" if self.damage else "")
                      if status != "ok" else host_reason)
            self._unavailable(inst, reason)
            self.ended(Ended(inst, status if status != "ok" else host_status, reason, elapsed_s, output))
            return
        try:
            parsed = inst.read(got.output.decode(errors="replace"))
        except LabError as exc:
            self._unavailable(inst, str(exc))
            self.ended(Ended(inst, "unparsed", str(exc), elapsed_s, output))
            return
        for m in inst.metrics():
            name = metric_name(inst, m)
            if self.mode not in m.modes:
                self.sink.unavailable(name, f"means something in {' and '.join(m.modes)} mode only (the workload "
                                            f"file says so): in {self.mode} mode it would be no measurement")
            elif m.name in parsed.values:
                self.sink.sample(self.make_sample(name, m.unit, parsed.values[m.name]))
            else:
                self.sink.unavailable(name, parsed.failures.get(m.name, "not in the output"))
        if parsed.failures and not parsed.values:   # the parser read nothing of it
            self.ended(Ended(inst, "unparsed", next(iter(parsed.failures.values())), elapsed_s, output))
        else:
            failed = ", ".join(parsed.failures)
            self.ended(Ended(inst, "ok", f"not read: {failed}" if failed else "", elapsed_s, output))

    def _host_end(self, got: _Running, host: _HostCommand | str | None) -> tuple[str, str]:
        """The host's command of `got`, ended once its server has (waited for HOST_WAIT_S at
        most): its output becomes the workload's; (status, reason) of how it ended."""
        program = got.inst.argv(WORKDIR)[0]
        if host is None:
            return "host_not_run", (f"the host never started {program}: the agent's ready record did not reach it "
                                    "(see the run's console log)")
        if isinstance(host, str):
            return "host_exec_failed", host
        status, code = host.end(HOST_WAIT_S)
        got.output += host.output()
        said = host.said()
        host.close()
        if status == "host_exit":
            return status, f"the host's {program} exited with status {code}" + (f": {said}" if said else "")
        if status == "host_signal":
            return status, f"the host's {program} was killed by signal {code}"
        if status == "host_timeout":
            return status, (f"the host's {program} was still running {HOST_WAIT_S:g} s after its server in "
                            f"{self.where} ended, and was killed")
        return status, ""

    def _unavailable(self, inst: Instance, reason: str) -> None:
        for m in inst.metrics():
            self.sink.unavailable(metric_name(inst, m), reason)

    def _failure(self, inst: Instance, status: str, code: int) -> str:
        if status.startswith("server_"):
            return self._server_failure(inst, status, code)
        program = inst.argv(WORKDIR)[0]
        if status == "exec_failed":
            return self._not_started(inst, program, code)
        if status == "exit":
            return f"{program} exited with status {code} (its output is in the run's log)"
        if status == "signal":
            return f"{program} was killed by signal {code}"
        if status == "timeout" and inst.workload.client_on_host:
            return (f"the server {(inst.server_argv(WORKDIR) or ['?'])[0]} had not ended at the timeout of "
                    f"{code / 1000:g} s (the host's {program} against it) and was killed")
        if status == "timeout":
            return f"{program} ran past its timeout of {code / 1000:g} s and was killed"
        if status == "setup_failed":
            return f"the agent could not set up {inst.label}'s directory or files (errno {code})"
        return f"the agent ended {inst.label} with status {status}"

    def _not_started(self, inst: Instance, program: str, code: int) -> str:
        """Why the program (or the server) did not start: not installed (with the package
        to install), or the errno of its exec."""
        if code == _ENOENT:
            packages = ", ".join(inst.workload.packages)
            if not packages:
                install = ""
            elif self.debian:
                install = f": install Debian's {packages}"
            else:
                install = f": install Debian's {packages}, or its like with {self.where}'s own package manager"
            return f"{program} is not installed on {self.where}{install}"
        what = {_EACCES: "not executable", _ENOEXEC: "not a program this machine runs"}.get(code, f"errno {code}")
        return f"{program} could not start on {self.where} ({what})"

    def _server_failure(self, inst: Instance, status: str, code: int) -> str:
        server, argv = inst.workload.server, inst.server_argv(WORKDIR)
        program = f"the server {argv[0] if argv else '?'}"
        ended = f"was killed by signal {code - 256}" if code >= 256 else f"exited with status {code}"
        if status == "server_exec_failed":
            return self._not_started(inst, program, code)
        if status == "server_port_busy":
            return (f"port {code} on 127.0.0.1 answered before {program} started: another program on {self.where} "
                    "holds it (stop it, or give the workload another port)")
        if status == "server_failed":
            return f"{program} {ended} before it was ready (its output is in the run's log)"
        if status == "server_not_ready" and server is not None:
            how = (f"printed no line matching {server.ready_line!r}" if server.ready_line
                   else f"accepted no connection on port {server.ready_port}")
            return f"{program} {how} within {code / 1000:g} s and was killed (its output is in the run's log)"
        if status == "server_died":
            client = ("the host's " if inst.workload.client_on_host else "") + inst.argv(WORKDIR)[0]
            return f"{program} {ended} while {client} ran (its output is in the run's log)"
        return f"the agent ended {inst.label} with status {status}"
