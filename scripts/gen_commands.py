"""Write docs/commands.md, the command reference, from kernellab's argument parser.

    .venv/bin/python scripts/gen_commands.py           # regenerate docs/commands.md
    .venv/bin/python scripts/gen_commands.py --check   # exit 1 when it is stale

The same parser gives `kernellab --help`, `kernellab man` and shell completion;
tests/test_docs.py fails when docs/commands.md is not what this script writes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "commands.md"
WIDTH = "100"   # argparse wraps help to $COLUMNS: fixed, so that the page does not depend on a terminal


def _commands(p: argparse.ArgumentParser, path: list[str]) -> Iterator[tuple[list[str], str, argparse.ArgumentParser]]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                yield [*path, name], helps.get(name, ""), child
                yield from _commands(child, [*path, name])


def render() -> str:
    from kernellab.cli import parser
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        top = parser()
        out = ["# Command reference", "",
               "Generated from the argument parser (`kernellab.cli.parser()`) by `scripts/gen_commands.py`;",
               "do not edit by hand. The same parser gives `kernellab --help`, `kernellab man | man -l -`",
               "and `kernellab completion bash`.", "",
               "| command | what it does |", "|---|---|"]
        commands = list(_commands(top, ["kernellab"]))
        for path, help, _ in commands:
            anchor = "-".join(path)
            out.append(f"| [`{' '.join(path)}`](#{anchor}) | {help.replace('|', chr(92) + '|')} |")
        out += ["", "## kernellab", "", "```text", top.format_help().rstrip(), "```", ""]
        for path, help, p in commands:
            out += [f"## {' '.join(path)}", ""]
            if help:
                out += [help[0].upper() + help[1:] + ("" if help.endswith(".") else "."), ""]
            out += ["```text", p.format_help().rstrip(), "```", ""]
        return "\n".join(out)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if TARGET.exists() and TARGET.read_text() == text:
            return 0
        print(f"{TARGET} is stale: run .venv/bin/python scripts/gen_commands.py", file=sys.stderr)
        return 1
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
