"""One contract for every result (report/kinds.py): each kind kernellab writes says its kind
and version, validates against the schema shipped with it, and `kernellab show` renders it;
what kernellab cannot read is one line, exit 2; files written before results said their
kind are read where they were read before."""

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from kernellab import profiler
from kernellab.experiments import floor
from kernellab.experiments.profiling import Profiled
from kernellab.report import kinds
from kernellab.report import profile as profile_report
from test_study import study_file

SCHEMAS = Path(__file__).resolve().parent.parent / "src/kernellab/report"
CONFIG = "CONFIG_DEBUG_KERNEL=y\nCONFIG_DEBUG_LIST=y\nCONFIG_HZ_1000=y\nCONFIG_KERNEL_XZ=y\n"
LAYOUT = ",".join(f"FAKE_LAYOUT_{k}" for k in range(1, 9))


def _written(lab, capsys, tmp_path):
    """kind name -> the file its real writer wrote (a command on the fake lab where one writes it)."""
    files = {}

    def out(name, *command):
        assert lab.main(*command, "--format", "json") == 0, capsys.readouterr().err
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(capsys.readouterr().out)

    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json",
                    "-o", str(tmp_path / "compare.json")) == 0
    files["compare"] = tmp_path / "compare.json"
    assert lab.main("study", "run", str(study_file(lab)), "--quick", "--format", "json",
                    "-o", str(tmp_path / "study.json")) == 0
    files["study"] = tmp_path / "study.json"
    assert lab.main("show", "results/debug-cost.json", "--format", "json", "-o", str(tmp_path / "results.json")) == 0
    files["results"] = tmp_path / "results.json"
    out("sweep", "sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "FAKE_SLOW", "--metric", "syscall.null")
    out("bisect", "bisect", "good=tinyconfig", "bad=tinyconfig+CONFIG_FAKE_SLOW=y", "--metric", "syscall.null")
    config = tmp_path / "server.config"
    config.write_text(CONFIG)
    out("audit", "audit", str(config), "--profile", "throughput-server")
    out("noise-floor", "noise-floor", "tinyconfig", "--options", LAYOUT)
    out("size", "size", "tinyconfig", "slow=tinyconfig+CONFIG_FAKE_SLOW=y")
    out("crosscheck", "workload", "crosscheck", "tinyconfig")
    out("why", "why", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--metric", "syscall.null")
    out("track", "track", "tinyconfig", "--source", str(lab.tree), "--metric", "syscall.null")
    # profile: its writer on two profiles (the fake QEMU has no tick profiler)
    a, b = (Profiled(name, run, False, Counter(hits), sum(hits.values()), 1.0)
            for name, run, hits in (("a", 1, {"fast": 6, "slow": 2}), ("b", 2, {"fast": 3, "slow": 9})))
    body = profile_report.body("icount mode", "syscall.null", (a, b), profiler.changes(a.functions, b.functions))
    files["profile"] = tmp_path / "profile.json"
    files["profile"].write_text(kinds.get("profile").render(body, "json"))
    capsys.readouterr()
    return files


def test_every_kind_is_written_with_its_kind_and_version_and_shown(lab, capsys, tmp_path):
    files = _written(lab, capsys, tmp_path)
    assert set(files) == {k.name for k in kinds.kinds()}   # a new kind gets a writer here
    for name, path in files.items():
        kind = kinds.get(name)
        document = json.loads(path.read_text())
        assert (document["format"], document["format_version"]) == (kind.tag, kind.version), name
        # the stamp a schema does not declare (size's is a part of the compare report's) is checked by kinds
        schema = json.loads((SCHEMAS / kind.schema).read_text())
        jsonschema.validate(kinds._as_schema_sees(kind, document), schema, registry=kinds.reading._schemas())
        assert kinds.load(path)[0] is kind
        for fmt in kind.formats:
            # html pages: tests/test_html.py; junit needs a gate; a quick study has no sweep to
            # write option costs of (test_study.py writes them from a full one)
            if fmt in ("html", "junit") or (name, fmt) == ("study", "results"):
                continue
            assert lab.main("show", str(path), "--format", fmt) == 0, (name, fmt, capsys.readouterr().err)
            shown = capsys.readouterr().out
            assert shown.strip(), (name, fmt)
            if fmt == "json":
                assert json.loads(shown)["format"] == kind.tag
    # what each command prints is what `show` prints of the file it wrote
    assert lab.main("show", str(files["sweep"])) == 0
    assert "sweep over 1 option(s)" in capsys.readouterr().out
    assert lab.main("show", str(files["audit"])) == 0
    assert "rules per category" in capsys.readouterr().out


@pytest.mark.parametrize(("document", "said"), [
    ({"format": "kernellab-teleport", "format_version": 1}, "is 'kernellab-teleport', a kind of result this "
                                                            "kernellab does not know"),
    ({"format": "kernellab-sweep", "format_version": 2}, "is kernellab-sweep format 2; this kernellab reads "
                                                         "format 1: write it again with `kernellab sweep"),
    ({"format": "kernellab-noise-floor"}, "has no format_version"),
    ({"mode": "icount", "flips": []}, "does not say what kind of result it is (no \"format\")"),
    ([1, 2], "is not a kernellab report or result"),
])
def test_an_unknown_kind_or_version_is_one_line(tmp_path, capsys, document, said):
    from kernellab.cli import main
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_format_a_kind_has_not_is_one_line(tmp_path, capsys):
    from kernellab.cli import main
    path = tmp_path / "floor.json"
    path.write_text(kinds.get("noise-floor").dump({"base": "tinyconfig", "mode": "icount", "pct": {}, "by": {},
                                                   "flips": [], "measured": "today"}))
    assert main(["show", str(path), "--format", "csv"]) == 2
    assert "a noise floor renders as table, json, not csv" in capsys.readouterr().err
    assert main(["show", str(path), "--fail-on", "syscall.null:+5"]) == 2
    assert "is a noise floor; the gate reads a compare report" in capsys.readouterr().err


def test_a_noise_floor_kept_before_files_said_their_kind_still_reads(lab, capsys):
    assert lab.main("noise-floor", "tinyconfig", "--options", LAYOUT) == 0
    capsys.readouterr()
    [kept] = (lab.cache / "floors").glob("*.json")
    written = json.loads(kept.read_text())
    assert (written["format"], written["format_version"]) == ("kernellab-noise-floor", 1)
    old = {k: v for k, v in written.items() if k not in ("format", "format_version")}
    kept.write_text(json.dumps(old))
    read = floor.Floor.from_dict(kinds.load(kept, expect="noise-floor")[1])
    assert read.pct == old["pct"] and read.flips == old["flips"]
    kept.write_text(json.dumps({**old, "pct": {"proc.fork_exit": "4%"}}))
    with pytest.raises(floor.LabError, match=r"at \$.pct\['proc.fork_exit'\]: '4%' is not of type 'number'; "
                                             "delete it and run `kernellab noise-floor` again"):
        kinds.load(kept, expect="noise-floor")


def test_a_compare_report_written_before_reports_said_their_kind_is_shown(lab, capsys, tmp_path):
    path = tmp_path / "old.json"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json",
                    "-o", str(path)) == 0
    path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "format"}))
    capsys.readouterr()
    assert lab.main("show", str(path), "--fail-on", "syscall.null:+50") == 0
    assert "syscall" in capsys.readouterr().out
