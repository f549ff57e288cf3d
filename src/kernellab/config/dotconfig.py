"""`.config` files and config fragments as data.

A config is a dict from option name (with the CONFIG_ prefix) to its value as written:
"y", "m", "n" (for "# CONFIG_X is not set"), a number, or a quoted string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import LabError

_NAME = r"CONFIG_[A-Za-z0-9_]+"
_ASSIGN = re.compile(rf"^({_NAME})=(.*)$")
_NOT_SET = re.compile(rf"^# ({_NAME}) is not set$")
_VALUE = re.compile(r'^(y|m|n|-?[0-9]+|0[xX][0-9a-fA-F]+|"(?:[^"\\]|\\.)*")$')

# Control characters but the tab: a CRLF file's \r is stripped with the line's end first.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")

EXPECTED = "expected CONFIG_NAME=value or '# CONFIG_NAME is not set'"


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    origin: str  # "file:line" or "command line", for error messages and reports

    def line(self) -> str:
        if self.value == "n":
            return f"# {self.name} is not set"
        return f"{self.name}={self.value}"


def parse_line(line: str, origin: str) -> Setting | None:
    """One line of a .config or fragment; None for blank lines and comments."""
    text = line.strip()
    if not text:
        return None
    m = _NOT_SET.match(text)
    if m:
        return Setting(m.group(1), "n", origin)
    if text.startswith("#"):
        return None
    control = _CONTROL.search(text)
    if control:
        # kconfig splits lines at \n only: a \r or another control character inside a line
        # would let the line mean one thing here and another to kconfig (a second option
        # smuggled inside a quoted value past the unknown-option check).
        raise LabError(f"{origin}: a control character ({control.group()!r}) in "
                       f"{_shorten(text)!r}: a config line holds printable text only")
    m = _ASSIGN.match(text)
    if not m:
        raise LabError(f"{origin}: {EXPECTED}, got {_shorten(text)!r}")
    name, value = m.groups()
    if not _VALUE.match(value):
        raise LabError(f"{origin}: bad value for {name}: {_shorten(value)!r} "
                       "(expected y, m, n, a number or a double-quoted string)")
    return Setting(name, value, origin)


def parse_settings(text: str, source: str) -> list[Setting]:
    settings = []
    # Lines end at \n, as kconfig reads them (str.splitlines also splits at \r, \v, \f...).
    for number, line in enumerate(text.split("\n"), start=1):
        setting = parse_line(line, f"{source}:{number}")
        if setting is not None:
            settings.append(setting)
    return settings


def parse_config(text: str, source: str) -> dict[str, str]:
    """Later lines win, as in kconfig itself."""
    return {s.name: s.value for s in parse_settings(text, source)}


def format_config(config: dict[str, str]) -> str:
    return "".join(Setting(name, value, "").line() + "\n" for name, value in config.items())


def effective(config: dict[str, str], name: str, asked: str) -> str | None:
    """The value a resolved config gives an option; a missing bool/tristate is n."""
    if name in config:
        return config[name]
    return "n" if asked in ("y", "m", "n") else None


def differing(good: dict[str, str], bad: dict[str, str]) -> dict[str, str]:
    """Options whose value differs between two resolved configs -> BAD's value
    (an option a config does not mention counts as "n")."""
    return {name: bad.get(name, "n") for name in sorted(set(good) | set(bad))
            if good.get(name, "n") != bad.get(name, "n")}


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
