"""The agent's record version, as the host expects it (agent's RECORD_VERSION)."""

from __future__ import annotations

from ..errors import LabError

RECORD_VERSION = 1


def check_hello(fields: dict[str, str]) -> None:
    """Refuse an agent whose records this kernellab would misread."""
    said = fields.get("v")
    if said != str(RECORD_VERSION):
        speaks = f"record version {said}" if said else "no record version"
        raise LabError(f"the agent speaks {speaks}, this kernellab reads version {RECORD_VERSION}: "
                       "rebuild the agent (rm -r ~/.cache/kernellab/agent) or update kernellab")
