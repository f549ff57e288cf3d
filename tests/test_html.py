"""HTML reports, looked at in a real browser (Debian's headless Chromium): the charts are
drawn (pixels of a screenshot), the page says nothing on its console, fetches nothing, and
what came from outside stays text."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from browser import chart_labels, inked_charts, load, overflowing, screenshot
from kernellab.report import html
from test_provenance_views import LINE as PROVENANCE
from test_provenance_views import swept_study
from test_study import SWEPT, study_file
from test_study_measured_only import measured_only, stop_the_sweep_part_way
from test_workload_provenance import debian_userland  # noqa: F401  (a fixture)

HOSTILE = "<script>alert(1)</script>"
LIMIT = 2 * 1024 * 1024


def shown(browser, page: Path, tmp_path: Path, min_charts: int) -> list:
    """Loads a report; checks a clean console and that every chart drew; saves a screenshot."""
    console = load(browser, page)
    assert [e for e in console if e["level"] in ("SEVERE", "WARNING")] == []
    open_folded(browser)   # every chart, the folded ones too, draws once opened
    charts = inked_charts(browser)
    assert len(charts) >= min_charts
    for c in charts:
        # An empty vega view leaves a white box; a drawn one has axes, labels and marks.
        assert c.inked > 0.01 * c.area, c
    fits_and_labels_are_distinct(browser)
    screenshot(browser, tmp_path / f"{page.stem}.png")
    assert (tmp_path / f"{page.stem}.png").stat().st_size > 10_000
    return charts


def fits_and_labels_are_distinct(browser) -> None:
    """At 1,280 px nothing is cut off or sticks out, and on every chart no two labels of an
    axis or legend read the same, none is cut short (…), no legend has a single entry."""
    browser.set_window_size(1280, 900)
    sticking_out = overflowing(browser)
    assert not sticking_out, "\n".join(sticking_out)
    drawn = chart_labels(browser)
    for chart, groups in drawn.items():
        for labels in groups:
            assert len(set(labels)) == len(labels), (chart, labels)
            assert not [label for label in labels if "…" in label], (chart, labels)
    for chart in drawn:
        for legend in browser.find_elements(By.CSS_SELECTOR, f"#{chart} g.role-legend"):
            assert len(legend.find_elements(By.CSS_SELECTOR, "g.role-legend-label text")) > 1, chart


def open_folded(browser) -> None:
    """Opens every folded section (<details>) as a reader's click on its line would."""
    for line in browser.find_elements(By.CSS_SELECTOR, "details:not([open]) > summary"):
        browser.execute_script("arguments[0].scrollIntoView()", line)
        line.click()


def page_height(browser) -> int:
    """The document's height at 1,280 px (a window as tall as the page would count itself)."""
    browser.set_window_size(1280, 900)
    return browser.execute_script("return document.documentElement.scrollHeight")


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
    # The values chart writes the name too: the data reached Vega intact.
    values = browser.find_element(By.CSS_SELECTOR, "#values-per-variant [data-chart] svg")
    assert HOSTILE in values.get_attribute("textContent")


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


def section_ids(browser) -> list[str]:
    return [s.get_attribute("id") for s in browser.find_elements(By.TAG_NAME, "section")]


@pytest.mark.usefixtures("debian_userland")
def test_a_study_page_shows_its_sweep_as_a_sweep_page_does(lab, capsys, browser, tmp_path):
    """The sweep's own sections (how, each metric's options ranked, what each flip changed),
    headed by its label, before the text report and apart from it, with its workload's provenance."""
    page = tmp_path / "swept.html"
    assert lab.main("study", "run", str(swept_study(lab, tmp_path)), "--format", "html", "-o", str(page)) == 0
    capsys.readouterr()
    shown(browser, page, tmp_path, min_charts=3)   # the compare's change and values, the sweep's ranking
    ids = section_ids(browser)
    assert len(set(ids)) == len(ids)
    sweep = ["x86-64-sweep-one-option-at-a-time", "x86-64-timed-time-the-options-ranked-by-effect",
             "x86-64-what-each-flip-changed"]
    assert ids[ids.index(sweep[0]):] == [*sweep, "the-text-report"]
    how = browser.find_element(By.ID, sweep[0])
    assert how.find_element(By.TAG_NAME, "h2").text == "x86_64: sweep, one option at a time"
    assert PROVENANCE in how.text and "1 option(s) flipped one at a time from the baseline" in how.text
    ranked = browser.find_element(By.CSS_SELECTOR, f"#{sweep[1]} [data-chart] svg")
    assert "CONFIG_FAKE_SLOW=y" in ranked.get_attribute("textContent")
    flips = browser.find_element(By.CSS_SELECTOR, f"#{sweep[2]} table").text
    assert "CONFIG_FAKE_SLOW=y" in flips


