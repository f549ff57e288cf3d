"""Workload metrics in every measuring command (issue 31): sweep, bisect, noise-floor and
study runs take --workload (a study's experiment a `workloads` key), their probes measure
WORKLOAD.METRIC as they measure the agent's metrics, and compare on a Dask cluster gives
its workers the workloads.

The fake lab's QEMU runs the real agent on the host when the initramfs holds workloads,
and hands the program FAKE_KERNEL_SLOWDOWN (1.25 with CONFIG_FAKE_SLOW, else 1): the
script below prints a time that follows the kernel's config, as a real program's would.
"""

import json
import os
import sys
from pathlib import Path

import pytest

from fakes import LAB_ENVIRONMENT, lab_fixture, point_worker
from workloadfiles import workload_file

TESTS = os.path.dirname(os.path.abspath(__file__))


def timed_workload(tmp: Path, name: str = "timed") -> Path:
    """A user's own workload: a script printing a time that follows the kernel's speed."""
    return workload_file(tmp, name, 'echo "time: $FAKE_KERNEL_SLOWDOWN"', command='["sh", "{workdir}/run.sh", "{n}"]',
                         metrics='''
[[metric]]
name = "time"
unit = "s"
better = "lower"
regex = '^time: ([0-9.]+)$'
''')


def run_json(lab, capsys, *args, expect=0):
    rc = lab.main(*args, "--format", "json")
    captured = capsys.readouterr()
    assert rc == expect, captured.err
    return json.loads(captured.out) if expect == 0 else captured.err


def workload_samples(lab, metric):
    """(variant, value) of every sample of `metric` in the store."""
    from faults.test_kill import query
    return query(lab.store, "SELECT v.name, s.value FROM samples s JOIN runs r ON r.id = s.run_id"
                            " JOIN variants v ON v.id = r.variant_id WHERE s.metric = ? ORDER BY r.id", metric)


# -- sweep, bisect, noise-floor --------------------------------------------------------

def test_a_sweep_follows_a_workload_metric(lab, capsys, tmp_path):
    spec = str(timed_workload(tmp_path))
    result = run_json(lab, capsys, "sweep", "tinyconfig", "--toggle", "FAKE_SLOW,DEBUG_LIST", "--metric", "timed.time",
                      "--workload", spec, "--mode", "icount")
    assert result["metrics"] == ["timed.time"] and result["baseline"]["timed.time"] == 1.0
    effects = {f["option"]: f["effects"]["timed.time"]["delta_pct"] for f in result["flips"]}
    assert effects == {"CONFIG_FAKE_SLOW": pytest.approx(25.0), "CONFIG_DEBUG_LIST": 0}


def test_a_bisect_finds_the_option_that_slows_a_workload(lab, capsys, tmp_path):
    spec = str(timed_workload(tmp_path))
    result = run_json(lab, capsys, "bisect", "good=tinyconfig",
                      "bad=tinyconfig+CONFIG_FAKE_SLOW=y+CONFIG_DEBUG_KERNEL=y+CONFIG_DEBUG_LIST=y",
                      "--metric", "timed.time", "--workload", spec, "--mode", "icount")
    assert (result["metric"], result["unit"], result["good"], result["bad"]) == ("timed.time", "s", 1.0, 1.25)
    assert [(c["option"], c["value"]) for c in result["culprits"]] == [("CONFIG_FAKE_SLOW", "y")]


@pytest.mark.parametrize("command", [
    ("sweep", "tinyconfig", "--toggle", "FAKE_SLOW"),
    ("bisect", "good=tinyconfig", "bad=tinyconfig+CONFIG_FAKE_SLOW=y"),
])
def test_a_workload_metric_without_its_workload_is_one_line_before_any_build(lab, capsys, tmp_path, command):
    spec = str(timed_workload(tmp_path))
    for args in (("--metric", "timed.time"),                            # no --workload
                 ("--metric", "timed.nosuch", "--workload", spec)):    # not a metric of it
        err = run_json(lab, capsys, *command, *args, expect=2)
        # Unknown to the catalog, or (registered by an earlier test in this process) not
        # a metric of the workloads given: one line either way.
        assert err.count("\n") == 1 and err.startswith(f"kernellab: error: --metric: {args[1]}") or \
            err.startswith(f"kernellab: error: --metric: unknown metric {args[1]!r}"), err
        assert "--workload given" in err
    assert not (lab.cache / "artifacts").exists() and (not lab.store.exists() or lab.runs() == [])


