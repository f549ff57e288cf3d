"""Every kind of result kernellab writes as JSON, in one registry: what `show`, -o/--format
and the gate know of a result file, and nothing else does.

A result says what it is: "format", its kind's tag (kernellab-sweep), and "format_version".
Each kind registers here, from its own module under report/ (KIND_MODULES): its name, its
tag, the version it writes, the versions it reads, its JSON Schema (next to this file)
and its renderers per format. Writing goes through `Kind.render` ("json": `Kind.dump`,
which stamps the tag and version), reading through `read` and `check_readable`.

Files written before results said their kind are read where they were read before:
- a compare report carries a format_version and no "format": a document with "metrics"
  and no "format" is one (only compare reports were written so);
- a noise floor kept in the cache has neither: read where a floor is expected, it is
  version 1 (the same keys, unstamped);
- any other file without a "format" is refused in one line saying how to write it again.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import LabError
from . import reading
from .terminal import Screen, printable_tree

TAG = "format"
VERSION = "format_version"
# The modules under report/ that register a kind, one each; importing them registers it.
KIND_MODULES = ("compare", "studyreport", "costtable", "sweep", "bisect", "auditreport", "noisefloor", "size",
                "profile", "crosscheck", "why", "track")


@dataclass(frozen=True)
class View:
    """What a renderer may need beyond the result: --all, the gate's checks (gate.Check)
    for JUnit, the screen a terminal view is fitted to (the default: the full width, as in
    a file) and --verbose (the whole header on a screen; a file always has it)."""
    show_all: bool = False
    checks: Sequence[Any] = ()
    screen: Screen = Screen()
    verbose: bool = False


Renderer = Callable[[dict[str, Any], View], str]


@dataclass(frozen=True)
class Kind:
    name: str                     # what `show` and messages call it: "sweep"
    tag: str                      # its "format" in the JSON: "kernellab-sweep"
    what: str                     # in a sentence: "a sweep's result"
    version: int                  # the format_version this kernellab writes
    readable: tuple[int, ...]     # the versions it reads
    schema: str                   # its JSON Schema, a file next to this module
    rewrite: str                  # how to write one again, for a message
    renderers: Mapping[str, Renderer]   # format -> text, every format but "json" (dump)
    formats: tuple[str, ...] = ()        # the order --format offers them in, the default first
    gated: bool = False           # the gate (--fail-on) reads it
    untagged: bool = False        # reads a document without "format" (written before results said their kind)
    untagged_version: int | None = None   # the version of one that has no format_version either
    # How a checked document is read (from_dict): what its schema cannot say is checked, an
    # earlier version becomes the current one; None: as it is.
    from_dict: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
    indent: int = 2

    def stamp(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body as written: its kind and version first."""
        return {TAG: self.tag, VERSION: self.version, **{k: v for k, v in body.items() if k not in (TAG, VERSION)}}

    def dump(self, body: dict[str, Any]) -> str:
        return json.dumps(self.stamp(body), indent=self.indent) + "\n"

    def check_format(self, fmt: str) -> None:
        if fmt not in self.formats:
            raise LabError(f"{self.what} renders as {', '.join(self.formats)}, not {fmt}")

    def render(self, document: dict[str, Any], fmt: str, view: View = View()) -> str:
        """The result in a format; its words made printable for every format but JSON
        (which escapes them itself), as a result file may come from anywhere."""
        self.check_format(fmt)
        if fmt == "json":
            return self.dump(document)
        return self.renderers[fmt](printable_tree(document), view)


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ValueError(f"two kinds of result named {kind.name}")
    formats = kind.formats or (*kind.renderers, "json")
    missing = [f for f in formats if f != "json" and f not in kind.renderers]
    if missing:
        raise ValueError(f"kind {kind.name}: no renderer for {', '.join(missing)}")
    kind = replace(kind, formats=formats)
    _KINDS[kind.name] = kind
    return kind


