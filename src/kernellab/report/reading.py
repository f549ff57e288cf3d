"""Reading back what kernellab wrote: any kind of result (report/kinds.py).

Such a file comes from a CI artifact or a colleague, hand-edited or damaged on the way.
Its JSON Schema (schema.json, the compare report's, and KIND-schema.json, next to this
file; one may refer to another by its file name or its $id) says everything a view or
the gate relies on, so that a file that passes renders without
a surprise, and one that does not is refused with one line: the file, the JSON path that
is wrong, and what is wrong with it. Numbers are checked beyond what a schema can say:
JSON has no NaN or infinity, and a gate must never compare one.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import referencing
from jsonschema.exceptions import best_match

from ..errors import LabError

_HERE = Path(__file__).resolve().parent
# Larger integers than SQLite keeps are no count or id kernellab wrote; they would also
# overflow a float where a view formats them.
_MAX_INT = 2**63 - 1
_SAID = 160   # characters of an offending value quoted in a message


# A study's report of many arches is a few MiB; nothing kernellab writes comes near this.
MAX_BYTES = 64 << 20


def load_json(path: Path, how_to_write: str) -> Any:
    """The JSON document in `path`, its numbers all finite; else a LabError naming the file."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)   # a device such as /dev/full never ends
        if len(data) > MAX_BYTES:
            raise LabError(f"{path} is larger than any result kernellab writes ({MAX_BYTES >> 20} MiB): "
                           f"{how_to_write}")
        text = data.decode()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LabError(f"cannot read {path}: {why}; {how_to_write}") from None
    try:
        document = json.loads(text)
        _check_numbers(document, "$", str(path))
    except (ValueError, RecursionError) as exc:   # RecursionError: nested beyond any report
        said = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise LabError(f"{path} is not a JSON file kernellab wrote ({said}); {how_to_write}") from None
    return document


def _check_numbers(value: Any, at: str, origin: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise LabError(f"{origin}: at {at}: {value} is not a number (JSON has none such; the file was "
                       "written by something else or edited)")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_INT:
        raise LabError(f"{origin}: at {at}: {str(value)[:40]}... is out of range")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_numbers(v, f"{at}.{k}", origin)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_numbers(v, f"{at}[{i}]", origin)


@functools.cache
def _schema(schema_file: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((_HERE / schema_file).read_text())
    return schema


@functools.cache
def _schemas() -> referencing.Registry[Any]:
    """Every schema shipped, under its file name and its $id: one refers to another's parts."""
    found: list[tuple[str, referencing.Resource[Any]]] = []
    for path in sorted(_HERE.glob("*.json")):
        resource = referencing.Resource.from_contents(_schema(path.name))
        found.append((path.name, resource))
        if (its_id := resource.id()) is not None:
            found.append((its_id, resource))
    return referencing.Registry().with_resources(found)


def schema_properties(schema_file: str) -> set[str]:
    """The keys a schema declares at its top."""
    return set(_schema(schema_file).get("properties", {}))


@functools.cache
def _validator(schema_file: str) -> jsonschema.protocols.Validator:
    schema = _schema(schema_file)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=_schemas())


# Where _compiled keeps the other shipped schemas inside the one it compiles: a key no
# validator reads, so that every $ref becomes a pointer into one self-contained document.
_SHIPPED = "kernellab-shipped"


def _self_contained(schema_file: str) -> dict[str, Any]:
    """`schema_file` with every schema it may refer to inside it, each $ref rewritten to
    point there ("#/kernellab-shipped/<file>/..."), and no $id or $schema left to move the
    base a reference is resolved against."""
    names = {path.name: path.name for path in _HERE.glob("*.json")}
    names |= {its_id: name for name in list(names) if (its_id := _schema(name).get("$id"))}

    def rewrite(node: Any, home: str) -> Any:
        if isinstance(node, list):
            return [rewrite(v, home) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: rewrite(v, home) for k, v in node.items() if k not in ("$id", "$schema")}
        if isinstance(ref := node.get("$ref"), str):
            target, _, pointer = ref.partition("#")
            document = names[target] if target else home
            out["$ref"] = "#" + ("" if document == schema_file else f"/{_SHIPPED}/{document}") + pointer
        return out

    root: dict[str, Any] = rewrite(copy.deepcopy(_schema(schema_file)), schema_file)
    root[_SHIPPED] = {name: rewrite(_schema(name), name) for name in sorted(set(names.values()))
                      if name != schema_file}
    return root


@functools.cache
def _compiled(schema_file: str) -> Callable[[Any], Any]:
    """The schema compiled to Python by fastjsonschema: a valid document is checked in well
    under a millisecond, where jsonschema takes about 50 ms (a view checks every file it
    reads, and the tests read thousands). Formats are annotations here, as for jsonschema."""
    return fastjsonschema.compile(_self_contained(schema_file), use_formats=False)


_checked: dict[str, int] = {}   # documents checked against each schema in this process


def _compiled_verdict(document: Any, schema_file: str) -> bool | None:
    """Whether the compiled schema takes `document`; None before it is compiled. Compiling
    costs about five checks: a command that reads one file (most do) does not compile, a
    process that reads many (a study's views, the tests) compiles at its second."""
    _checked[schema_file] = _checked.get(schema_file, 0) + 1
    if _checked[schema_file] < 2:
        return None
    try:
        _compiled(schema_file)(document)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def check_schema(document: Any, schema_file: str, origin: str, fix: str) -> None:
    """A LabError naming the JSON path of the first thing in `document` that its schema
    refuses (the most relevant one, as jsonschema ranks them)."""
    validator = _validator(schema_file)
    try:
        # The compiled schema decides for the common case, a valid file; jsonschema says
        # what is wrong with one that is not (its messages and ranking), and has the last
        # word (no error from it: the document passes).
        verdict = _compiled_verdict(document, schema_file)
        # is_valid first: collecting every error to rank them takes four times as long
        if verdict or (verdict is None and validator.is_valid(document)):
            return
        error = best_match(validator.iter_errors(document))
    except RecursionError:
        raise LabError(f"{origin} is nested too deeply to be a kernellab report; {fix}") from None
    if error is None:
        return
    message = error.message if len(error.message) <= _SAID else error.message[:_SAID] + "..."
    raise LabError(f"{origin}: at {error.json_path}: {message}; {fix}")
