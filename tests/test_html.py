"""HTML reports, looked at in a real browser (Debian's headless Chromium): the charts are
drawn (pixels of a screenshot), the page says nothing on its console, fetches nothing, and
what came from outside stays text."""

import json
import re
from pathlib import Path

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from browser import inked_charts, load, screenshot
from kernellab.report import html
from test_study import study_file

HOSTILE = "<script>alert(1)</script>"
LIMIT = 2 * 1024 * 1024


def shown(browser, page: Path, tmp_path: Path, min_charts: int) -> list:
    """Loads a report; checks a clean console and that every chart drew; saves a screenshot."""
    console = load(browser, page)
    assert [e for e in console if e["level"] in ("SEVERE", "WARNING")] == []
    charts = inked_charts(browser)
    assert len(charts) >= min_charts
    for c in charts:
        # An empty vega view leaves a white box; a drawn one has axes, labels and marks.
        assert c.inked > 0.01 * c.area, c
    screenshot(browser, tmp_path / f"{page.stem}.png")
    assert (tmp_path / f"{page.stem}.png").stat().st_size > 10_000
    return charts


def no_alert(browser) -> bool:
    try:
        _ = browser.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def test_the_default_experiments_report_draws_its_charts_and_stays_under_2_mb(lab, capsys, browser, tmp_path):
    page = tmp_path / "default.html"
    assert lab.main("compare", "--format", "html", "-o", str(page)) == 0
    capsys.readouterr()
    text = page.read_text()
    assert len(text.encode()) <= LIMIT
    # Self-contained: nothing to fetch (the CSP would block it, and the console would say so).
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", text, flags=re.S)
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", markup)
    assert "Content-Security-Policy" in markup and "default-src 'none'" in markup
    charts = shown(browser, page, tmp_path, min_charts=4)
    ids = {c.id for c in charts}
    assert len(ids) == len(charts)
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings[:2] == ["Summary", "How the numbers were obtained"]
    assert {"Change against lab-minimal", "Boot timeline", 'Kernel memory (the "Memory:" line)',
            "All metrics"} <= set(headings)
    summary = browser.find_element(By.CSS_SELECTOR, "#summary").text
    assert "debug vs lab-minimal (icount mode):" in summary and "fork + exit +82% (worse)" in summary
    how = browser.find_element(By.CSS_SELECTOR, "#how-the-numbers-were-obtained").text
    assert "mode: icount" in how and "an emulated figure, not hardware" in how


def test_names_and_config_strings_from_outside_stay_text(lab, capsys, browser, tmp_path):
    page = tmp_path / "hostile.html"
    variant = f"{HOSTILE}=tinyconfig+CONFIG_FAKE_SLOW=y+boot:note=<img/src/onerror=alert(2)>"
    assert lab.main("compare", "a=tinyconfig", variant, "--format", "html", "-o", str(page)) == 0
    capsys.readouterr()
    text = page.read_text()
    assert HOSTILE not in text and "<img/src" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text          # escaped in the page's text
    specs = re.search(r'id="kernellab-charts">(.*?)</script>', text, re.S).group(1)
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in specs   # and in the chart data
    shown(browser, page, tmp_path, min_charts=3)
    assert no_alert(browser)
    assert browser.title == "kernellab compare: command line"
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, "#all-metrics table").text   # shown, as text
    # The chart's legend shows the name too: the data reached Vega intact.
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, "[data-chart] svg").get_attribute("textContent")


def test_an_evidence_link_is_made_only_for_http_addresses():
    assert html.link("https://lwn.net/Articles/1/") == "https://lwn.net/Articles/1/"
    for bad in ("javascript:alert(1)", "data:text/html,<b>", "https://x/\"onmouseover=\"alert(1)", "lwn.net"):
        assert html.link(bad) == ""


def test_a_study_report(lab, capsys, browser, tmp_path):
    page = tmp_path / "study.html"
    assert lab.main("study", "run", str(study_file(lab)), "--format", "html", "-o", str(page)) == 0
    capsys.readouterr()
    shown(browser, page, tmp_path, min_charts=1)
    summary = browser.find_element(By.CSS_SELECTOR, "#summary").text
    assert summary.startswith("Summary\nSystem calls (slow against fast): null syscall (getppid) 25% worse")
    assert "x86_64: All metrics" in [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]


def test_sweep_and_bisect_reports(lab, capsys, browser, tmp_path):
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "DEBUG_LIST,FAKE_SLOW",
                    "--metric", "syscall.null", "--format", "html") == 0
    page = tmp_path / "sweep.html"
    page.write_text(capsys.readouterr().out)
    shown(browser, page, tmp_path, min_charts=1)
    table = browser.find_element(By.TAG_NAME, "table").text
    assert "CONFIG_FAKE_SLOW=y" in table and "CONFIG_DEBUG_LIST=y" in table

    assert lab.main("bisect", "good=tinyconfig", "bad=tinyconfig+CONFIG_DEBUG_KERNEL=y+CONFIG_FAKE_SLOW=y",
                    "--metric", "syscall.null", "--format", "html") == 0
    page = tmp_path / "bisect.html"
    page.write_text(capsys.readouterr().out)
    shown(browser, page, tmp_path, min_charts=1)
    culprits = browser.find_element(By.CSS_SELECTOR, "#culprits").text
    assert "CONFIG_FAKE_SLOW=y" in culprits


def test_an_audit_report_groups_rules_by_verdict_with_their_evidence(browser, tmp_path):
    finding = {"rule": "r", "title": "Lock debugging off", "category": "debugging", "option": "CONFIG_PROVE_LOCKING",
               "current": "y", "expected": ["n"], "verdict": "change", "reason": "", "recommended": "n",
               "settings": [], "metric": None, "expected_change": None,
               "evidence": [{"source": "https://lwn.net/Articles/185666/", "figure": "lockdep costs", "verified": True,
                             "note": ""}]}
    hostile = finding | {"title": HOSTILE, "verdict": "ok",
                         "evidence": [{"source": "javascript:alert(3)", "figure": "x", "verified": False, "note": ""}]}
    page = tmp_path / "audit.html"
    page.write_text(html.audit_page([finding, hostile], "my.config", "latency"))
    assert load(browser, page) == []
    assert no_alert(browser)
    link = browser.find_element(By.CSS_SELECTOR, "#recommended-changes a")
    assert link.get_attribute("href") == "https://lwn.net/Articles/185666/"
    assert browser.find_elements(By.CSS_SELECTOR, "#already-as-recommended a") == []   # no javascript: link
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, "#already-as-recommended").text


def test_json_in_a_script_cannot_close_it():
    text = html._json_for_script({"name": "</script><script>alert(1)</script>", "amp": "&"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"name": "</script><script>alert(1)</script>", "amp": "&"}


@pytest.mark.parametrize("fmt", ["html"])
def test_show_renders_a_saved_report_as_html(lab, capsys, tmp_path, fmt):
    saved = tmp_path / "r.json"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json",
                    "-o", str(saved)) == 0
    assert lab.main("show", str(saved), "--format", fmt) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and "kernellab compare: command line" in out
