"""`kernellab show RESULTS.json`: a results file as the cost table a person reads, from
the committed debug-cost file and a small one with what a mitigation sweep holds."""

import json
from pathlib import Path

from kernellab.cli import main
from kernellab.report import costtable

ROOT = Path(__file__).resolve().parents[1]
DEBUG = json.loads((ROOT / "results/debug-cost.json").read_text())

MITIGATIONS = {
    "format": "kernellab-option-costs", "format_version": 1, "study": "costs", "title": "costs",
    "date": "2026-11-26", "kernellab": "0.1.0", "emulated": True,
    "sweeps": [{"label": "6.1, each option on from lean", "arch": "x86_64", "mode": "icount", "runs": 1,
                "flipped_on": "debian:6.1 (6.1.192), x86_64, base lab-minimal",
                "baseline": {"syscall.null": 202.147, "size.image": 2313.0},
                "options": [
                    {"option": "CONFIG_PAGE_TABLE_ISOLATION", "value": "y",
                     "delta_pct": {"syscall.null": 0.0, "size.image": 0.4},
                     "inactive_on_emulated_cpu": ["meltdown"]},
                    {"option": "CONFIG_INIT_ON_ALLOC_DEFAULT_ON", "value": "y",
                     "delta_pct": {"syscall.null": None, "size.image": 0.1}},
                    {"option": "CONFIG_RETHUNK", "value": "n", "delta_pct": {"syscall.null": -3.0, "size.image": -1.7},
                     "inactive_on_emulated_cpu": ["retbleed"], "mitigates": ["retbleed", "indirect_target_selection"]},
                    {"option": "CONFIG_RETPOLINE", "value": "y",
                     "delta_pct": {"syscall.null": 12.34, "size.image": 2.0}, "with": ["CONFIG_CC_HAS_RETPOLINE=y"]},
                    {"option": "CONFIG_MITIGATION_RFDS", "value": "y",
                     "not_measured": "olddefconfig does not set it alone: asked y, got n"}]}]}


def test_options_are_ranked_by_their_largest_run_time_change_sizes_breaking_ties():
    sweep = DEBUG["sweeps"][0]
    order = [r["option"] for r in costtable.ranked(sweep)]
    # PROVE_LOCKING moves the null syscall +829%, SLUB_DEBUG_ON fork+exit +439%, then lockdep's +329%.
    assert order[:3] == ["CONFIG_PROVE_LOCKING", "CONFIG_SLUB_DEBUG_ON", "CONFIG_DEBUG_LOCK_ALLOC"]
    assert [r["option"] for r in costtable.ranked(MITIGATIONS["sweeps"][0])] == [
        "CONFIG_RETPOLINE", "CONFIG_RETHUNK", "CONFIG_PAGE_TABLE_ISOLATION", "CONFIG_INIT_ON_ALLOC_DEFAULT_ON"]


def test_the_markdown_says_how_each_figure_was_obtained_and_what_it_could_not_measure():
    md = costtable.markdown(MITIGATIONS)
    assert ("#### 6.1, each option on from lean: each option switched alone on debian:6.1 (6.1.192), x86_64, "
            "base lab-minimal (icount, 1 run, QEMU TCG, emulated figures; kernellab 0.1.0, 2026-11-26)") in md
    assert "baseline: null syscall (getppid) 202.1 ns (icount), boot image 2,313 KiB" in md
    assert "| option | null syscall (getppid) | boot image | note |\n|---|---:|---:|---|" in md
    assert "| RETPOLINE=y | +12.3% | +2.0% | with CC_HAS_RETPOLINE=y |" in md
    assert "| PAGE_TABLE_ISOLATION=y | 0% | +0.4% | inactive on the emulated CPU (meltdown not affected) |" in md
    assert "| INIT_ON_ALLOC_DEFAULT_ON=y | - | +0.1% |  |" in md
    # A flip that also removed a mitigation which ran is not called inactive.
    assert ("| RETHUNK=n | -3.0% | -1.7% | partly inactive on the emulated CPU (retbleed not affected; "
            "the rest ran) |") in md
    assert "- not measured: MITIGATION_RFDS=y: olddefconfig does not set it alone" in md


