"""The study report's "cost per device" (seed 004): for variants of one kernel that differ
only in devices:N, (figure at N - figure at 0) / N, fed measured-shape compare reports."""

from kernellab.experiments import study
from kernellab.report import perdevice, studyreport


def _variant(name, devices=None, vcpus=None):
    v = {"name": name, "source": "debian:6.1", "arch": "s390x", "base": "lab-minimal", "options": ["CONFIG_HZ_100=y"],
         "boot_args": [], "sysctls": {}, "config_hash": "a" * 64, "fragments": [], "source_version": "6.1",
         "build": {"key": "k", "compiler": "gcc", "cached": devices is None},
         "runs": [{"id": 1, "status": "ok"}]}
    return v | ({"devices": devices} if devices is not None else {}) | ({"vcpus": vcpus} if vcpus else {})


def _metric(name, unit, values):
    return {"name": name, "label": name, "unit": unit, "valid_in_mode": True,
            "values": {n: {"median": x, "n": 1} for n, x in values.items()}}


def _report():
    return {"mode": "icount",
            "variants": [_variant("d0"), _variant("d100", 100), _variant("d500", 500),
                         _variant("four", vcpus=4), _variant("four-d100", 100, vcpus=4)],
            "metrics": [_metric("meminfo.MemAvailable", "KiB", {"d0": 200000, "d100": 198000, "d500": 190000}),
                        _metric("meminfo.Slab", "KiB", {"d0": 5000, "d100": 5600, "d500": 8000}),
                        _metric("sysfs.entries", "count", {"d0": 9000, "d100": 12500, "d500": 26500,
                                                           "four-d100": 13000}),
                        _metric("syscall.null", "ns", {"d0": 100, "d100": 100})]}


def test_each_device_costs_the_difference_over_the_count():
    rows = perdevice.rows({"s390x": _report()})
    got = {(r["variant"], r["metric"]): (r["baseline"], r["per_device"]) for r in rows}
    assert got[("d100", "meminfo.MemAvailable")] == ("d0", -20.0)
    assert got[("d500", "meminfo.MemAvailable")] == ("d0", -20.0)
    assert got[("d500", "meminfo.Slab")] == ("d0", 6.0)
    assert got[("d500", "sysfs.entries")] == ("d0", 35.0)
    assert not any(m == "syscall.null" for _, m in got)        # only the memory and sysfs figures
    assert not any(v == "four-d100" for v, _ in got)           # its twin without devices has no figure


def test_the_study_report_renders_the_table_only_when_there_are_rows():
    zs = study.load("zseries")
    devices = {v.name: v.devices for v in zs.variants()}
    assert devices["hz100-nohz-dev100"] == 100 and devices["hz100-nohz-dev500"] == 500
    assert not any("device" in n for n in zs.file.not_yet)
    report = {"format": studyreport.STUDY.tag, "format_version": studyreport.STUDY.version,
              "study": "zseries", "title": "t", "seed": "", "question": "q", "quick": False, "left_out": [],
              "arches": ["s390x"], "baseline": "d0", "subject": "d500", "noise_floor": {"origin": "none", "pct": {}},
              "not_yet": [], "caveats": [], "support": [], "tables": [], "decomposition": [], "sweeps": {},
              "summary": [], "failures": [], "wall_s": 0.0, "builds": 0,
              "reports": {"s390x": _report() | {"mode_note": "", "statistics": "",
                                                "runs_per_variant": {}}}}
    report["per_device"] = perdevice.rows(report["reports"])
    text = studyreport.STUDY.render(report, "markdown")
    assert f"#### {perdevice.TITLE}" in text
    assert "| meminfo.Slab | s390x | KiB | d500 (against d0) | 500 | 5,000 | 8,000 | +6.00 |" in text
    assert perdevice.TITLE in studyreport.STUDY.render(report, "table")
    report["per_device"] = []
    assert perdevice.TITLE not in studyreport.STUDY.render(report, "markdown")
