"""What people expect of a command-line tool: --version, shell completion, a man page,
and CI examples whose command lines kernellab itself accepts."""

import functools
import importlib.metadata
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernellab import cli

EXAMPLES = Path(__file__).parent.parent / "examples"
KERNELLAB = [sys.executable, "-m", "kernellab.cli"]


def subcommands(parser, prefix=()):
    """Every command path the parser knows: ('compare',), ('config', 'diff'), ..."""
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from subcommands(sub, (*prefix, name))


def test_version_is_the_installed_packages(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"kernellab {importlib.metadata.version('kernellab')}\n"


@functools.cache
def _completion_script(shell: str) -> str:
    """`kernellab completion SHELL`, run once per test process (a second of interpreter
    start and imports each time)."""
    return subprocess.run([*KERNELLAB, "completion", shell], capture_output=True, text=True, check=True).stdout


def _bash_complete(words: str) -> list[str]:
    """What bash offers for `words` (the cursor after the last one), with kernellab's
    completion script sourced as a user would."""
    probe = (f"{_completion_script('bash')}\n"
             f"COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_LINE='{words}'; "
             f"COMP_POINT=${{#COMP_LINE}}\n"
             "fn=$(complete -p kernellab | sed -E 's/.* -F ([^ ]+) .*/\\1/'); $fn kernellab; "
             "printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = subprocess.run(["bash", "--norc", "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completes_commands_and_options_from_the_parser():
    assert "compare" in _bash_complete("kernellab com")
    assert {"--fail-on", "--fail-on-regression"} <= set(_bash_complete("kernellab compare --fail"))
    assert _bash_complete("kernellab study r") == ["run"]


def test_zsh_completion_is_valid_zsh_and_knows_every_command():
    script = _completion_script("zsh")
    assert script.startswith("#compdef kernellab")
    checked = subprocess.run(["zsh", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    for path in subcommands(cli.parser()):
        assert re.search(rf"\b{re.escape(path[-1])}\b", script), path


def test_the_man_page_renders_and_names_every_command():
    page = subprocess.run([*KERNELLAB, "man"], capture_output=True, text=True, check=True).stdout
    rendered = subprocess.run(["groff", "-man", "-Tutf8", "-P-c"], input=page, capture_output=True, text=True)
    assert rendered.returncode == 0
    text = re.sub(r".\x08", "", rendered.stdout)    # overstrike bold
    assert "kernellab - build, boot, measure and compare Linux kernel variants" in text
    for path in subcommands(cli.parser()):
        assert f"kernellab {' '.join(path)}" in text, path
    assert "3 a --fail-on or --fail-on-regression rule" in re.sub(r"\s+", " ", text)   # the exit codes


def _kernellab_lines(value):
    """The kernellab command lines in a CI file's strings."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _kernellab_lines(v)
    elif isinstance(value, list):
        for v in value:
            yield from _kernellab_lines(v)
    elif isinstance(value, str):
        for line in value.splitlines():
            if "bin/kernellab " in line:
                yield line


@pytest.mark.parametrize("name", ["gitlab-ci.yml", "github-actions.yml"])
def test_the_ci_examples_are_yaml_whose_kernellab_lines_kernellab_accepts(name):
    lines = list(_kernellab_lines(yaml.safe_load((EXAMPLES / name).read_text())))
    assert any("--fail-on" in line for line in lines)
    for line in lines:
        words = shlex.split(line.split("bin/kernellab ", 1)[1].split("||")[0])
        args = cli.parser().parse_args(words)    # exits (fails the test) on anything it refuses
        assert args.command == "runs" or args.fail_on or args.fail_on_regression is not None


@pytest.mark.parametrize("argv", [["compare", "a=tinyconfig", "--runs"], ["compare", "a=tinyconfig", "--max-runs"],
                                  ["bisect", "a=tinyconfig", "b=tinyconfig", "--metric", "syscall.null",
                                   "--max-runs"]])
@pytest.mark.parametrize("count", ["1001", "\u1811\u1810\u1810\u1810\u1810"])   # 10000 in Mongolian digits
def test_a_number_of_boots_past_the_cap_is_refused_before_anything_starts(capsys, argv, count):
    """int() reads any script's digits: a count of boots from a typo or a pasted string must
    not start days of boots (a generated input did, in the hostile-input tests)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, count])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "must be at most 1000 boots per variant" in err and "Traceback" not in err


PROFILE = ["profile", "a=tinyconfig", "b=tinyconfig", "--metric", "syscall.null"]
CPUS = cli._usable_cpus()


@pytest.mark.parametrize("argv, value, says", [
    ([*PROFILE, "--repeats"], "1001", "--repeats: must be at most 1000, the agent's most repeats of a metric"),
    ([*PROFILE, "--repeats"], "0", "--repeats: must be at least 1"),
    ([*PROFILE, "--top"], "10001", "--top: must be at most 10000 rows"),
    (["size", "a=tinyconfig", "b=tinyconfig", "--top"], "9" * 30, "--top: must be at most 10000 rows"),
    (["size", "a=tinyconfig", "b=tinyconfig", "--top"], "0", "--top: must be at least 1"),
    (["compare", "a=tinyconfig", "--workers"], str(CPUS + 1),
     f"--workers: must be at most {CPUS}, the CPUs this machine has (more machines: --cluster ADDRESS)"),
    (["sweep", "tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "syscall.null", "--workers"], "9" * 30,
     f"--workers: must be at most {CPUS}"),
    (["study", "run", "versions", "--workers"], "0", "--workers: must be at least 1"),
])
def test_counts_past_what_they_mean_are_refused_before_anything_starts(capsys, argv, value, says):
    """--workers, profile --repeats and --top had no upper bound: `--workers 100000` started a
    Dask cluster of that many processes, and `--repeats 5000` built and booted two kernels
    for the agent to refuse it in the guest."""
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument {says}" in err and "Traceback" not in err


def test_the_repeats_kernellab_allows_are_the_agents():
    header = (Path(cli.__file__).parent / "agent" / "harness.h").read_text()
    assert re.search(r"^#define MAX_REPEATS (\d+)$", header, re.M).group(1) == str(cli.AGENT_MAX_REPEATS)


def test_every_cpu_may_be_a_worker():
    assert cli.parser().parse_args(["compare", "a=tinyconfig", "--workers", str(CPUS)]).workers == CPUS
