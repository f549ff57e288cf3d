"""The compare report as a kind of result (report/kinds.py): its tag, its versions and its
formats. The report itself is built in report/model.py; its views live where they are
shared with the study's report: table, Markdown and CSV in report/__init__.py and
report/table.py, the HTML page in report/html.py, the gate's JUnit in report/junit.py."""

from __future__ import annotations

from typing import Any

from . import kinds
from .model import FORMAT_VERSION, READABLE_VERSIONS, upgrade


def _text(fmt: str) -> kinds.Renderer:
    def render_text(report: dict[str, Any], view: kinds.View) -> str:
        from . import render
        return render(report, fmt, view.show_all, view.screen, view.verbose)
    return render_text


def _html(report: dict[str, Any], view: kinds.View) -> str:
    from . import html  # the charting libraries load only for an HTML page
    return html.compare_page(report)


def _junit(report: dict[str, Any], view: kinds.View) -> str:
    from . import junit
    return junit.render(report, view.checks)


COMPARE = kinds.register(kinds.Kind(
    name="compare", tag="kernellab-compare", what="a compare report", version=FORMAT_VERSION,
    readable=READABLE_VERSIONS, schema="schema.json",
    rewrite="rerun the experiment with `kernellab compare --format json -o FILE` (its builds and samples are in "
            "the store) or use the kernellab that wrote it",
    renderers={"table": _text("table"), "markdown": _text("markdown"), "csv": _text("csv"), "html": _html,
               "junit": _junit},
    formats=("table", "markdown", "json", "csv", "html", "junit"), gated=True, untagged=True,
    from_dict=upgrade))   # a report of an earlier format, judged as this kernellab judges