@functools.cache
def _load() -> None:
    for module in KIND_MODULES:
        importlib.import_module(f"{__package__}.{module}")


def kinds() -> list[Kind]:
    """Every kind, by name: the order a process imported their modules in (a test run's,
    a plugin's) must not change a help text or a message."""
    _load()
    return sorted(_KINDS.values(), key=lambda k: k.name)


def get(name: str) -> Kind:
    _load()
    return _KINDS[name]


def formats() -> tuple[str, ...]:
    """Every format some kind renders, for `show --format`."""
    return tuple(dict.fromkeys(f for k in kinds() for f in k.formats))


def identify(document: Any, origin: str, expect: str | None = None) -> Kind:
    """The kind of a parsed result file; `expect`: the only kind the caller reads."""
    wanted = get(expect) if expect else None
    if not isinstance(document, dict):
        raise LabError(f"{origin} is not a kernellab report or result (a JSON object that says its \"format\"); "
                       + (wanted.rewrite if wanted else f"kernellab writes {_known()}"))
    tag = document.get(TAG)
    if wanted is not None:
        if tag == wanted.tag or (tag is None and wanted.untagged):
            return wanted
        raise LabError(f"{origin}: not a {wanted.tag} file; {wanted.rewrite}")
    if tag is None:
        if "metrics" in document:   # compare reports said only their format_version
            return get("compare")
        raise LabError(f"{origin} does not say what kind of result it is (no \"format\"): written by another "
                       "program, or by a kernellab before results said their kind; write it again with the "
                       f"command that made it (kernellab writes {_known()})")
    found = next((k for k in kinds() if k.tag == tag), None)
    if found is None:
        said = repr(tag) if isinstance(tag, str) and len(tag) <= 60 else "a format"
        raise LabError(f"{origin} is {said}, a kind of result this kernellab does not know (it reads "
                       f"{_known()}): written by a newer kernellab or another program")
    return found


def _known() -> str:
    return ", ".join(k.tag for k in kinds())


def check_readable(kind: Kind, document: dict[str, Any], origin: str) -> dict[str, Any]:
    """A result of this kind that this kernellab renders, or a one-line LabError saying why not."""
    tagged = document.get(TAG) is not None
    version = document.get(VERSION)
    if version is None and not tagged and kind.untagged:
        version = kind.untagged_version
    if version not in kind.readable:
        said = ("has no format_version (written before results were versioned)" if version is None
                else f"is {kind.tag + ' ' if tagged else ''}format {_short(version)}")
        raise LabError(f"{origin} {said}; this kernellab reads format{'s' if len(kind.readable) > 1 else ''} "
                       f"{', '.join(map(str, kind.readable))}: {kind.rewrite}")
    reading.check_schema(_as_schema_sees(kind, document), kind.schema, origin, kind.rewrite)
    return kind.from_dict(document, origin) if kind.from_dict is not None else document


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 20 else text[:17] + "..."


def _as_schema_sees(kind: Kind, document: dict[str, Any]) -> dict[str, Any]:
    """The stamp is checked above: a schema that does not declare a key of it is given the
    document without that key (a nested part's schema, or one written before the stamp)."""
    declared = reading.schema_properties(kind.schema)
    return {k: v for k, v in document.items() if k not in (TAG, VERSION) or k in declared}


def read(document: Any, origin: str, expect: str | None = None) -> tuple[Kind, dict[str, Any]]:
    kind = identify(document, origin, expect)
    return kind, check_readable(kind, document, origin)


def load_json(path: Path, expect: str | None = None) -> Any:
    """The JSON document of a result file, its numbers all finite (not yet checked)."""
    how = get(expect).rewrite if expect else f"kernellab writes {_known()}, each with --format json"
    return reading.load_json(path, how)


def load(path: Path, expect: str | None = None) -> tuple[Kind, dict[str, Any]]:
    """A result file as `show` reads it: finite numbers, a kind this kernellab knows, a
    version it reads, checked against its schema."""
    return read(load_json(path, expect), str(path), expect)

