"""The linters are part of the tests: ruff on the code, the tests and the benchmarks, mypy
on the package (its configuration and the strict modules are in pyproject.toml), and
import-linter on the layers of docs/architecture.md ([tool.importlinter] in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab   # each a program over the whole tree: mypy takes 45 s with a cold cache

ROOT = Path(__file__).resolve().parent.parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True)


def test_ruff():
    result = run("ruff", "check", "src", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy():
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_layers():
    """No module imports from a layer above its own, or from an independent sibling: the
    order is docs/architecture.md's, the contract pyproject.toml's."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    assert lint_imports.exists(), f"no {lint_imports}: pip install -e '.[test]' (import-linter)"
    result = subprocess.run([str(lint_imports), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