def test_the_noise_floor_covers_a_workloads_metric(lab, capsys, tmp_path, monkeypatch):
    from kernellab.experiments import floor
    from test_noise_floor import LAYOUT
    # The agent's own metrics kept to one: with workloads the fake QEMU runs the real agent,
    # which would measure every metric of the catalog on this host, nine boots over.
    monkeypatch.setattr(floor, "floor_metrics", lambda mode: ["syscall.null"])
    spec = str(timed_workload(tmp_path))
    result = run_json(lab, capsys, "noise-floor", "tinyconfig", "--options", LAYOUT, "--workload", spec)
    # Layout moves nothing the script prints: its floor is measured, and is zero.
    assert result["pct"]["timed.time"] == 0 and set(result["pct"]) == {"syscall.null", "timed.time"}
    assert {value for _, value in workload_samples(lab, "timed.time")} == {1.0}


def test_an_experiment_files_workloads_join_the_command_lines(lab, capsys, tmp_path):
    own = timed_workload(tmp_path)
    other = timed_workload(tmp_path, "other")
    experiment = tmp_path / "e.toml"
    experiment.write_text(f'source = "{lab.tree}"\nworkloads = ["{own}"]\n\n[[variant]]\nname = "a"\n'
                          'base = "tinyconfig"\n\n[[variant]]\nname = "b"\nbase = "tinyconfig"\n'
                          'options = ["CONFIG_FAKE_SLOW=y"]\n')
    out = tmp_path / "r.json"
    assert lab.main("compare", "--experiment", str(experiment), "--workload", str(other), "--mode", "icount",
                    "--fail-on", "timed.time:+10", "--format", "json", "-o", str(out)) == 3
    assert "regression: timed.time b: +25" in capsys.readouterr().err
    metrics = {m["name"]: m["values"] for m in json.loads(out.read_text())["metrics"]}
    assert [metrics[name]["b"]["median"] for name in ("timed.time", "other.time")] == [1.25, 1.25]


# -- studies ------------------------------------------------------------------------

STUDY = '''name = "fakestudy"
title = "fast against slow, with a workload"
seed = ""
question = "Does FAKE_SLOW slow the script?"
arches = ["x86_64"]
baseline = "fast"
subject = "slow"
expected_minutes = 1

[experiment]
source = "{tree}"
mode = "icount"
workloads = [{workloads}]

[[experiment.variant]]
name = "fast"
base = "tinyconfig"

[[experiment.variant]]
name = "slow"
base = "tinyconfig"
options = ["CONFIG_FAKE_SLOW=y"]

[[table]]
title = "The script"
metrics = ["{metric}"]

[[summary]]
says = "The script"
metrics = ["{metric}"]

[quick]
arches = ["x86_64"]
'''


def study_file(lab, tmp_path, workloads="", metric="syscall.null"):
    path = lab.tmp / "fakestudy.toml"
    path.write_text(STUDY.format(tree=lab.tree, workloads=workloads, metric=metric))
    return path


def run_study(lab, capsys, path, *extra, expect=0):
    out = lab.tmp / "study.json"
    rc = lab.main("study", "run", str(path), "--format", "json", "-o", str(out), *extra)
    err = capsys.readouterr().err
    assert rc == expect, err
    return (json.loads(out.read_text()) if expect == 0 else None), err


def _cell(report, metric, variant):
    return next(m for m in report["reports"]["x86_64"]["metrics"] if m["name"] == metric)["values"][variant]