def test_a_measured_only_study_page_names_its_sweeps_flips_not_measured(lab, capsys, browser, tmp_path,
                                                                         monkeypatch):
    path = study_file(lab, text=SWEPT)
    stop_the_sweep_part_way(lab, capsys, monkeypatch, path)
    report, _ = measured_only(lab, capsys, path)
    (flip,) = (f"{f['option']}={f['value']}" for f in report["sweeps"]["x86_64"]["flips"])
    (left,) = report["measured_only"]["sweeps"]["x86_64"]["not_measured"]
    measured_only(lab, capsys, path, fmt="html")
    shown(browser, lab.tmp / "so-far.html", tmp_path, min_charts=2)
    how = browser.find_element(By.ID, "x86-64-sweep-one-option-at-a-time").text
    assert f"not measured yet on x86_64: 1 of 2 options: {left}" in how
    flips = browser.find_element(By.CSS_SELECTOR, "#x86-64-what-each-flip-changed table").text
    assert flip in flips and left not in flips


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


def audit_document(findings, config):
    """An audit as `kernellab audit --format json` writes it, around these findings (one rule each)."""
    for f in findings:
        f.setdefault("rule_verdict", f["verdict"])
    total = Counter(f["rule_verdict"] for f in findings)
    return {"config": config, "where": "Linux 6.1, x86_64", "profile": "latency",
            "profile_reason": "given with --profile", "only": None, "findings": findings,
            "totals": {"total": dict(total)}}


def test_an_audit_report_groups_rules_by_verdict_with_their_evidence(browser, tmp_path):
    finding = {"rule": "r", "title": "Lock debugging off", "category": "debugging", "option": "CONFIG_PROVE_LOCKING",
               "current": "y", "expected": ["n"], "verdict": "change", "reason": "", "recommended": "n",
               "settings": [], "metric": None, "expected_change": None,
               "evidence": [{"source": "https://lwn.net/Articles/185666/", "figure": "lockdep costs", "verified": True,
                             "note": ""}]}
    hostile = finding | {"title": HOSTILE, "verdict": "ok",
                         "evidence": [{"source": "javascript:alert(3)", "figure": "x", "verified": False, "note": ""}]}
    page = tmp_path / "audit.html"
    page.write_text(html.audit_page(audit_document([finding, hostile], "my.config")))
    assert load(browser, page) == []
    # The counts every view of an audit gives: of rules, as the terminal says them.
    assert "rules: 1 ok, 0 boot, 1 change, 0 n/a (2 rules)" in browser.find_element(By.CSS_SELECTOR, "body").text
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


# -- the page as a reader of Phoronix's result viewer would want it (issue 33) -----------

TIMER = ("timer wakeup latency under load, median", "timer wakeup latency under load, 99th pct",
         "timer wakeup latency under load, max")


def default_report(lab, capsys, tmp_path) -> dict:
    """The fake lab's default experiment as JSON, its syscall rows given what the real one
    showed badly: three labels alike for 32 characters, and +2,289%, +110.9% and +103.8% on
    one chart."""
    saved = tmp_path / "default.json"
    assert lab.main("compare", "--format", "json", "-o", str(saved)) == 0
    capsys.readouterr()
    report = json.loads(saved.read_text())
    metrics = {m["name"]: m for m in report["metrics"]}
    for name, label, delta in zip(("syscall.null", "syscall.read", "syscall.write"), TIMER, (2289.3, 110.9, 103.8),
                                  strict=True):
        metrics[name]["label"] = label
        metrics[name]["verdict"]["debug"]["delta_pct"] = delta
    return report


