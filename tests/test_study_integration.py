"""Integration: the debug-cost study's quick form, end to end on the two kernels the
default experiment builds (Debian 6.1 x86_64 lab-minimal, and with the debug-kernel
fragment), booted in icount mode."""

import json
import sqlite3

import pytest

from browser import inked_charts, load, screenshot
from conftest import kernellab
from kernellab.report import html

pytestmark = pytest.mark.integration


def test_debug_cost_quick_redoes_the_seeds_finding(tmp_path, browser, prefetched):
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

    # Where the size went: lockdep's tables, by the kernel's own bloat-o-meter reckoning.
    size = x86["size"]
    assert size["baseline"] == "lean"
    debug_size = size["changes"]["debug"]
    assert debug_size["symbols"][0]["name"] in ("stack_trace", "lock_chains", "list_entries", "lock_classes")
    assert debug_size["sections"]["data"]["after"] > 4 * debug_size["sections"]["data"]["before"]
    if all(v["objects_recorded"] for v in size["variants"].values()):   # built by this kernellab
        assert debug_size["dirs"][0]["dir"] == "kernel"

    # The same report as a page, in a real browser: drawn, silent, with the size section.
    page = tmp_path / "debug-cost.html"
    page.write_text(html.compare_page(x86))
    assert page.stat().st_size < 2 * 1024 * 1024
    assert [e for e in load(browser, page) if e["level"] in ("SEVERE", "WARNING")] == []
    drawn = inked_charts(browser)
    assert len(drawn) >= 5 and all(c.inked > 0.01 * c.area for c in drawn)
    assert "Image size: where it goes" in browser.page_source
    screenshot(browser, tmp_path / "debug-cost.png")

    # Run again: every build and run is in the store, nothing boots.
    runs = sqlite3.connect(store).execute("SELECT count(*) FROM runs").fetchone()[0]
    again = kernellab("study", "run", "debug-cost", "--quick", "--format", "markdown", store_path=store)
    assert again.returncode == 0, again.stderr
    assert sqlite3.connect(store).execute("SELECT count(*) FROM runs").fetchone()[0] == runs == 2
    assert "taken from the store" in again.stderr and "#### Summary" in again.stdout
