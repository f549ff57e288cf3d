"""Help a newcomer finds where they look first (issue 33): `kernellab` alone prints the help,
every argument says what it is, every command shows examples that parse, the man page has
EXIT STATUS, ENVIRONMENT and EXAMPLES; and `runs` reads in one glance and never makes a
store it was only asked to read."""

import json
import re
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest

from kernellab import cli

SRC = Path(cli.__file__).parent


def parsers():
    """Every parser of the command line, with its command path ("" for kernellab itself)."""
    return list(cli._subparsers(cli.parser()))


# -- kernellab with no command -------------------------------------------------------------

@pytest.mark.parametrize("argv, usage", [([], "usage: kernellab [-h]"),
                                         (["--store", "x.sqlite"], "usage: kernellab [-h]"),
                                         (["config"], "usage: kernellab config [-h]"),
                                         (["cache"], "usage: kernellab cache [-h]")])
def test_no_command_prints_the_help_and_does_nothing(argv, usage, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    assert cli.main(argv) == cli.EXIT_USAGE     # nothing was done: a script's `kernellab $EMPTY` fails
    out = capsys.readouterr()
    assert out.out.startswith(usage) and "examples:" in out.out and out.err == ""
    assert not (tmp_path / "cache").exists() and not Path("x.sqlite").exists()


# -- help text and examples -----------------------------------------------------------------

def test_every_argument_of_every_command_says_what_it_is():
    missing = [f"kernellab {path} {a.option_strings or a.dest}".replace("  ", " ")
               for path, p in parsers() for a in p._actions if not a.help]
    assert missing == []


def _argv(line: str) -> list[str]:
    """An example's words up to the shell's first | > < ; or &, without its comment."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word and set(word) <= set("|&;<>()"):
            break
        words.append(word)
    return words


def test_every_command_has_examples_and_each_parses_as_that_command(capsys):
    paths = [path for path, _ in parsers()]
    assert sorted(cli.EXAMPLES) == sorted(paths)        # none missing, none of a command gone
    for path, p in parsers():
        assert "\nexamples:\n  kernellab " in "\n" + p.format_help(), path
        for line in cli.EXAMPLES[path]:
            words = _argv(line)
            assert words[0] == "kernellab", line
            try:
                args = cli.parser().parse_args(words[1:])
            except SystemExit:
                pytest.fail(f"{line}: {capsys.readouterr().err}")
            ran = " ".join(w for w in (args.command, *(getattr(args, f"{args.command}_command", None),)) if w)
            assert path in ("", ran) or ran.startswith(f"{path} "), line


def test_the_examples_keep_their_lines_and_the_exit_codes_still_wrap(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    text = cli.parser().format_help()
    for line in cli.EXAMPLES[""]:
        assert f"\n  {line}\n" in text
    assert "\nexit status: 0 ok; 1 a run failed" in text
    assert all(len(line) <= 60 for line in text.split("exit status:")[1].splitlines())


# -- the man page -------------------------------------------------------------------------

def _variables_read() -> set[str]:
    """The environment variables kernellab's Python code reads by name."""
    pattern = re.compile(r"""os\.(?:environ\.get|getenv)\(\s*["']([A-Z0-9_]+)["']"""
                         r"""|os\.environ\[["']([A-Z0-9_]+)["']\]""")
    found = set()
    for path in SRC.rglob("*.py"):
        for m in pattern.finditer(path.read_text()):
            found.add(m.group(1) or m.group(2))
    return found


def test_the_man_page_has_exit_status_environment_and_examples(capsys):
    assert cli.main(["man"]) == 0
    page = capsys.readouterr().out
    headings = re.findall(r"^\.SH (.*)$", page, re.M)
    assert "COMMENTS" not in headings
    assert headings[-3:] == ["EXIT STATUS", "ENVIRONMENT", "EXAMPLES"]
    text = subprocess.run(["groff", "-man", "-Tutf8", "-P-c"], input=page, capture_output=True, text=True,
                          check=True).stdout
    text = re.sub(r".\x08", "", text)
    exit_status = text.split("\nEXIT STATUS\n")[1].split("\nENVIRONMENT\n")[0]
    for code, meaning in cli.EXIT_MEANINGS:
        assert re.search(rf"^\s+{code}\s+{re.escape(meaning[:20])}", exit_status, re.M), code
    environment = text.split("\nENVIRONMENT\n")[1].split("\nEXAMPLES\n")[0]
    assert "KERNELLAB_CACHE" in _variables_read()
    for name in _variables_read():
        assert name in environment, name
    examples = text.split("\nEXAMPLES\n")[1]
    for lines in cli.EXAMPLES.values():
        for line in lines:
            assert line in examples, line


# -- runs ---------------------------------------------------------------------------------

def _as_another_command(lab, run_ids):
    """The store's runs `run_ids`, as if another kernellab process had measured them (the
    fake lab runs every command in the test's own process)."""
    db = sqlite3.connect(lab.store)
    db.executemany("UPDATE runs SET owner = '999999 1' WHERE id = ?", [(r,) for r in run_ids])
    db.commit()
    db.close()


def test_runs_table_and_json_speak_one_vocabulary_and_group_each_commands_runs(lab, capsys):
    assert lab.main("compare", "a=tinyconfig", "--runs", "2") == 0    # runs 1 and 2: one command
    assert lab.main("compare", "b=tinyconfig") == 0                   # run 3: another
    _as_another_command(lab, [3])
    capsys.readouterr()

    assert lab.main("runs", "--format", "json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["variant"], r["group"]) for r in listed] == [(3, "b", 3), (2, "a", 1), (1, "a", 1)]
    assert listed[0]["kernel"] == "6.1.0-fake" and listed[0]["target"] == "qemu"
    assert listed[0]["machine"] == "QEMU TCG icount" and listed[0]["mode"] == "icount"

    assert lab.main("runs") == 0
    lines = capsys.readouterr().out.splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    assert header == [k for k in listed[0] if k != "group"]           # the JSON's keys, in order
    assert lines[2] == ""                                             # between the two commands
    run3, run2, run1 = (re.split(r"\s{2,}", line.strip()) for line in (lines[1], lines[3], lines[4]))
    # Each column its own: the mode, the target and the machine never run together.
    assert run3[:10] == ["3", listed[0]["started"], "b", "x86_64", "6.1.0-fake", "icount", "qemu",
                         "QEMU TCG icount", "ok", str(listed[0]["samples"])]
    assert run2[0] == "2" and run1[0] == "1"

    assert lab.main("runs", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines()[0] == ",".join(listed[0])


@pytest.mark.parametrize("argv", [["runs"], ["runs", "--format", "json"], ["log", "1"], ["cache", "show"],
                                  ["cache", "prune", "--unused", "--dry-run"]])
def test_a_read_only_command_refuses_a_store_that_does_not_exist(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    typo = tmp_path / "lab.sqlit"
    assert cli.main([*argv, "--store", str(typo)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (f"kernellab: error: no store at {typo}: give an existing store, or make one there by "
                   f"measuring (kernellab compare ... --store {typo})\n")
    assert not typo.exists()


def test_runs_without_any_store_yet_says_so_and_makes_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    assert cli.main(["runs"]) == 0
    assert capsys.readouterr().out == f"no runs in {tmp_path / 'cache' / 'kernellab.sqlite'}\n"
    assert not (tmp_path / "cache" / "kernellab.sqlite").exists()