def drawn_points(browser, chart: str) -> dict[str, float]:
    """Each point of a change chart: its row's label -> its x in pixels."""
    points = browser.execute_script("""
        return Array.from(document.querySelectorAll(`#${arguments[0]} g.mark-symbol.role-mark path`))
          .map(p => [p.getAttribute('aria-label'), p.getAttribute('transform')]);""", chart)
    return {re.search(r"metric: ([^;]+);", label).group(1): float(re.search(r"translate\(([-\d.]+),", at).group(1))
            for label, at in points}


def test_the_compare_page_labels_every_row_whole_and_shows_moderate_changes_apart(lab, capsys, browser, tmp_path):
    page = tmp_path / "compare.html"
    page.write_text(html.compare_page(default_report(lab, capsys, tmp_path)))
    shown(browser, page, tmp_path, min_charts=4)   # fits at 1,280 px, no label twice or cut
    [syscalls] = [c.get_attribute("id") for c in browser.find_elements(By.CSS_SELECTOR, "#change-against-lab-minimal "
                                                                                        "[data-chart]")
                  if "timer wakeup" in c.get_attribute("textContent")]
    labels = [" ".join(group) for group in chart_labels(browser)[syscalls]]
    assert all(label in " ".join(labels).replace("\n", " ") for label in TIMER)
    # A log-ratio axis: +103.8% is a fifth of the way to +2,289% (a linear one: 1/22), and
    # +110.9% stands apart from it (a linear one put them 2 px apart).
    x = drawn_points(browser, syscalls)
    zero = browser.execute_script("""   // the 0% tick, where the points' x counts from
        const tick = Array.from(document.querySelectorAll(`#${arguments[0]} g.role-axis-label text`))
          .find(t => t.textContent === '0%');
        return tick.getAttribute('transform');""", syscalls)
    zero = float(re.search(r"translate\(([-\d.]+),", zero).group(1))
    assert (x[TIMER[2]] - zero) > 0.15 * (x[TIMER[0]] - zero), (x, zero)
    assert x[TIMER[1]] - x[TIMER[2]] > 3
    # The verdicts' one legend says what each means, over the first change chart; no legend of one variant.
    first = browser.find_element(By.CSS_SELECTOR, "#change-against-lab-minimal [data-chart]").get_attribute("id")
    assert chart_labels(browser)[first][-1] == list(html.VERDICT_LEGEND.values())


def test_the_compare_page_shows_each_variants_values_with_their_spread_and_icount_units(lab, capsys, browser,
                                                                                      tmp_path):
    page = tmp_path / "values.html"
    page.write_text(html.compare_page(default_report(lab, capsys, tmp_path)))
    load(browser, page)
    section = browser.find_element(By.CSS_SELECTOR, "#values-per-variant")
    assert "(icount) is an emulated time" not in section.text   # folded: its line says what opens
    open_folded(browser)
    assert "(icount) is an emulated time" in section.text
    drawn = " ".join(c.get_attribute("textContent") for c in section.find_elements(By.CSS_SELECTOR, "svg"))
    assert "ns (icount)" in drawn and "fork + exit" in drawn
    # The median, its spread and n of each variant, as the table gives them, beside bars and whiskers.
    assert re.search(r"lab-minimal: 60,000 ±0\.\d% n=11", drawn) and re.search(r"debug: [\d,.]+ ±\d+\.\d% n=11", drawn)
    rules = browser.find_elements(By.CSS_SELECTOR, "#values-per-variant g.mark-rule line")
    assert len(rules) > 10
    # The table: the icount unit, and each header aligned as its figures are.
    table = browser.find_element(By.CSS_SELECTOR, "#all-metrics table")
    assert "ns (icount)" in table.text
    heads = {th.text: th.value_of_css_property("text-align") for th in table.find_elements(By.CSS_SELECTOR, "thead th")}
    assert heads == {"metric": "left", "unit": "left", "lab-minimal": "right", "debug": "right", "Δ debug": "right"}


