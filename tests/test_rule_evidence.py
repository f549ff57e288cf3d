"""kernellab's own figures in the rule files come from results files committed in
`results/` (`kernellab study run NAME --format results`): each citation names a file that
exists and is a results file, and every percentage its figure quotes is one that file
measured for the rule's options."""

import json
import re
from pathlib import Path

from kernellab import knowledge
from kernellab.report.results import RESULTS_FORMAT

ROOT = Path(__file__).resolve().parents[1]
PERCENT = re.compile(r"[+-]\d+(?:\.\d+)?%")


def cited():
    for rule in knowledge.load_rules():
        for ev in rule.evidence:
            if ev.source.startswith("kernellab:results/"):
                yield rule, ev


def measured(data, options):
    """Every figure the file holds for these options, as a figure would quote it."""
    out = set()
    for sweep in data["sweeps"]:
        for row in sweep["options"]:
            if row["option"] in options:
                out |= {f"{v:+.1f}%" for v in row.get("delta_pct", {}).values() if v is not None}
    return out


def test_kernellab_figures_quote_a_committed_results_file():
    citations = list(cited())
    assert {r.id for r, _ in citations} >= {"lockdep", "lock-debug-primitives", "debug-atomic-sleep", "debug-list",
                                             "slub-debug-on"}
    for rule, ev in citations:
        path = ROOT / ev.source.removeprefix("kernellab:").split()[0]
        data = json.loads(path.read_text())
        assert data["format"] == RESULTS_FORMAT and data["emulated"] is True, path
        quoted = PERCENT.findall(ev.figure)
        assert quoted, f"{rule.id}: the figure quotes no measured change"
        assert set(quoted) <= measured(data, rule.options()), (rule.id, set(quoted) - measured(data, rule.options()))
        assert ev.verified is True and data["date"] in ev.figure and data["kernellab"] in ev.figure


def test_no_kernellab_figure_is_left_unverified():
    for rule in knowledge.load_rules():
        for ev in rule.evidence:
            if ev.source.startswith("kernellab:"):
                assert ev.verified is not False, f"{rule.id} cites {ev.source} unverified"
