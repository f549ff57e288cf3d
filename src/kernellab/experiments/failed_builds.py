"""Kernels that did not build, remembered across commands (`why`, `track`): a commit that
breaks the build is tried once, not at every rerun or every night. A kernel is named by its
source's content, its resolved config and its toolchain."""

from __future__ import annotations

import json

from .. import paths

_FILE = "failed-builds.json"


def key(source_hash: str, config_hash: str, toolchain: str) -> str:
    return "|".join((source_hash, config_hash, toolchain))


def known() -> dict[str, str]:
    """Every kernel remembered as not building -> why (the build's first error)."""
    try:
        data = json.loads(paths.cache_file("why", _FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def remember(name: str, reason: str) -> None:
    found = known()
    found[name] = reason
    path = paths.cache_file("why", _FILE)
    tmp = path.with_name(f".{_FILE}.tmp")
    tmp.write_text(json.dumps(found, indent=1))
    tmp.replace(path)