def test_a_studys_experiment_names_its_workloads_and_its_tables_their_metrics(lab, capsys, tmp_path):
    spec = timed_workload(tmp_path)
    report, _ = run_study(lab, capsys, study_file(lab, tmp_path, f'"{spec}"', metric="timed.time"))
    assert (_cell(report, "timed.time", "fast")["median"], _cell(report, "timed.time", "slow")["median"]) == (1.0, 1.25)
    assert report["summary"][0].startswith("The script (slow against fast): ")
    assert "25% worse" in report["summary"][0]


def test_study_run_workload_measures_every_variant_and_says_so(lab, capsys, tmp_path):
    spec = str(timed_workload(tmp_path))
    report, _ = run_study(lab, capsys, study_file(lab, tmp_path), "--workload", spec)
    assert (_cell(report, "timed.time", "fast")["median"], _cell(report, "timed.time", "slow")["median"]) == (1.0, 1.25)
    assert report["changed"] == [f"every variant runs the workload {Path(spec).stem} too (--workload)"]


def test_a_study_table_naming_a_metric_of_no_workload_it_runs_is_one_line(lab, capsys, tmp_path):
    _, err = run_study(lab, capsys, study_file(lab, tmp_path, metric="timed.time"), expect=2)
    assert err.count("\n") == 1 and "names metric 'timed.time'" in err


# -- Dask ---------------------------------------------------------------------------

def no_userland(path: str) -> None:
    """On a worker, what the fake lab does in the test's process: the guest's userland is
    an empty segment (the fake QEMU runs the agent on the host, with the host's programs)."""
    from kernellab import userland
    userland.segment = lambda instances, profile, compression="gzip": Path(path)


@lab_fixture(scope="module")
def shared_cluster():
    distributed = pytest.importorskip("distributed")
    local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(local)
    client.run(sys.path.insert, 0, TESTS)
    yield local, client
    client.close()
    local.close()


@pytest.fixture
def cluster(lab, shared_cluster):
    local, client = shared_cluster
    client.run(point_worker, {name: os.environ.get(name) for name in LAB_ENVIRONMENT}, os.getcwd(), str(lab.qemu))
    client.run(no_userland, str(lab.tmp / "userland.cpio"))
    return local


def test_compare_on_a_cluster_measures_the_workload_as_locally(lab, capsys, tmp_path, cluster):
    spec = str(timed_workload(tmp_path))
    out = lab.tmp / "report.json"
    args = ("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--workload", spec, "--mode", "icount",
            "--format", "json", "-o", str(out))
    assert lab.main(*args, "--cluster", cluster.scheduler_address) == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    cell = next(m for m in report["metrics"] if m["name"] == "timed.time")["values"]
    assert (cell["a"]["median"], cell["b"]["median"]) == (1.0, 1.25)
    assert [w["status"] for v in report["variants"] for r in v["runs"] for w in r["workloads"]] == ["ok", "ok"]


def test_a_study_on_a_cluster_resumes_its_workload_runs_from_the_store(lab, capsys, tmp_path, cluster):
    """The runs a study takes from the store are those measured with its workloads: the
    agent the cluster's study asks the store for is the one its runs booted with."""
    spec = timed_workload(tmp_path)
    path = study_file(lab, tmp_path, f'"{spec}"', metric="timed.time")
    first, _ = run_study(lab, capsys, path, "--cluster", cluster.scheduler_address)
    runs = len(lab.runs())
    again, err = run_study(lab, capsys, path, "--cluster", cluster.scheduler_address)
    assert "earlier run(s) taken from the store" in err
    assert len(lab.runs()) == runs and again["summary"] == first["summary"]
    assert _cell(again, "timed.time", "slow")["median"] == 1.25


def test_a_sweep_on_a_cluster_follows_a_workload_metric(lab, capsys, tmp_path, cluster):
    spec = str(timed_workload(tmp_path))
    result = run_json(lab, capsys, "sweep", "tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "timed.time",
                      "--workload", spec, "--mode", "icount", "--cluster", cluster.scheduler_address)
    assert [(f["option"], f["effects"]["timed.time"]["delta_pct"]) for f in result["flips"]] == [
        ("CONFIG_FAKE_SLOW", pytest.approx(25.0))]
