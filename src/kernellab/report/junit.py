"""The gate's verdicts as JUnit XML, which GitLab, Jenkins and GitHub's test reporters read:
one test case per gated metric and variant, failed when its rule is broken."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from junitparser import Failure, JUnitXml, TestCase, TestSuite

from ..gate import Check
from . import header_lines


def render(report: dict[str, Any], checks: Sequence[Check]) -> str:
    suite = TestSuite(f"kernellab {report['experiment']}")
    # How the numbers were obtained travels with them, as the suite's properties.
    suite.add_property("mode", report["mode"])
    suite.add_property("how", "\n".join(header_lines(report)))
    for c in checks:
        case = TestCase(f"{c.metric} [{c.variant}]", classname=f"kernellab.{c.rule.text}")
        if c.broken:
            case.result = [Failure(c.detail, type_="regression")]
        case.system_out = c.line()
        suite.add_testcase(case)
    xml = JUnitXml("kernellab")
    xml.add_testsuite(suite)
    xml.update_statistics()  # type: ignore[no-untyped-call]
    text: bytes = xml.tostring()  # type: ignore[no-untyped-call]
    return text.decode() + "\n"