def test_show_renders_a_results_file_and_refuses_what_it_cannot_do_in_one_line(tmp_path, capsys):
    out = tmp_path / "debug.md"
    assert main(["show", "results/debug-cost.json", "--format", "markdown", "-o", str(out)]) == 0
    assert "| PROVE_LOCKING=y | -2.9% | +193.8% | +829.0% | +596.8% | +145.4% | with " in out.read_text()
    capsys.readouterr()
    assert main(["show", "results/debug-cost.json", "--format", "csv"]) == 2
    assert "a results file renders as table, markdown, json, not csv" in capsys.readouterr().err
    assert main(["show", "results/debug-cost.json", "--fail-on", "syscall.null:+5"]) == 2
    assert "is a results file; the gate reads a compare report" in capsys.readouterr().err
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**MITIGATIONS, "format_version": 9}))
    assert main(["show", str(newer)]) == 2
    assert "kernellab-option-costs format 9; this kernellab reads format 1" in capsys.readouterr().err


def screen_tables(text):
    """Each table of a cost table on a screen: its headers (each column's header lines joined
    as a reader reads them: after a hyphen without a space) and its rows' cells."""
    lines, tables = text.splitlines(), []
    for i, line in enumerate(lines):
        if "─┼─" not in line:
            continue
        top = i
        while "│" in lines[top - 1]:
            top -= 1
        columns: list[list[str]] = []
        for head in lines[top:i]:
            for n, piece in enumerate(p.strip() for p in head.split("│")):
                columns += [[] for _ in range(n + 1 - len(columns))]
                columns[n] += [piece] if piece else []
        heads = ["".join(p if not c or c[-1].endswith("-") else f" {p}" for c, p in
                         ((col[:k], part) for k, part in enumerate(col))).strip() for col in columns]
        rows = []
        for row in lines[i + 1:]:
            if "│" not in row:
                break
            rows.append([c.strip() for c in row.split("│")])
        tables.append((heads, rows))
    return tables


def test_at_80_columns_no_header_or_figure_is_cut(capsys, monkeypatch):
    """Every sweep of the committed results files on 80 columns: no line wider, every
    header whole (folded between words, "AES-256-" over "CBC in", or a letter that a legend
    line names), every figure whole; an option shortened in its middle is said to be."""
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("debug-cost", "costs"):
        results = json.loads((ROOT / f"results/{name}.json").read_text())
        assert main(["show", f"results/{name}.json"]) == 0
        text = capsys.readouterr().out
        assert max(map(len, text.splitlines())) <= 80
        words = " ".join(text.split())
        tables = screen_tables(text)
        assert len(tables) == len(results["sweeps"])
        for (heads, rows), sweep in zip(tables, results["sweeps"], strict=True):
            labels = costtable.head(sweep)[1:-1]
            assert heads[0] == "option" and "…" not in " ".join(heads)
            if heads[1:] != labels:   # lettered: the legend names each letter's metric, whole
                assert heads[1:] == [chr(ord("A") + k) for k in range(len(labels))], heads
                assert "columns: " + "; ".join(f"{k} = {m}" for k, m in zip(heads[1:], labels, strict=True)) in words
            whole = costtable._rows(sweep)
            assert [r[1:] for r in rows] == [r[1:len(heads)] for r in whole]   # each figure as the file has it
            shortened = [r[0] for r in rows if "…" in r[0]]
            assert [r[0] for r in rows if "…" not in r[0]] == [r[0] for r in whole if r[0] in
                                                                 {x[0] for x in rows}]
            assert not shortened or "shortened to fit 80 columns: the middle of long options" in words
        if name == "debug-cost":
            assert tables[0][0][1] == "AES-256-CBC in the kernel (AF_ALG)"   # folded, not lettered
