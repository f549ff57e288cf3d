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
    import pytest

    @pytest.fixture(scope="session")
    def browser():
        """One headless Chromium for the session's page tests."""
        driver = start()
        yield driver
        driver.quit()
except ImportError:   # run as a script, without pytest
    pass
