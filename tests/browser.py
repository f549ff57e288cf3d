"""A real browser for the HTML reports' tests: Debian's headless Chromium through its own
chromedriver (never a downloaded one), and what a test asks of a page: did it draw, did
it complain, did anything run that should not.

    python tests/browser.py REPORT.html OUT.png     # a screenshot of a report, full page
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def start() -> webdriver.Chrome:
    # Selenium Manager would fetch a browser or driver it thinks is missing: never here.
    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


@dataclass
class Drawn:
    """One chart element: its rectangle in the page and how many of its pixels are not
    background (white), read from a screenshot."""
    id: str
    inked: int
    area: int


def load(driver: webdriver.Chrome, page: Path, wait_s: float = 20.0) -> list[dict]:
    """Opens a report and waits until vega-embed has drawn every chart (an <svg> in each);
    returns the console messages of the load."""
    driver.get(page.resolve().as_uri())
    charts = len(driver.find_elements(By.CSS_SELECTOR, "[data-chart]"))
    driver.set_script_timeout(wait_s)
    driver.execute_async_script("""
        const [want, done] = [arguments[0], arguments[arguments.length - 1]];
        const start = Date.now();
        (function poll() {
          const drawn = document.querySelectorAll('[data-chart] svg').length;
          if (drawn >= want || Date.now() - start > 15000) done(drawn); else setTimeout(poll, 50);
        })();""", charts)
    return driver.get_log("browser")


def inked_charts(driver: webdriver.Chrome) -> list[Drawn]:
    """Each chart's share of drawn pixels, from a full-page screenshot."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(height + 100, 16000))
    shot = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("L")
    scale = shot.width / driver.execute_script("return window.innerWidth")
    drawn = []
    for el in driver.find_elements(By.CSS_SELECTOR, "[data-chart]"):
        r = el.rect
        box = tuple(int(v * scale) for v in (r["x"], r["y"], r["x"] + r["width"], r["y"] + r["height"]))
        region = numpy.asarray(shot.crop(box))
        drawn.append(Drawn(el.get_attribute("id"), int((region < 200).sum()), region.size))
    return drawn


def overflowing(driver: webdriver.Chrome) -> list[str]:
    """What is cut off or sticks out at the window's width: the page wider than the
    window, a table or chart wider than the column it sits in, a cell's text wider than
    its cell. Empty when everything fits."""
    found: list[str] = driver.execute_script("""
        const out = [];
        const page = document.scrollingElement;
        if (page.scrollWidth > window.innerWidth) out.push(`page: ${page.scrollWidth} px > ${window.innerWidth} px`);
        const column = document.body.getBoundingClientRect();
        const inner = column.right - parseFloat(getComputedStyle(document.body).paddingRight);
        for (const el of document.querySelectorAll('table, [data-chart] svg, pre, h1, h2, h3, p, li')) {
          const r = el.getBoundingClientRect();
          if (r.right > inner + 1)
            out.push(`${el.tagName.toLowerCase()} "${el.textContent.slice(0, 60)}": ` +
                     `right edge ${Math.round(r.right)} px > ${Math.round(inner)} px`);
        }
        for (const cell of document.querySelectorAll('td, th')) {
          if (cell.scrollWidth > cell.clientWidth + 1)
            out.push(`cell "${cell.textContent.slice(0, 60)}": ${cell.scrollWidth} px in ${cell.clientWidth} px`);
        }
        return out;""")
    return found


def chart_labels(driver: webdriver.Chrome) -> dict[str, list[list[str]]]:
    """Per chart (its id), the labels of each of its axes and legends as drawn, in order."""
    labels: dict[str, list[list[str]]] = driver.execute_script("""
        const out = {};
        for (const chart of document.querySelectorAll('[data-chart]')) {
          out[chart.id] = Array.from(chart.querySelectorAll('g.role-axis, g.role-legend')).map(g =>
            Array.from(g.querySelectorAll('g.role-axis-label text, g.role-legend-label text'))
              .map(t => Array.from(t.querySelectorAll('tspan')).map(s => s.textContent).join(' ') || t.textContent));
        }
        return out;""")
    return labels


def screenshot(driver: webdriver.Chrome, out: Path) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(height + 100, 16000))
    driver.save_screenshot(str(out))


if __name__ == "__main__":
    report, out = Path(sys.argv[1]), Path(sys.argv[2])
    browser = start()
    try:
        for entry in load(browser, report):
            print(entry["level"], entry["message"], file=sys.stderr)
        screenshot(browser, out)
    finally:
        browser.quit()


try:
    from fakes import lab_fixture  # needs pytest

    @lab_fixture(scope="session")
    def browser():
        """One headless Chromium for the session's page tests."""
        driver = start()
        yield driver
        driver.quit()
except ImportError:   # run as a script, without pytest
    pass
