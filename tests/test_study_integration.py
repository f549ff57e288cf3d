"""Integration: the debug-cost study's quick form, end to end on the two kernels the
default experiment builds (Debian 6.1 x86_64 lab-minimal, and with the debug-kernel
fragment), booted in icount mode."""

import json
import sqlite3

import pytest

from conftest import kernellab

pytestmark = pytest.mark.integration


def test_debug_cost_quick_redoes_the_seeds_finding(tmp_path):
    store = tmp_path / "s.sqlite"
    result = kernellab("study", "run", "debug-cost", "--quick", "--format", "json", store_path=store, timeout=3600)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["study"] == "debug-cost" and report["quick"] is True
    assert report["left_out"] == ["the arch i386", "the sweep that names the options responsible"]
    x86 = report["reports"]["x86_64"]
    assert [v["name"] for v in x86["variants"]] == ["lean", "debug"]
    assert all(r["status"] == "ok" for v in x86["variants"] for r in v["runs"])
    metrics = {m["name"]: m for m in x86["metrics"]}
    kernel, user = metrics["crypto.aes256cbc_kernel"], metrics["crypto.aes256cbc_user"]
    # The seed's finding, by its mechanism: the debugging options slow the kernel's own
    # code (in-kernel AES loses more than a tenth), not the same AES in user space.
    assert kernel["delta_pct"]["debug"] < -10 < -1 < user["delta_pct"]["debug"]
    crypto, control = report["summary"][:2]
    assert crypto.startswith("In-kernel crypto (debug against lean): AES-256-CBC in the kernel (AF_ALG) ")
    assert "worse (x86_64 -" in crypto and "icount, 1 run, exact" in crypto

    # Run again: every build and run is in the store, nothing boots.
    runs = sqlite3.connect(store).execute("SELECT count(*) FROM runs").fetchone()[0]
    again = kernellab("study", "run", "debug-cost", "--quick", "--format", "markdown", store_path=store)
    assert again.returncode == 0, again.stderr
    assert sqlite3.connect(store).execute("SELECT count(*) FROM runs").fetchone()[0] == runs == 2
    assert "taken from the store" in again.stderr and "#### Summary" in again.stdout
