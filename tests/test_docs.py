"""The documentation: README.md (the front page) and docs/ (the mkdocs site, mkdocs.yml).

- the site builds with `mkdocs build --strict`: any warning (a broken link, a page not in the
  nav, a missing anchor) fails;
- docs/commands.md is what scripts/gen_commands.py generates from `kernellab.cli.parser()`;
- every relative link of README.md and docs/*.md names a file that exists, and its anchor a
  heading of that file;
- every shell example that starts with `kernellab` runs against the fake lab (tests/fakes),
  exit status 0, unless its ```sh block follows a line `<!-- examples: not run (WHY) -->`
  (a real build, a real machine, hours).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from kernellab.store import Store

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
NOT_RUN = re.compile(r"^<!-- examples: not run \(.+\) -->$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def _gen_commands():
    spec = importlib.util.spec_from_file_location("gen_commands", ROOT / "scripts" / "gen_commands.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (a fence's own lines and contents become '')."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def _anchors(path: Path) -> set[str]:
    return {slugify(line.lstrip("#").strip(), "-") for line in _prose(path.read_text())
            if re.match(r"#{1,6} ", line)}


def _links() -> list[tuple[Path, int, str]]:
    found = []
    for page in PAGES:
        for number, line in enumerate(_prose(page.read_text()), 1):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if not re.match(r"[a-z]+:", target):
                    found.append((page, number, target))
    return found


def _examples() -> list[tuple[str, str]]:
    """(where, command line) of every example to run: `kernellab ...` lines of unmarked ```sh blocks."""
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```sh":
                before = next((x.strip() for x in reversed(lines[:i]) if x.strip()), "")
                j = i + 1
                while not lines[j].startswith("```"):
                    if not NOT_RUN.match(before) and lines[j].startswith("kernellab "):
                        found.append((f"{page.relative_to(ROOT)}:{j + 1}", lines[j]))
                    j += 1
                i = j
            i += 1
    return found


def test_the_site_builds_without_a_warning(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    assert mkdocs.exists(), f"no {mkdocs}: install the test extra, .venv/bin/pip install -e '.[test]'"
    command = [str(mkdocs), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "index.html").exists()


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.name for p in DOCS.glob("*.md") if f": {p.name}" not in nav]
    assert not missing, f"add to the nav of mkdocs.yml: {missing}"


def test_the_command_reference_is_generated_from_the_parser():
    module = _gen_commands()
    current = (DOCS / "commands.md").read_text() if (DOCS / "commands.md").exists() else ""
    assert current == module.render(), (
        "docs/commands.md is stale (the argument parser changed): regenerate it with "
        "`.venv/bin/python scripts/gen_commands.py` and commit the result")


def test_the_command_reference_does_not_depend_on_the_order_kinds_were_imported_in():
    """A process that imported some kinds of result first (a test run does) renders the same
    reference: `show`'s kinds and formats are listed in one order."""
    script = ("import kernellab.report.why, kernellab.report.track, kernellab.report.sweep, sys, runpy; "
              "sys.argv = ['gen_commands.py', '--check']; "
              f"runpy.run_path({str(ROOT / 'scripts' / 'gen_commands.py')!r}, run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_command_reference_names_every_command():
    from kernellab.cli import parser
    text = (DOCS / "commands.md").read_text()
    top = parser()
    for action in top._actions:
        for name in getattr(action, "choices", None) or ():
            if not isinstance(action.choices, dict):
                continue
            assert f"## kernellab {name}\n" in text, name


def test_the_link_scanner_finds_links():
    assert len(_links()) > 20    # README's links into docs/, the pages' to each other


@pytest.mark.parametrize("page,number,target", _links(),
                         ids=[f"{p.relative_to(ROOT)}:{n}:{t}" for p, n, t in _links()])
def test_a_relative_link_names_a_file_and_heading_that_exist(page, number, target):
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    where = f"{page.relative_to(ROOT)}:{number}"
    assert dest.exists(), f"{where}: {target} names no file"
    assert ROOT in dest.parents or dest == ROOT, f"{where}: {target} leaves the repository"
    assert "shared/" not in target, f"{where}: shared/ is not part of the repository"
    if anchor and dest.suffix == ".md":
        assert anchor in _anchors(dest), f"{where}: no heading of {dest.name} has the anchor #{anchor}"


def test_no_page_sends_users_outside_the_repository():
    for page in PAGES:
        assert "shared/reference" not in page.read_text(), f"{page.relative_to(ROOT)} names shared/reference"


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 210, len(lines)
    # CI runs these two lines as they are
    assert lines[2:6] == ["```sh",
                          "bash scripts/setup.sh && .venv/bin/kernellab compare      "
                          "# set up, run the built-in default experiment",
                          "bash scripts/setup.sh && .venv/bin/python -m pytest -q -n 2 --dist loadscope    "
                          "# set up, run the tests",
                          "```"]
    test_command = lines[4].partition("#")[0].strip()
    assert (ROOT / ".ci" / "run").read_text().splitlines()[-1] == test_command


def test_some_examples_run_and_some_are_marked():
    examples = _examples()
    assert len(examples) >= 5
    marked = sum(NOT_RUN.match(line.strip()) is not None for p in PAGES for line in p.read_text().splitlines())
    assert marked >= 5


@pytest.mark.parametrize("where,line", _examples(), ids=[w for w, _ in _examples()])
def test_a_shell_example_runs_against_the_fake_lab(where, line, lab, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)    # the examples name files of the repository: results/...
    Store(lab.store).close()   # as the first measurement makes it: `runs` refuses a --store that is none
    argv = shlex.split(line, comments=True)
    assert argv[0] == "kernellab"
    try:
        rc = lab.main(*argv[1:])
    except SystemExit as stop:    # --version, --help
        rc = stop.code or 0
    out, err = capsys.readouterr()
    assert rc == 0, f"{where}: `{line}` exited {rc}: {err[-2000:]}\n(mark its block with " \
                    "`<!-- examples: not run (WHY) -->` if it needs a real build)"
    assert out.strip() or err.strip(), f"{where}: `{line}` printed nothing"
