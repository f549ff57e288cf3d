import csv
import io
import json

from kernellab.report import render, summary


def fake_report():
    def val(median, n=1):
        return {"median": median, "n": n, "samples": [median] * n, "q1": median * 0.99,
                "q3": median * 1.01, "min": median * 0.98, "max": median * 1.02}
    return {
        "experiment": "t", "description": "", "mode": "icount", "mode_note": "emulated, not hardware",
        "runs_per_variant": 1,
        "machine": {"host": "h", "cpu": "cpu", "cores": 2, "kernel": "6.1", "qemu": "QEMU 7.2"},
        "variants": [
            {"name": "a", "source": "debian:6.1", "source_version": "6.1.192", "arch": "x86_64",
             "base": "lab-minimal", "fragments": [], "options": [], "config_hash": "0" * 64,
             "dropped_options": [], "build": {"jobs": 2, "compiler": "gcc 12", "ccache_hit_pct": 0.0},
             "runs": [{"id": 1, "status": "ok", "reason": ""}]},
            {"name": "b", "source": "debian:6.1", "source_version": "6.1.192", "arch": "x86_64",
             "base": "lab-minimal", "fragments": ["debug-kernel"], "options": [], "config_hash": "1" * 64,
             "dropped_options": [{"option": "CONFIG_X", "asked": "y", "got": "n", "origin": "f:1"}],
             "build": {"jobs": 2, "compiler": "gcc 12", "ccache_hit_pct": None},
             "runs": [{"id": 2, "status": "panic", "reason": "Kernel panic"}]},
        ],
        "metrics": [
            {"name": "syscall.null", "label": "null syscall", "unit": "ns", "better": "lower",
             "group": "runtime", "clock": "guest", "values": {"a": val(200.0, 5), "b": val(300.0, 5)},
             "delta_pct": {"b": 50.0}},
            {"name": "size.image", "label": "compressed image", "unit": "KiB", "better": "lower",
             "group": "size", "clock": "build", "values": {"a": val(1000.0), "b": val(1020.0)},
             "delta_pct": {"b": 2.0}},
        ],
    }


def test_table_says_mode_machine_and_failures():
    text = render(fake_report(), "table")
    assert "mode: icount" in text and "not hardware" in text and "QEMU 7.2" in text
    assert "asked CONFIG_X=y, got n" in text and "run 2 panic" in text
    assert "+50.0%" in text and "200.0 ±1.0% n=5" in text


def test_markdown_and_summary():
    md = render(fake_report(), "markdown")
    assert "| null syscall | ns | 200.0 ±1.0% n=5 | 300.0 ±1.0% n=5 | +50.0% |" in md
    assert summary(fake_report()) == "b vs a (icount mode) - runtime: null syscall +50% (worse)."


def test_csv_has_one_row_per_metric_and_variant():
    rows = list(csv.DictReader(io.StringIO(render(fake_report(), "csv"))))
    assert len(rows) == 4
    b_null = next(r for r in rows if r["variant"] == "b" and r["metric"] == "syscall.null")
    assert float(b_null["median"]) == 300.0 and float(b_null["delta_pct"]) == 50.0 and b_null["mode"] == "icount"


def test_json_is_the_report():
    assert json.loads(render(fake_report(), "json")) == fake_report()
