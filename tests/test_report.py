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
        "runs_per_variant": {"a": 1, "b": 1}, "statistics": "exact",
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
             "group": "syscalls", "clock": "guest", "valid_in_mode": True,
             "values": {"a": val(200.0, 5), "b": val(300.0, 5)}, "delta_pct": {"b": 50.0},
             "comparison": {"b": {"delta_pct": 50.0, "testable": True, "significant": True, "direction": "worse",
                                  "ci_low_pct": 45.0, "ci_high_pct": 55.0}}},
            {"name": "size.image", "label": "compressed image", "unit": "KiB", "better": "lower",
             "group": "size", "clock": "build", "valid_in_mode": True,
             "values": {"a": val(1000.0), "b": val(1020.0)}, "delta_pct": {"b": 2.0},
             "comparison": {"b": {"delta_pct": 2.0, "testable": False, "significant": None, "direction": "worse"}}},
            {"name": "bw.mem_read", "label": "memory read", "unit": "MB/s", "better": "higher",
             "group": "memory-runtime", "clock": "guest", "valid_in_mode": False,
             "values": {"a": val(5000.0, 5), "b": {"not_available": "needs CONFIG_X"}}, "delta_pct": {},
             "comparison": {}},
            {"name": "ipc.unix_rtt", "label": "unix rtt", "unit": "ns", "better": "lower",
             "group": "ipc", "clock": "guest", "valid_in_mode": True,
             "values": {"a": val(900.0, 5), "b": {"not_available": "needs CONFIG_UNIX"}}, "delta_pct": {},
             "comparison": {}},
        ],
    }


def test_table_says_mode_machine_and_failures():
    text = render(fake_report(), "table")
    assert "mode: icount" in text and "not hardware" in text and "QEMU 7.2" in text
    assert "asked CONFIG_X=y, got n" in text and "run 2 panic" in text
    assert "+50.0% [+45.0,+55.0]*" in text and "200.0 ±1.0% n=5" in text
    assert "n/a: needs CONFIG_UNIX" in text
    assert "memory read" not in text and "meaningless in icount mode" in text and "bw.mem_read" in text


def test_markdown_and_summary():
    md = render(fake_report(), "markdown")
    assert "| null syscall | ns | 200.0 ±1.0% n=5 | 300.0 ±1.0% n=5 | +50.0% [+45.0,+55.0]* |" in md
    # significant where tested; an untested 2% change is below the 5% threshold
    assert summary(fake_report()) == "b vs a (icount mode) - syscalls: null syscall +50% (worse)."


def test_csv_has_one_row_per_metric_and_variant():
    rows = list(csv.DictReader(io.StringIO(render(fake_report(), "csv"))))
    assert len(rows) == 8
    b_null = next(r for r in rows if r["variant"] == "b" and r["metric"] == "syscall.null")
    assert float(b_null["median"]) == 300.0 and float(b_null["delta_pct"]) == 50.0 and b_null["mode"] == "icount"


def test_json_is_the_report():
    assert json.loads(render(fake_report(), "json")) == fake_report()
