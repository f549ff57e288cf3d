"""kernellab's own figures in the rule files come from results files committed in
`results/` (`kernellab study run NAME --format results`): each citation names a file that
exists and is a results file, and every percentage its figure quotes is one that file
measured for the rule's options."""

import json
import re
from pathlib import Path

from kernellab import knowledge
from kernellab.report.costtable import RESULTS

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
                                             "slub-debug-on", "cpu-mitigations-built", "init-on-alloc",
                                             "stackprotector", "randomize-kstack-offset", "ftrace-off-embedded"}
    for rule, ev in citations:
        path = ROOT / ev.source.removeprefix("kernellab:").split()[0]
        data = json.loads(path.read_text())
        assert data["format"] == RESULTS.tag and data["emulated"] is True, path
        quoted = PERCENT.findall(ev.figure)
        assert quoted, f"{rule.id}: the figure quotes no measured change"
        assert set(quoted) <= measured(data, rule.options()), (rule.id, set(quoted) - measured(data, rule.options()))
        assert ev.verified is True and data["date"] in ev.figure and data["kernellab"] in ev.figure


def test_no_kernellab_figure_is_left_unverified():
    for rule in knowledge.load_rules():
        for ev in rule.evidence:
            if ev.source.startswith("kernellab:"):
                assert ev.verified is not False, f"{rule.id} cites {ev.source} unverified"


def test_cite_prints_a_block_per_rule_that_quotes_the_file_as_the_rules_must(capsys):
    """What `kernellab cite` prints passes the checks a committed citation must pass."""
    import tomllib

    from kernellab.cli import main
    assert main(["cite", "results/debug-cost.json"]) == 0
    out = capsys.readouterr().out
    data = json.loads((ROOT / "results/debug-cost.json").read_text())
    rules = {r.id: r for r in knowledge.load_rules()}
    blocks = re.findall(r"^# rule (\S+) .*\n((?:(?!# rule).*\n)+)", out, re.MULTILINE)
    assert {"lockdep", "debug-list", "slub-debug-on"} <= {rule_id for rule_id, _ in blocks}
    for rule_id, text in blocks:
        (ev,) = tomllib.loads(text)["rule"]["evidence"]
        assert ev["source"] == "kernellab:results/debug-cost.json" and ev["verified"] is True
        quoted = PERCENT.findall(ev["figure"])
        assert quoted and set(quoted) <= measured(data, rules[rule_id].options()), rule_id
        assert data["date"] in ev["figure"] and data["kernellab"] in ev["figure"]
    assert "DEBUG_LIST=y: " in dict(blocks)["debug-list"] and "context switch, 2 procs, 0 KiB +12.5%" in out


def test_cite_says_what_the_emulated_cpu_never_needed_and_what_was_not_set():
    from kernellab.knowledge import cite
    rule = next(r for r in knowledge.load_rules() if r.id == "page-table-isolation")
    results = {"kernellab": "0.1.0", "date": "2026-11-26", "sweeps": [{
        "label": "x86_64, on from lean", "mode": "icount", "runs": 1, "flipped_on": "debian:6.1 (6.1.192), x86_64",
        "options": [{"option": "CONFIG_PAGE_TABLE_ISOLATION", "value": "y", "delta_pct": {"syscall.null": 0.0},
                     "inactive_on_emulated_cpu": ["meltdown"]},
                    {"option": "CONFIG_MITIGATION_PAGE_TABLE_ISOLATION", "value": "y",
                     "not_measured": "olddefconfig does not set it alone: asked y, got n"}]}]}
    text = cite.evidence(rule, results, "results/costs.json")
    assert "PAGE_TABLE_ISOLATION=y: null syscall (getppid) +0.0%, inactive on the emulated CPU (meltdown not " \
           "affected)" in text
    assert "MITIGATION_PAGE_TABLE_ISOLATION=y not measured (olddefconfig does not set it alone" in text
    assert cite.evidence(rule, {**results, "sweeps": []}, "results/costs.json") is None
    assert "QEMU TCG" in text and "emulated figures" in text
    on_hardware = cite.evidence(rule, {**results, "emulated": False}, "results/costs.json")
    assert "QEMU TCG" not in on_hardware and "emulated figures" not in on_hardware


def test_cite_refuses_what_is_not_a_results_file_in_one_line(tmp_path, capsys):
    from kernellab.cli import main
    other = tmp_path / "report.json"
    other.write_text('{"format": "kernellab-report"}')
    assert main(["cite", str(other)]) == 2
    assert f"{other}: not a kernellab-option-costs file" in capsys.readouterr().err
    assert main(["cite", "results/debug-cost.json", "--rule", "no-such-rule"]) == 2
    assert "unknown rule no-such-rule" in capsys.readouterr().err
    assert main(["cite", "results/debug-cost.json", "--rule", "hz-1000-latency"]) == 2
    assert "measured none of the options of the rules hz-1000-latency" in capsys.readouterr().err


def test_cite_sweep_cites_one_sweep_of_the_file(capsys):
    """`cite --sweep LABEL`: a rule's figure quotes that sweep only, not every sweep of the file."""
    from kernellab.cli import main
    labels = [sweep["label"] for sweep in json.loads((ROOT / "results/costs.json").read_text())["sweeps"]]
    assert len(labels) > 1
    assert main(["cite", "results/costs.json", "--rule", "retpoline"]) == 0
    every = capsys.readouterr().out
    cited = [label for label in labels if label in every]
    assert len(cited) > 1, every
    assert main(["cite", "results/costs.json", "--rule", "retpoline", "--sweep", cited[-1]]) == 0
    one = capsys.readouterr().out
    assert cited[-1] in one and not any(label in one for label in labels if label != cited[-1])
    assert len(one) < len(every)
    assert main(["cite", "results/costs.json", "--sweep", "no such sweep"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no sweep 'no such sweep' in the results file: give one of" in err
    assert repr(labels[0]) in err