def test_an_audit_page_with_long_addresses_and_names_fits_1280_px(browser, tmp_path):
    evidence = {"source": "https://canaltech.com.br/hardware/inception-cpus-amd-perdem-54-de-desempenho-com-"
                          "correcao-da-falha-260046/",
                "figure": "Report of Phoronix's AMD Inception benchmarks on an EPYC 7763 with the IBPB mitigation: "
                          "MariaDB up to -54%", "verified": True, "note": ""}
    findings = [{"rule": f"r{i}", "title": "Return-thunk based Retbleed/Inception mitigations built in",
                 "category": "mitigations-hardening", "option": "CONFIG_RANDOMIZE_KSTACK_OFFSET_DEFAULT",
                 "current": "y", "expected": ["y"], "verdict": "ok", "recommended": "y",
                 "reason": "needs CONFIG_CPU_MITIGATIONS=y, CONFIG_RETPOLINE=y, CONFIG_RETHUNK=y too", "settings": [],
                 "metric": None, "expected_change": None, "evidence": [evidence]} for i in range(8)]
    page = tmp_path / "audit.html"
    page.write_text(html.audit_page(audit_document(findings, "/boot/config-6.1.0-28-cloud-amd64")))
    assert load(browser, page) == []
    fits_and_labels_are_distinct(browser)
    link = browser.find_element(By.CSS_SELECTOR, "#already-as-recommended a")
    assert link.get_attribute("href") == evidence["source"] and link.text.endswith("(canaltech.com.br)")
    screenshot(browser, tmp_path / "audit.png")


def test_the_compare_page_says_the_verdict_legend_once_and_folds_its_reference(lab, capsys, browser, tmp_path):
    """The default experiment's page (the fake lab's report, 9,226 px tall before): the
    verdict legend over the first change chart only, not over every one (each took a line),
    and each variant's values and the image's size folded (<details>) under a line that
    says what they hold. With the change charts, summary and table shown, the page is at
    most 0.6 of itself opened: 4,747 of 8,926 px in Debian's Chromium at 1,280 px (the
    values alone folded leave about 0.7, the size alone 0.85); opened, everything draws
    and nothing is wider than 1,280 px."""
    page = tmp_path / "compare.html"
    page.write_text(html.compare_page(default_report(lab, capsys, tmp_path)))
    load(browser, page)
    verdicts = list(html.VERDICT_LEGEND.values())
    legends = {chart: groups[-1] for chart, groups in chart_labels(browser).items() if groups}
    first = browser.find_element(By.CSS_SELECTOR, "#change-against-lab-minimal [data-chart]").get_attribute("id")
    assert [chart for chart, labels in legends.items() if labels == verdicts] == [first]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#change-against-lab-minimal [data-chart]")) > 3
    lines = {d.find_element(By.XPATH, "./ancestor::section").get_attribute("id"): d.text
             for d in browser.find_elements(By.CSS_SELECTOR, "details:not([open]) > summary")}
    assert set(lines) == {"values-per-variant", "image-size-where-it-goes"}
    assert re.match(r"Show each variant's median, spread and number of samples of the \d+ metrics \(\d+ charts, "
                    r"one per group", lines["values-per-variant"])
    assert lines["image-size-where-it-goes"].startswith("Show where the image's bytes go, by directory and by symbol")
    assert browser.find_element(By.CSS_SELECTOR, "#all-metrics table").is_displayed()
    folded = page_height(browser)
    charts = shown(browser, page, tmp_path, min_charts=4)   # opened: every chart draws, nothing wider than 1,280 px
    assert len(charts) == len(browser.find_elements(By.CSS_SELECTOR, "[data-chart]"))
    opened = page_height(browser)
    assert folded <= 0.6 * opened, (folded, opened)
