"""The one strict loader for kernellab's data files (arch profiles, the metric catalog, the
timing modes, the audit rules and categories, the agent's cross-compiler table, experiment
files).

A file's schema is a dataclass: its fields are the keys allowed, their annotations the
types, fields without a default the keys required. A key the schema does not know, a
missing key or a value of the wrong type is a one-line LabError that names the file, the
table, the key and what is allowed: a typo such as `optoins = [...]` must never load as
"no options".
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
import types
import typing
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, TypeVar

from .errors import LabError

T = TypeVar("T")


def read_toml(path: Path | Traversable, origin: str | None = None) -> dict[str, Any]:
    """A TOML file as a dict; unreadable or invalid files are a one-line LabError."""
    origin = origin or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"cannot read {origin}: {exc}") from None
    return parse_toml(text, origin)


def is_file(path: Path, what: str) -> bool:
    """Whether a user's path names a file; a path that cannot be looked at (a directory on
    the way without search permission) is a one-line LabError, not False."""
    try:
        return path.is_file()
    except (OSError, ValueError) as exc:   # ValueError: a NUL in the path (from a file someone shared)
        raise LabError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None


def read_text(path: Path, what: str) -> str:
    """A user's text file (a .config, a fragment) whatever its encoding; a file that cannot
    be read (no permission, a directory, gone) is a one-line LabError."""
    try:
        return path.read_text(errors="replace")
    except (OSError, ValueError) as exc:   # ValueError: a NUL in the path
        raise LabError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None


def parse_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LabError(f"{origin}: not valid TOML ({exc})") from None
    except RecursionError:   # tomllib recurses once per nested array or inline table
        raise LabError(f"{origin}: not valid TOML (arrays or tables nested too deep)") from None


def load(schema: type[T], data: Any, origin: str) -> T:
    """`data` (a TOML table) as an instance of the dataclass `schema`, checked strictly."""
    return typing.cast(T, _convert(schema, data, origin))


def _convert(kind: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        return _table(typing.cast(type, kind), value, where)
    if kind is Any:
        return value
    if origin is Literal:
        allowed = typing.get_args(kind)
        if value not in allowed:
            raise LabError(f"{where}: {value!r} is not one of {', '.join(map(repr, allowed))}")
        return value
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, where)
            except LabError as exc:
                errors.append(str(exc))
        raise LabError(errors[0] if len(errors) == 1 else
                       f"{where}: expected {_name(kind)}, got {_got(value)}")
    if origin in (list, tuple):
        args = typing.get_args(kind)
        item = args[0] if args else Any
        if not isinstance(value, list):
            raise LabError(f"{where}: expected a list, got {_got(value)}")
        items = [_convert(item, v, f"{where} #{i}") for i, v in enumerate(value, start=1)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        key_type, value_type = typing.get_args(kind) or (str, Any)
        if not isinstance(value, dict):
            raise LabError(f"{where}: expected a table, got {_got(value)}")
        return {_convert(key_type, k, where): _convert(value_type, v, f"{where}.{k}")
                for k, v in value.items()}
    if kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(kind, type) and isinstance(value, kind):
        return value
    raise LabError(f"{where}: expected {_name(kind)}, got {_got(value)}")


def _table(schema: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise LabError(f"{where}: expected a table, got {_got(value)}")
    hints, fields = _schema_of(schema)
    # A trailing underscore lets a key be a Python keyword (class_ for "class").
    by_key = {name.rstrip("_"): name for name in fields}
    unknown = [k for k in value if k not in by_key]
    if unknown:
        allowed = ", ".join(sorted(n.rstrip("_") for n in fields))
        raise LabError(f"{where}: unknown key {unknown[0]!r} (allowed: {allowed})")
    given = {by_key[k]: v for k, v in value.items()}
    missing = [n for n, f in fields.items() if n not in given
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise LabError(f"{where}: missing key {missing[0].rstrip('_')!r}")
    args = {name: _convert(hints[name], v, _inside(where, name, hints[name])) for name, v in given.items()}
    try:
        return schema(**args)
    except (ValueError, TypeError) as exc:  # __post_init__ checks across keys
        raise LabError(f"{where}: {exc}") from None


@functools.cache
def _schema_of(schema: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """A schema's type hints and init fields, once per class: get_type_hints evaluates every
    annotation's text again on each call (a third of the parser fuzzer's time)."""
    return typing.get_type_hints(schema), {f.name: f for f in dataclasses.fields(schema) if f.init}


def _inside(where: str, key: str, kind: Any) -> str:
    """How an error names a key: a sub-table as in TOML (`[qemu]`), a value by its key."""
    kinds = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else (kind,)
    if any(dataclasses.is_dataclass(k) for k in kinds):
        return f"{where} [{key}]"
    return f"{where}: {key.rstrip('_')}"


def _name(kind: Any) -> str:
    origin = typing.get_origin(kind)
    if origin in (list, tuple):
        return "a list"
    if origin is dict:
        return "a table"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_name(k) for k in typing.get_args(kind) if k is not type(None))
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    return names.get(kind, getattr(kind, "__name__", str(kind)))


def _got(value: Any) -> str:
    kinds = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
             list: "a list", dict: "a table"}
    text = repr(value)
    return f"{kinds.get(type(value), type(value).__name__)} {text[:40]}"
