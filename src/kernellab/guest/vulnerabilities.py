"""What a booted kernel says about its CPU's speculation flaws
(/sys/devices/system/cpu/vulnerabilities, one state per flaw, sent by the agent as
t=meta key=vulnerability.NAME records).

A mitigation compiled in but switched off because the kernel believes the CPU
unaffected costs nothing there; QEMU's emulated CPUs are "not affected" by several flaws.
A measured 0% for such an option means "inactive on this CPU", never "free".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from .. import datafile

PREFIX = "vulnerability."
LOG_KIND = "vulnerabilities"   # the store's logs.kind: a JSON object NAME -> state


def readable(state: str) -> str:
    """The agent's record values have '_' for blanks and punctuation it cannot carry."""
    return state.replace("__", ": ", 1).replace("__", ", ").replace("_", " ")


def not_affected(state: str) -> bool:
    return readable(state).startswith("Not affected")


def to_log(states: dict[str, str]) -> str:
    return json.dumps(dict(sorted(states.items())))


def from_log(text: str | None) -> dict[str, str]:
    return json.loads(text) if text else {}


@dataclass(frozen=True)
class Forcing:
    forced_by: list[str]     # boot words, any of which switches the mitigation on
    options: list[str]       # the CONFIG_ options that build the mitigation
    sysfs: Literal["still not affected", "reported"]
    source: str


@dataclass(frozen=True)
class _File:
    flaw: dict[str, Forcing]


@cache
def forcings() -> dict[str, Forcing]:
    path = resources.files(__package__) / "flaws.toml"
    return datafile.load(_File, datafile.read_toml(path, "guest/flaws.toml"), "guest/flaws.toml").flaw


def forced(boot_words: Sequence[str]) -> set[str]:
    """The flaws whose mitigation these boot words switch on whatever the CPU."""
    words = set(boot_words)
    return {name for name, f in forcings().items() if words & set(f.forced_by)}


def inactive(states: list[dict[str, str]], flaws: list[str], boot_words: Sequence[str] = ()) -> list[str]:
    """The flaws (of those a rule's mitigation is for) that every run reported as not
    affected and no boot word forced: where the mitigation never ran. Empty when a run
    did not report a flaw (an older kernel, another arch): then nothing is claimed."""
    if not states or not flaws:
        return []
    on = forced(boot_words)
    return [f for f in flaws if f not in on and all(f in s and not_affected(s[f]) for s in states)]


def built_by(options: Sequence[str]) -> list[str]:
    """The forceable flaws whose mitigation one of these CONFIG_ options builds."""
    return [name for name, f in forcings().items() if set(options) & set(f.options)]


def forced_unreported(boot_words: Sequence[str]) -> str:
    """What these boot words switch on that the vulnerabilities files still call 'not
    affected' (pti=on: the file reports the CPU's bug, not the mitigation), as words to add
    to a summary; empty if nothing."""
    words = set(boot_words)
    return "; ".join(f"{name} mitigation forced on by {word} (the kernel still reports the CPU not affected)"
                     for name, f in sorted(forcings().items()) if f.sysfs == "still not affected"
                     for word in f.forced_by if word in words)


def summary(states: dict[str, str]) -> str:
    """One line: the flaws by what the kernel does about them."""
    groups: dict[str, list[str]] = {}
    for name, state in sorted(states.items()):
        text = readable(state)
        kind = ("not affected" if text.startswith("Not affected") else
                "mitigated" if text.startswith("Mitigation") else
                "vulnerable" if text.startswith("Vulnerable") else "other")
        groups.setdefault(kind, []).append(name)
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in groups.items())


def wholly_inactive(flaws: list[str], not_affected: list[str]) -> bool:
    """No flaw the flip's mitigations are for ran (no flaws known, as in an older results
    file: the inactive ones are all there is to say)."""
    return set(not_affected) >= set(flaws)


def note(flaws: list[str], not_affected: list[str]) -> str:
    """The caveat below in a table cell's few words."""
    said = f"{', '.join(not_affected)} not affected"
    if wholly_inactive(flaws, not_affected):
        return f"inactive on the emulated CPU ({said})"
    return f"partly inactive on the emulated CPU ({said}; the rest ran)"


def caveat(flaws: list[str], not_affected: list[str]) -> str:
    """The caveat of a mitigation's measured cost where the kernel never ran (all of) it."""
    said = f"the kernel reported the CPU not affected by {', '.join(not_affected)}"
    if wholly_inactive(flaws, not_affected):
        return f"inactive on the emulated CPU ({said}): this is not the mitigation's cost"
    return f"partly inactive on the emulated CPU ({said}): only the rest of it was measured"
