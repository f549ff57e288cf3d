"""Workloads: real programs (fio, redis, a user's own script) as data files.

A workload file (TOML, loaded by the strict loader) says what to run and how to read what
it prints: the command as an argv list with named parameters (`fio:bs=4k,rw=randread` is a
variant of one file), an optional server to start first, the parser of its output and the
metrics it yields, whether it does a fixed amount of work (reproducible under icount) and
what it needs of the kernel and the machine. The files kernellab ships are
`src/kernellab/workloads/*.toml`; a user's own is given by its path. docs/workloads.md
describes the format.

Parameter values are checked against the parameter's pattern or choices and only ever
become whole argv words or parts of them: nothing goes through a shell.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import ClassVar, Literal

from .. import datafile, modes
from ..errors import LabError, did_you_mean
from . import parse

NAME = re.compile(r"[a-z][a-z0-9-]*")                 # a workload's: WORKLOAD.METRIC in reports
METRIC_NAME = re.compile(r"[A-Za-z0-9_]+")            # a metric's, once its placeholders are filled
PARAM_NAME = re.compile(r"[a-z][a-z0-9_]*")
PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
# What the run side fills in, beside the parameters: the directory the workload's files are
# written to and it may write in (the agent's: a guest's tmpfs, or for one that needs a disk
# the file system of the disk QEMU attaches for it; a machine's, under /tmp).
CONTEXT = ("workdir",)
# And, in the command of a workload that talks to the host (needs.network = "host"), which
# runs on the host: where the host reaches its server (guest.workloads.Reader fills them in).
LINK_CONTEXT = ("address", "port")
# How long the host's command of such a workload may take to end after its server did
# (host time), before it is killed: the run's time limit counts it (Workload.longest_s).
HOST_WAIT_S = 60.0
_SPEC = re.compile(r"(?P<what>.+?\.toml|[a-z][a-z0-9-]*)(?::(?P<params>.*))?", re.DOTALL)


def _compiles(regex: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(regex, re.MULTILINE)
    except re.error as exc:
        raise ValueError(f"{what} {regex!r}: {exc}") from None


def _options(names: tuple[str, ...], what: str) -> None:
    bad = [n for n in names if not re.fullmatch(r"CONFIG_[A-Z0-9_]+", n)]
    if bad:
        raise ValueError(f"{what}: {bad[0]!r} is not a kernel option (CONFIG_...)")


@dataclass(frozen=True)
class Param:
    default: str
    help: str
    pattern: str = ""                    # the whole value must match it
    choices: tuple[str, ...] = ()
    # For a parameter that is a whole argv word ("{io}"): the words each choice stands for
    # (none, one or several), e.g. { buffered = ["--direct=0"], direct = ["--direct=1"] }.
    argv: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if bool(self.pattern) == bool(self.choices):
            raise ValueError("give a parameter either a pattern or choices")
        if self.pattern:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r}: {exc}") from None
        if self.argv and set(self.argv) != set(self.choices):
            raise ValueError(f"argv must give the words of every choice ({', '.join(self.choices)}), and only those")
        self.check(self.default, "its default")

    def check(self, value: str, what: str) -> None:
        if any(c in value for c in "\0\n\r"):
            raise ValueError(f"{what} holds a control character")
        if self.choices and value not in self.choices:
            raise ValueError(f"{what} {value!r} is not one of {', '.join(self.choices)}")
        if self.pattern and not re.fullmatch(self.pattern, value):
            raise ValueError(f"{what} {value!r} does not match {self.pattern!r}")

    def allowed(self) -> str:
        return ", ".join(self.choices) if self.choices else f"/{self.pattern}/"


@dataclass(frozen=True)
class Server:
    command: tuple[str, ...]
    ready_port: int = 0                  # ready when this TCP port on 127.0.0.1 accepts a connection
    ready_line: str = ""                 # ready when a line of its output matches this regular expression
    ready_timeout_s: float = 30.0
    stop_signal: Literal["TERM", "INT", "QUIT"] = "TERM"
    # The TCP port it listens on where the kernel runs, which the host's command connects
    # to: for a workload with needs.network = "host" only, and required there (0: none).
    port: int = 0
    # How long it is given to stop after its stop signal before SIGKILL (guest time): the
    # agent's file carries it (guest.workloads), and a run's time limit counts it. Not a key
    # of the file: the same for every server.
    stop_grace_s: ClassVar[float] = 5.0

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError("the server's command is empty")
        if bool(self.ready_port) == bool(self.ready_line):
            raise ValueError("give the server either ready_port or ready_line")
        for key, port in (("ready_port", self.ready_port), ("port", self.port)):
            if not 0 <= port <= 65535:
                raise ValueError(f"{key} {port} is not a TCP port")
        if self.ready_line:
            _compiles(self.ready_line, "ready_line")
        if self.ready_timeout_s <= 0:
            raise ValueError("ready_timeout_s must be more than 0")


@dataclass(frozen=True)
class Run:
    timeout_s: float                     # the run side stops the program after this (guest time)
    iterations: str = ""                 # the parameter that sets a fixed amount of work
    duration: str = ""                   # or the one that sets how many seconds it runs

    def __post_init__(self) -> None:
        if bool(self.iterations) == bool(self.duration):
            raise ValueError("give either iterations or duration (the parameter that sets it)")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be more than 0")


@dataclass(frozen=True)
class Output:
    format: Literal["json", "text"]
    stream: Literal["stdout", "stderr", "both"] = "stdout"


@dataclass(frozen=True)
class Metric:
    name: str                            # may hold {param}: "{rw}_iops"
    unit: str
    better: Literal["lower", "higher"]
    label: str = ""
    path: str = ""                       # JSON output: where the number is
    regex: str = ""                      # text output: one capturing group around the number
    scale: float = 1.0                   # multiplies the value (bit/s to MB/s: 1.25e-7)
    modes: tuple[str, ...] = modes.NAMES  # where the figure means something, as metrics.toml says
    needs: tuple[str, ...] = ()          # kernel options this metric needs beyond the workload's
    when: dict[str, list[str]] = field(default_factory=dict)   # only for these parameter values

    def __post_init__(self) -> None:
        unknown = [m for m in self.modes if m not in modes.NAMES]
        if unknown:
            raise ValueError(f"metric {self.name}: unknown mode {unknown[0]!r} (modes: {', '.join(modes.NAMES)})")
        if bool(self.path) == bool(self.regex):
            raise ValueError(f"metric {self.name}: give either path (JSON output) or regex (text output)")
        if not self.scale or self.scale != self.scale or abs(self.scale) == float("inf"):
            raise ValueError(f"metric {self.name}: scale must be a finite number other than 0")
        _options(self.needs, f"metric {self.name}: needs")


@dataclass(frozen=True)
class Needs:
    kernel: tuple[str, ...] = ()         # kernel options: without them the metrics are "n/a: needs CONFIG_X"
    # The CPUs and memory it needs where it runs: a QEMU guest (the variant's vcpus:N, the
    # arch profile's -m) or a machine (nproc, MemTotal) that has fewer does not run it, and
    # its metrics say why (experiments.lab); the variant is never changed to fit.
    vcpus: int = 1
    memory_mib: int = 0                  # 0: any
    # The MiB its files need in {workdir} (0: none): a machine's free space there is checked
    # before the run (n/a when short); a QEMU guest gets, in wall mode, a disk's file system
    # with that room for {workdir} (targets.qemu, fsimage.for_workloads), and under icount
    # none (the workload is not run).
    disk_mib: int = 0
    # host: a link from the host (wall mode only): the [server] runs where the kernel runs, on
    # its `port`, and the command on the host against it (a QEMU guest gets a NIC for it).
    network: Literal["none", "loopback", "host"] = "none"

    def __post_init__(self) -> None:
        _options(self.kernel, "needs.kernel")
        if self.vcpus < 1 or self.memory_mib < 0 or self.disk_mib < 0:
            raise ValueError("needs: vcpus must be 1 or more, memory_mib and disk_mib 0 or more")


@dataclass(frozen=True)
class Sample:
    file: str                            # relative to the workload file's directory
    params: dict[str, str] = field(default_factory=dict)   # the variant it is the output of


# The placeholders of a [static] recipe's words: the compiler of the arch's agent build
# (agent/cross.toml), its prefix ("powerpc-linux-gnu-": strip, ar...), and how many jobs make may run.
STATIC_CONTEXT = ("cc", "cross_prefix", "jobs")


@dataclass(frozen=True)
class Static:
    """How kernellab builds the workload's programs statically from Debian's source package,
    for a guest whose arch Debian 12 has no userland for (kernellab.staticbuild)."""

    source: str                          # the Debian source package
    # The build: argv lists run one after the other in the unpacked source tree, never
    # through a shell; each word may hold the STATIC_CONTEXT placeholders.
    build: tuple[tuple[str, ...], ...]
    programs: tuple[str, ...]            # what it builds: paths relative to the tree, each a program in the guest

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", self.source):
            raise ValueError(f"static: source {self.source!r} is not a Debian source package's name")
        if not self.build or any(not argv or not argv[0] for argv in self.build):
            raise ValueError("static: build is a list of commands, each a non-empty argv list")
        for word in (w for argv in self.build for w in argv):
            unknown = [n for n in PLACEHOLDER.findall(word) if n not in STATIC_CONTEXT]
            if unknown or "\0" in word:
                raise ValueError(f"static: build word {word!r}: " + (
                    f"{{{unknown[0]}}} is not a placeholder of a build ({', '.join(STATIC_CONTEXT)})"
                    if unknown else "it holds a NUL character"))
        if not self.programs:
            raise ValueError("static: programs is empty: name what the build makes")
        for program in self.programs:
            parts = PurePosixPath(program).parts
            if not parts or program.startswith("/") or ".." in parts or "\0" in program:
                raise ValueError(f"static: program {program!r} must be a path relative to the source tree, "
                                 "without '..'")
        names = [PurePosixPath(p).name for p in self.programs]
        if len(set(names)) != len(names):
            raise ValueError("static: two programs of the same file name")


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    packages: tuple[str, ...]            # the Debian packages it runs from
    command: tuple[str, ...]
    fixed_work: bool                     # a fixed amount of work: reruns under icount are identical
    why: str                             # why it is (or is not) fixed work
    run: Run
    output: Output
    metric: tuple[Metric, ...]
    params: dict[str, Param] = field(default_factory=dict)
    server: Server | None = None
    files: dict[str, str] = field(default_factory=dict)   # written into {workdir} before it starts
    # What the guest's userland keeps beside the programs of command and server (and the
    # libraries they load): a program a script runs, by name ("date"), or a file or directory
    # of its packages, by absolute path ("/usr/share/zoneinfo"). kernellab.userland.
    uses: tuple[str, ...] = ()
    needs: Needs = Needs()
    sample: tuple[Sample, ...] = ()
    # Static programs of the user's own, copied into the guest's bin directory (found before
    # PATH): paths relative to the file's directory, or absolute.
    binaries: tuple[str, ...] = ()
    # How kernellab builds its programs where Debian 12 has no userland (32-bit PowerPC).
    static: Static | None = None

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise ValueError(f"name {self.name!r}: use lower-case letters, digits and '-', starting with a letter")
        if not self.command:
            raise ValueError("command is empty")
        if not self.metric:
            raise ValueError("no [[metric]]: a workload yields at least one")
        for name in self.params:
            if not PARAM_NAME.fullmatch(name) or name in (*CONTEXT, *LINK_CONTEXT):
                raise ValueError(f"parameter {name!r}: use lower-case letters, digits and '_' (not "
                                 f"{', '.join((*CONTEXT, *LINK_CONTEXT))})")
        self._check_run()
        self._check_link()
        self._check_placeholders()
        self._check_metrics()
        for name in self.files:
            if name in ("", ".", "..") or "/" in name or "\0" in name:
                raise ValueError(f"files: {name!r} is not a plain file name")
        names = [PurePosixPath(b).name for b in self.binaries]
        if any(not b or "\0" in b or not n or n in (".", "..") for b, n in zip(self.binaries, names, strict=True)):
            raise ValueError("binaries: give the path of each program file")
        if len(set(names)) != len(names):
            raise ValueError("binaries: two programs of the same file name")
        built = {PurePosixPath(p).name for p in self.static.programs} if self.static else set()
        if built & set(names):
            raise ValueError(f"binaries and static both give {sorted(built & set(names))[0]}: keep one")
        for used in self.uses:
            plain = "/" not in used and used not in ("", ".", "..")
            absolute = used.startswith("/") and ".." not in used.split("/")
            if not (plain or absolute) or "\0" in used:
                raise ValueError(f"uses: {used!r} is neither a program's name nor an absolute path without '..'")

    @property
    def client_on_host(self) -> bool:
        """It talks to the host (needs.network = "host"): its [server] runs where the kernel
        runs, and its command on the host, kernellab's own machine, against the server."""
        return self.needs.network == "host"

    def longest_s(self) -> float:
        """The guest time a run of it may take at most: its timeout, which bounds the
        server's start (its readiness wait) and the client together (agent/workload.c), then
        its server's grace to stop, which begins only once the client has ended; for one
        whose command runs on the host, the host's wait for that command after it."""
        return (self.run.timeout_s + (self.server.stop_grace_s if self.server else 0.0)
                + (HOST_WAIT_S if self.client_on_host else 0.0))

    def _check_run(self) -> None:
        amount = self.run.iterations or self.run.duration
        if amount not in self.params:
            raise ValueError(f"run: {amount!r} is not a parameter of the workload")
        if self.run.duration and self.fixed_work:
            raise ValueError("a run for a duration is not fixed work: set fixed_work = false and say why")

    def _check_link(self) -> None:
        """A workload that talks to the host has a server, on a port the host reaches."""
        port = self.server.port if self.server is not None else 0
        if not self.client_on_host:
            if port:
                raise ValueError('[server] port is where the host reaches the server of a workload with '
                                 'needs.network = "host": set that, or leave port out')
            return
        if self.server is None:
            raise ValueError('needs.network = "host" runs the [server] where the kernel runs and the command on '
                             'the host, against it: give the workload a [server]')
        if not port:
            raise ValueError('needs.network = "host": give the [server] the TCP port it listens on, which the '
                             'host connects to (port = N)')

    def _check_placeholders(self) -> None:
        whole_word = {n for n, p in self.params.items() if p.argv}
        # The command of a workload that talks to the host runs there: {address} and {port}
        # are where it reaches the server, and it has no {workdir}.
        command_context = LINK_CONTEXT if self.client_on_host else CONTEXT
        words = [*((w, command_context) for w in self.command),
                 *((w, CONTEXT) for w in (self.server.command if self.server else ()))]
        for word, context in words:
            for name in PLACEHOLDER.findall(word):
                self._known(name, f"{word!r}", context)
                if name in whole_word and word != f"{{{name}}}":
                    raise ValueError(f"{word!r}: {{{name}}} stands for argv words, so it must be a word alone")
        for param in self.params.values():
            for chosen in param.argv.values():
                for word in chosen:
                    for name in PLACEHOLDER.findall(word):
                        self._known(name, f"{word!r}", (*CONTEXT, *command_context))
                        if name in whole_word:
                            raise ValueError(f"{word!r}: a choice's words cannot hold {{{name}}}")
        for name, text in self.files.items():
            for placeholder in PLACEHOLDER.findall(text):
                self._known(placeholder, f"files.{name}")

    def _check_metrics(self) -> None:
        want = "path" if self.output.format == "json" else "regex"
        for m in self.metric:
            if not (m.path if want == "path" else m.regex):
                raise ValueError(f"metric {m.name}: {self.output.format} output is read by {want}")
            for text in (m.name, m.path, m.regex):
                for name in PLACEHOLDER.findall(text):
                    self._known(name, f"metric {m.name}", context=())
            filled = _fill(m.name, {n: "x" for n in self.params})
            if not METRIC_NAME.fullmatch(filled):
                raise ValueError(f"metric {m.name!r}: use letters, digits and '_' (and {{param}})")
            if m.path:
                parse.compile_path(_fill(m.path, {n: "x" for n in self.params}))
            else:
                regex = _compiles(_fill(m.regex, {n: "x" for n in self.params}), f"metric {m.name}: regex")
                if regex.groups != 1:
                    raise ValueError(f"metric {m.name}: the regex must have exactly one capturing group "
                                     f"(around the number; use (?:...) for the others), it has {regex.groups}")
            for name, values in m.when.items():
                if name not in self.params:
                    raise ValueError(f"metric {m.name}: when: {name!r} is not a parameter")
                for value in values:
                    self.params[name].check(value, f"metric {m.name}: when: {name}")

    def _known(self, name: str, where: str, context: tuple[str, ...] = CONTEXT) -> None:
        if name in self.params or name in context:
            return
        if name in LINK_CONTEXT:
            raise ValueError(f"{where}: {{{name}}} is where the host reaches the server: it is for the command of "
                             'a workload with needs.network = "host" only')
        if name in CONTEXT and context == LINK_CONTEXT:
            raise ValueError(f"{where}: {{{name}}} is the server's directory, where the kernel runs; the command "
                             'of a workload with needs.network = "host" runs on the host, which has none')
        known = ", ".join([*self.params, *context]) or "none"
        raise ValueError(f"{where}: {{{name}}} is not a parameter (known: {known})")


