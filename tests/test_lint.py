"""The linters are part of the tests: ruff on the code, the tests and the benchmarks, mypy
on the package (its configuration and the strict modules are in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True)


def test_ruff():
    result = run("ruff", "check", "src", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy():
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
