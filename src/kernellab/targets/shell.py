"""A shell on the machine a running-kernel target measures: this one, or one reached with
the system's OpenSSH client (so that ~/.ssh/config, agents and known_hosts work as people
expect). Everything kernellab does there is a POSIX sh script, the same for both, that a
busybox shell runs too.

Host keys: a key that changed is always refused; a host not yet in known_hosts is refused
unless the user accepts new keys (`--accept-new-host-key`, ssh's `accept-new`).

No value is ever part of a script's text: a script is a constant body, and the values it
works on (paths, kernel words, a block directory) are its positional parameters, set by
`script()` with every one quoted. `Shell.run`, `poll` and `popen` take only a `Script`,
which only `script()` makes, so mypy refuses a script formatted from values, and
tests/faults/test_hostile_shell.py refuses a body that is not a literal.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from ..errors import LabError
from ..proc import require_tool


class Script(str):
    """Shell text made by `script()`: a constant body and its quoted parameters."""


def script(body: str, *args: str) -> Script:
    """`body`, a literal, run with `args` as its "$1", "$2", ...: the values reach the shell
    as data, whatever they hold (`$(...)`, backquotes, quotes, newlines)."""
    for value in args:
        if "\0" in value:
            raise LabError(f"{value!r} holds a NUL character, which no command argument can: remove it")
    if not args:
        return Script(body)
    return Script(f"set -- {shlex.join(args)}\n{body}")


@dataclass
class Result:
    code: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


class Shell(Protocol):
    where: str    # "this machine", "ssh://root@nas:2222": for messages
    # The machine is this one: a file the agent reads is read where it is, never copied.
    here: bool

    def run(self, script: Script, stdin: bytes | None = None, timeout_s: float = 60.0) -> Result:
        """Runs a sh script there. Failing to reach the machine is a LabError; the
        script's own exit code is the caller's to judge."""
        ...

    def poll(self, script: Script) -> Result | None:
        """Runs a short script if the machine answers at once, else None: for waiting on
        a machine that is booting, with no retries and a short connection timeout."""
        ...

    def popen(self, script: Script) -> subprocess.Popen[bytes]:
        """Starts a sh script there with its stdout and stderr as pipes, for streaming."""
        ...

    def check(self, result: Result) -> None:
        """A LabError when `result` says the machine could not be reached."""
        ...


class LocalShell:
    where = "this machine"
    here = True

    def run(self, script: Script, stdin: bytes | None = None, timeout_s: float = 60.0) -> Result:
        return _run(["sh", "-c", script], stdin, timeout_s, self.where)

    def popen(self, script: Script) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)

    def check(self, result: Result) -> None:
        pass

    def poll(self, script: Script) -> Result | None:
        return self.run(script, timeout_s=POLL_TIMEOUT_S)


@dataclass(frozen=True)
class SshAddress:
    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{user}{host}" + (f":{self.port}" if self.port else "")


def parse_ssh_url(text: str) -> SshAddress:
    """ssh://[user@]host[:port]"""
    # urlsplit drops tabs and newlines silently (`ssh://h\n-oX` is host `h-ox`), and a host
    # or user that starts with '-' reads as an ssh option: refuse both outright.
    if _UNSAFE_IN_URL.search(text):
        raise LabError(f"bad target {text!r}: a space or control character in it; expected ssh://[user@]host[:port]")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise LabError(f"bad target {text!r} ({exc}): expected ssh://[user@]host[:port]") from None
    if parts.scheme != "ssh" or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.password:
        raise LabError(f"bad target {text!r}: expected ssh://[user@]host[:port]")
    for what, value in (("host", parts.hostname), ("user", parts.username)):
        if value is not None and value.startswith("-"):
            raise LabError(f"bad target {text!r}: its {what} starts with '-', which ssh would read as an option")
    return SshAddress(parts.hostname, parts.username, port)


# Whitespace and control characters, Unicode's included (str.isspace's and category Cc's).
_UNSAFE_IN_URL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