def _fill(text: str, values: dict[str, str], escape: bool = False) -> str:
    """`text` with each {name} replaced by its value (regex-escaped in a regex)."""
    def one(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        if value is None:
            return match.group(0)
        return re.escape(value) if escape else value
    return PLACEHOLDER.sub(one, text)


@dataclass(frozen=True)
class Loaded:
    """A workload file and where it came from (its samples are named relative to `base`)."""

    workload: Workload
    origin: str                          # what errors call it: "fio.toml" or the user's path
    base: Path | Traversable             # the file's directory
    shipped: bool


@dataclass(frozen=True)
class ResolvedMetric:
    """A metric for one instance: its placeholders filled."""

    name: str
    unit: str
    better: str
    label: str
    path: str
    regex: str
    scale: float
    modes: tuple[str, ...]
    needs: tuple[str, ...]
    template: str                        # its name in the file: "{rw}_iops"


@dataclass(frozen=True)
class Instance:
    """A workload with every parameter's value: what one run executes."""

    loaded: Loaded
    params: dict[str, str]

    @property
    def workload(self) -> Workload:
        return self.loaded.workload

    @property
    def label(self) -> str:
        """NAME, with the parameters that differ from their defaults: fio:bs=1M,rw=read."""
        changed = [f"{k}={v}" for k, v in self.params.items() if v != self.workload.params[k].default]
        return self.workload.name + (":" + ",".join(changed) if changed else "")

    def argv(self, workdir: str) -> list[str]:
        """The command's words, every parameter filled ({address} and {port} of one that
        runs on the host left as they are: host_argv fills them)."""
        return self._words(self.workload.command, {"workdir": workdir})

    def host_argv(self, address: str, port: int) -> list[str]:
        """The command of a workload that talks to the host, as the host runs it: against its
        server, which the host reaches at `address`, `port`."""
        return self._words(self.workload.command, {"address": address, "port": str(port)})

    def server_argv(self, workdir: str) -> list[str] | None:
        server = self.workload.server
        return self._words(server.command, {"workdir": workdir}) if server else None

    def files(self, workdir: str) -> dict[str, str]:
        """The files to write into {workdir} before the run: name -> content."""
        values = {**self.params, "workdir": workdir}
        return {name: _fill(text, values) for name, text in self.workload.files.items()}

    def metrics(self) -> list[ResolvedMetric]:
        """The metrics this instance yields (those whose `when` its parameters meet)."""
        out = []
        for m in self.workload.metric:
            if all(self.params[k] in values for k, values in m.when.items()):
                out.append(ResolvedMetric(
                    _fill(m.name, self.params), m.unit, m.better, _fill(m.label or m.name, self.params),
                    _fill(m.path, self.params), _fill(m.regex, self.params, escape=True), m.scale, m.modes,
                    (*self.workload.needs.kernel, *m.needs), m.name))
        names = [m.name for m in out]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice:
            raise LabError(f"{self.loaded.origin}: two metrics are named {twice} for {self.label}: "
                           "give them different names or disjoint `when`s")
        bad = next((n for n in names if not METRIC_NAME.fullmatch(n)), None)
        if bad:
            raise LabError(f"{self.loaded.origin}: metric name {bad!r} for {self.label} holds a character "
                           "other than letters, digits and '_': choose parameter values that fit")
        return out

    def read(self, text: str) -> parse.Parsed:
        """The program's output (its `output.stream`) as values and failures per metric."""
        return parse.parse(self.metrics(), self.workload.output.format, text, self.label)

    def _words(self, words: tuple[str, ...], context: dict[str, str]) -> list[str]:
        values = {**self.params, **context}
        out: list[str] = []
        for word in words:
            whole = PLACEHOLDER.fullmatch(word)
            param = self.workload.params.get(whole.group(1)) if whole else None
            if whole and param is not None and param.argv:
                out.extend(_fill(w, values) for w in param.argv[self.params[whole.group(1)]])
            else:
                out.append(_fill(word, values))
        return out


def packaged() -> list[str]:
    """The names of the workloads kernellab ships."""
    return sorted(p.name.removesuffix(".toml") for p in _shipped_dir().iterdir() if p.name.endswith(".toml"))


def _shipped_dir() -> Traversable:
    return resources.files(__package__)


@cache
def _load_shipped(name: str) -> Loaded:
    origin = f"{name}.toml"
    workload = _load(datafile.read_toml(_shipped_dir() / origin, origin), origin)
    if workload.name != name:
        raise LabError(f"{origin}: its name is {workload.name!r}: a shipped file is named after its workload")
    return Loaded(workload, origin, _shipped_dir(), shipped=True)


def _load(data: object, origin: str) -> Workload:
    return datafile.load(Workload, data, origin)


def load(what: str) -> Loaded:
    """A shipped workload by name, or a user's file by its path (ending in .toml)."""
    if what.endswith(".toml") or "/" in what:
        path = Path(what)
        if not datafile.is_file(path, "the workload file"):
            raise LabError(f"no workload file {what}: give the path of a .toml file, or a name of "
                           "`kernellab workload list`")
        return Loaded(_load(datafile.read_toml(path), what), what, path.parent, shipped=False)
    if what not in packaged():
        known = f"use one of {', '.join(packaged())}, or the path of your own .toml file"
        hint = did_you_mean(what, packaged())
        raise LabError(f"no workload {what!r}: {f'{hint} ({known})' if hint else known}")
    return _load_shipped(what)


def resolve(spec: str) -> Instance:
    """`NAME` or `FILE.toml`, optionally with `:key=value,...`, as an instance with every
    parameter's value checked."""
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise LabError(f"workload {spec!r}: write NAME or FILE.toml, then optionally :key=value,...")
    loaded = load(match.group("what"))
    return instance(loaded, parse_params(match.group("params") or "", spec))


def parse_params(text: str, spec: str) -> dict[str, str]:
    given: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise LabError(f"workload {spec!r}: {item!r} is not key=value")
        if key in given:
            raise LabError(f"workload {spec!r}: {key} is given twice")
        given[key] = value
    return given


def instance(loaded: Loaded, given: dict[str, str]) -> Instance:
    """`loaded` with `given` over its defaults; an unknown parameter or a value outside its
    pattern or choices is a LabError."""
    w = loaded.workload
    for key, value in given.items():
        param = w.params.get(key)
        if param is None:
            known = ", ".join(w.params) or "none"
            raise LabError(f"workload {w.name}: no parameter {key!r} (parameters: {known})")
        try:
            param.check(value, f"{key}=")
        except ValueError as exc:
            raise LabError(f"workload {w.name}: {exc}") from None
    return Instance(loaded, {k: given.get(k, p.default) for k, p in w.params.items()})


def sample_text(loaded: Loaded, sample: Sample) -> str:
    """A declared sample's text: a path relative to the file's directory that stays in it."""
    relative = PurePosixPath(sample.file)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts or "\0" in sample.file:
        raise LabError(f"{loaded.origin}: sample {sample.file!r} leaves the file's directory: name a file "
                       "beside the workload file or under it")
    base = loaded.base
    if isinstance(base, Path):
        target = (base / relative).resolve()
        if not target.is_relative_to(base.resolve()):   # a symbolic link out of it
            raise LabError(f"{loaded.origin}: sample {sample.file!r} leads out of the file's directory")
        return datafile.read_text(target, "the sample")
    found: Traversable = base.joinpath(*relative.parts)
    try:
        return found.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"cannot read the sample {sample.file} of {loaded.origin}: {exc}") from None


