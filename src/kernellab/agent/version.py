"""The agent's record version, as the host expects it (agent's RECORD_VERSION)."""

from __future__ import annotations

from .. import paths
from ..errors import LabError
from . import RECORD_VERSION

__all__ = ["RECORD_VERSION", "check_hello"]


def check_hello(fields: dict[str, str]) -> None:
    """Refuse an agent whose records this kernellab would misread.

    `fields` are the t=hello record's fields; its `v` must be RECORD_VERSION.
    """
    said = fields.get("v")
    if said != str(RECORD_VERSION):
        speaks = f"record version {said}" if said else "no record version"
        raise LabError(f"the agent speaks {speaks}, this kernellab reads version {RECORD_VERSION}: "
                       f"rebuild the agent (rm -r {paths.cache_root() / 'agent'}) or update kernellab")
