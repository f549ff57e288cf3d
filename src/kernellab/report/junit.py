"""The gate's verdicts as JUnit XML, which GitLab, Jenkins and GitHub's test reporters read:
one test case per gated metric and variant, failed when its rule is broken.

Every text passes through `printable` on its way in: XML 1.0 has no way to write most
control characters, even escaped, and a CI that cannot parse the file cannot read the
verdict (a variant named with one would otherwise break it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from junitparser import Failure, JUnitXml, TestCase, TestSuite

from . import header_lines
from .terminal import printable


class _Rule(Protocol):
    @property
    def text(self) -> str: ...


class Check(Protocol):
    """One of the gate's verdicts (kernellab.gate.Check), as much of it as this page reads:
    the gate sits above the reports, and hands its checks down."""
    @property
    def rule(self) -> _Rule: ...
    @property
    def metric(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def broken(self) -> bool: ...
    @property
    def detail(self) -> str: ...
    def line(self) -> str: ...


def render(report: dict[str, Any], checks: Sequence[Check]) -> str:
    suite = TestSuite(printable(f"kernellab {report['experiment']}"))
    # How the numbers were obtained travels with them, as the suite's properties.
    suite.add_property("mode", printable(report["mode"]))
    suite.add_property("how", printable("\n".join(header_lines(report))))
    for c in checks:
        case = TestCase(printable(f"{c.metric} [{c.variant}]"), classname=printable(f"kernellab.{c.rule.text}"))
        if c.broken:
            case.result = [Failure(printable(c.detail), type_="regression")]
        case.system_out = printable(c.line())
        suite.add_testcase(case)
    xml = JUnitXml("kernellab")
    xml.add_testsuite(suite)
    xml.update_statistics()  # type: ignore[no-untyped-call]
    text: bytes = xml.tostring()  # type: ignore[no-untyped-call]
    return text.decode() + "\n"