def binary_paths(loaded: Loaded) -> dict[str, Path]:
    """The user's own programs (`binaries`): file name -> where it is on the host."""
    out: dict[str, Path] = {}
    for given in loaded.workload.binaries:
        path = Path(given)
        if not path.is_absolute():
            if not isinstance(loaded.base, Path):
                raise LabError(f"{loaded.origin}: binaries: {given!r} must be an absolute path")
            path = loaded.base / path
        if not path.is_file():
            raise LabError(f"{loaded.origin}: binaries: no file {path}: build it first, or fix the path")
        out[path.name] = path
    return out


def samples(loaded: Loaded) -> Iterator[tuple[Sample, Instance, str]]:
    """Each declared sample, the instance it is the output of, and its text."""
    for sample in loaded.workload.sample:
        yield sample, instance(loaded, sample.params), sample_text(loaded, sample)


def describe(inst: Instance) -> dict[str, object]:
    """The workload as plain data (show --format json), with this variant's command."""
    data = dataclasses.asdict(inst.workload)
    data["origin"] = inst.loaded.origin
    data["variant"] = {"label": inst.label, "params": inst.params, "argv": inst.argv("{workdir}"),
                       "server_argv": inst.server_argv("{workdir}"),
                       # where each runs: the machine whose kernel is measured, or the host
                       "argv_runs_on": "host" if inst.workload.client_on_host else "machine",
                       "metrics": [m.name for m in inst.metrics()]}
    return data