# What OpenSSH says, and what the user should do about it. Checked in order.
_SSH_FAILURES = (
    (re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed"),
     "the host key of {where} has CHANGED since it was recorded in known_hosts; kernellab refuses it. "
     "If the change is expected, check the new key's fingerprint and remove the old one with "
     "`ssh-keygen -R HOST`"),
    (re.compile(r"No \S+ host key is known for|Host key verification failed"),
     "{where} is not in known_hosts: check its host key fingerprint, then pass --accept-new-host-key "
     "(or connect once with ssh)"),
    (re.compile(r"Permission denied"),
     "{where} refused the login ({line}): check the user and that your key is authorized there"),
    (re.compile(r"Could not resolve hostname|Name or service not known"),
     "cannot resolve the host of {where} ({line}): check the name"),
    (re.compile(r"Connection refused|No route to host|Network is unreachable|timed out|Connection reset|"
                r"Connection closed by|kex_exchange_identification|banner exchange"),
     "cannot reach {where} ({line}): check the host and port, and that its ssh server runs"),
)


# Connections a server closed before the login, which ssh servers do for a while after
# they start (their limit on unauthenticated connections, MaxStartups in OpenSSH's terms).
_TRANSIENT = re.compile(r"kex_exchange_identification|Connection closed by|Connection reset")
TRANSIENT_RETRIES = 4
TRANSIENT_WAIT_S = 3.0
# Waiting for a booting machine: a short connection timeout (banner exchange included), so
# that the time it answers is known to a second or two, not to ssh's usual ten.
POLL_CONNECT_S = 2
POLL_TIMEOUT_S = 10.0


class SshShell:
    """The system's `ssh`, non-interactive (BatchMode), host keys checked strictly."""
    here = False

    def __init__(self, address: SshAddress, ssh_config: Path | None = None, accept_new_host_key: bool = False,
                 connect_timeout_s: int = 10):
        self.address = address
        self.where = str(address)
        self.ssh_config = ssh_config
        self.accept_new_host_key = accept_new_host_key
        self.connect_timeout_s = connect_timeout_s

    def argv(self, script: Script) -> list[str]:
        argv = [require_tool("ssh"), "-T"]
        if self.ssh_config is not None:
            argv += ["-F", str(self.ssh_config)]
        # Options on the command line win over any config file: these are safety rules.
        argv += ["-o", "BatchMode=yes",
                 "-o", f"StrictHostKeyChecking={'accept-new' if self.accept_new_host_key else 'yes'}",
                 "-o", f"ConnectTimeout={self.connect_timeout_s}",
                 "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=6"]
        if self.address.port:
            argv += ["-p", str(self.address.port)]
        if self.address.user:
            argv += ["-l", self.address.user]
        # ssh joins its arguments into one command for the remote user's shell.
        return [*argv, "--", self.address.host, shlex.join(["sh", "-c", script])]

    def run(self, script: Script, stdin: bytes | None = None, timeout_s: float = 60.0) -> Result:
        for attempt in range(TRANSIENT_RETRIES + 1):
            result = _run(self.argv(script), stdin, timeout_s, self.where)
            if result.code != 255 or not _TRANSIENT.search(result.stderr) or attempt == TRANSIENT_RETRIES:
                break
            # A server that has just come up (after a kexec or a reboot) may still turn
            # connections away while it settles: ask again, a few times.
            time.sleep(TRANSIENT_WAIT_S)
        self.check(result)
        return result

    def poll(self, script: Script) -> Result | None:
        argv = self.argv(script)
        argv[argv.index(f"ConnectTimeout={self.connect_timeout_s}")] = f"ConnectTimeout={POLL_CONNECT_S}"
        try:
            result = _run(argv, None, POLL_TIMEOUT_S, self.where)
        except LabError:
            return None
        return result if result.code != 255 else None

    def popen(self, script: Script) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(script), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)

    def check(self, result: Result) -> None:
        if result.code != 255:  # ssh's own failures; anything else is the script's exit code
            return
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        for pattern, message in _SSH_FAILURES:
            for line in lines:
                if pattern.search(line):
                    raise LabError(message.format(where=self.where, line=line.strip().rstrip(".")))
        last = lines[-1].strip() if lines else "no message"
        raise LabError(f"ssh to {self.where} failed ({last}): check that `ssh {self.address.host}` works")


def _run(argv: list[str], stdin: bytes | None, timeout_s: float, where: str) -> Result:
    try:
        done = subprocess.run(argv, input=stdin if stdin is not None else b"", capture_output=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise LabError(f"{where} did not answer within {timeout_s:.0f} s: check that it is up") from None
    return Result(done.returncode, done.stdout, done.stderr.decode("utf-8", "replace"))
