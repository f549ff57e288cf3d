"""`kernellab track` (issue 32) in the fake lab, on the git history of tests/githistory.py:
the planted slowdown found as a change point at its commit (and the Kconfig default that
turns FAKE_SLOW on, which reaches the variant resolved at each ref), the commit that does
not build and the one that panics as gaps with their reasons, each regression handed to
`why` as a command line; a second run measures nothing again and a nightly's one more ref
is the only kernel built; bad input refused in one line before any build."""

import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from fakes import lab_fixture, module_lab
from githistory import BROKEN, HISTORY, PANICS, PLANTED, commit, edit, git, make_history, shown_as_format_1
from kernellab import cli
from kernellab.experiments import track as track_exp
from kernellab.experiments.probe import DIFFERENT

KCONFIG = "Kconfig: FAKE_SLOW is on by default"
METRIC = ("--metric", "syscall.null")


def index(subject: str) -> int:
    """The commit's place in the series of every commit: GOOD is 0."""
    return 1 + [h[0] for h in HISTORY].index(subject)


LAST = index(KCONFIG)    # the first nightly's BAD


@lab_fixture(scope="module")
def history_lab(tmp_path_factory, request):
    with module_lab(tmp_path_factory, request, "track") as lab:
        repo, shas = make_history(lab.tmp)
        yield lab, repo, shas


def run_track(lab, name: str, *args: str) -> dict:
    """`kernellab track defconfig ARGS --format json -o NAME.json`: the series written."""
    out = lab.tmp / f"{name}.json"
    assert lab.main("track", "defconfig", *args, *METRIC, "--format", "json", "-o", str(out)) == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def first(history_lab):
    """Yesterday's nightly: GOOD to the Kconfig change (the rest of the history would only cost seconds)."""
    lab, repo, shas = history_lab
    return run_track(lab, "first", "--source", f"git:{repo}", "--range", f"{shas[0]}..{shas[LAST]}")


@pytest.fixture(scope="module")
def extended(history_lab, first):
    """Tonight's nightly: the range ends one commit later."""
    lab, repo, shas = history_lab
    return run_track(lab, "extended", "--source", f"git:{repo}", "--range", f"{shas[0]}..{shas[LAST + 1]}")


def test_track_finds_the_planted_change_point_and_hands_it_to_why(first, history_lab):
    _, repo, shas = history_lab
    points = first["points"]
    assert [p["commit"]["sha"] for p in points] == shas[:LAST + 1]
    planted, kconfig = index(PLANTED), index(KCONFIG)
    changes = {c["after"]: c for c in first["change_points"]}
    assert sorted(changes) == [planted, kconfig]
    c = changes[planted]
    assert c["before"] == planted - 1 and c["suspects"] == []
    assert (c["from_level"], c["to_level"]) == (pytest.approx(95.0, abs=0.01), pytest.approx(104.5, abs=0.01))
    assert c["change_pct"] == pytest.approx(10.0, abs=0.01)
    assert c["direction"] == "regression" and c["verdict"]["verdict"] == DIFFERENT
    assert c["why"] == (f"kernellab why a=defconfig b=defconfig --sources git:{repo}@{shas[planted - 1]} "
                        f"git:{repo}@{shas[planted]} --metric syscall.null")
    assert changes[kconfig]["change_pct"] == pytest.approx(25.0, abs=0.01)
    # icount: one run per kernel, exact; the comment-only and driver commits change nothing
    assert all(len(p["runs"]) == 1 for p in points if p["value"] is not None)


def test_a_kernel_that_does_not_build_or_boot_is_a_gap_with_its_reason(first):
    points = first["points"]
    broken, panics = points[index(BROKEN)], points[index(PANICS)]
    assert broken["value"] is None and broken["gap"].startswith("does not build")
    assert "implicit declaration" in broken["gap"]
    assert panics["value"] is None and panics["gap"].startswith("does not boot") and "panic" in panics["gap"]
    assert all(p["value"] is not None for i, p in enumerate(points) if i not in (index(BROKEN), index(PANICS)))


def test_a_nightly_that_adds_one_ref_builds_only_that_ref(extended, history_lab):
    _, _, shas = history_lab
    assert [p["commit"]["sha"] for p in extended["points"]] == shas[:LAST + 2]
    built = [p["commit"]["sha"] for p in extended["points"] if p["built"]]
    assert built == [shas[LAST + 1]] and extended["builds"] == 1
    # the new kernel and the one that panicked (booted again, as `why` does: a panic may not last)
    assert extended["boots"] == 2
    assert sorted(c["after"] for c in extended["change_points"]) == [index(PLANTED), index(KCONFIG)]


def test_a_second_run_measures_nothing_again(extended, history_lab):
    lab, repo, shas = history_lab
    runs = len([r for r in lab.runs() if r["status"] == "ok"])
    again = run_track(lab, "again", "--source", f"git:{repo}", "--range", f"{shas[0]}..{shas[LAST + 1]}")
    assert (again["builds"], again["boots"]) == (0, 1)    # the panicking commit's boot, nothing measured
    assert len([r for r in lab.runs() if r["status"] == "ok"]) == runs
    assert [p["value"] for p in again["points"]] == [p["value"] for p in extended["points"]]
    # the same kernels named as refs: the same probes, from the store
    refs = run_track(lab, "refs", "--source", f"git:{repo}", "--refs",
                     f"{shas[0]},{shas[index(PLANTED)]},{shas[LAST + 1]}")
    assert (refs["builds"], refs["boots"]) == (0, 0)
    assert [c["after"] for c in refs["change_points"]] == [1, 2]


def test_the_series_renders_as_a_table_with_a_sparkline_and_as_html(extended, history_lab, capsys):
    lab, _, _ = history_lab
    path = lab.tmp / "extended.json"
    assert lab.main("show", str(path)) == 0
    table = capsys.readouterr().out
    assert PLANTED in table and "▲ +10.0% regression" in table and "gap: does not build" in table
    assert "▁▁▁▃▃··▃██" in table
    assert table.count("explain it: kernellab why a=defconfig b=defconfig --sources") == 2
    html = lab.tmp / "track.html"
    assert lab.main("show", str(path), "--format", "html", "-o", str(html)) == 0
    page = html.read_text()
    assert "kernellab track: syscall.null" in page and "explain it: kernellab why" in page


def test_each_kernel_shows_the_objects_its_build_compiled_commits_incrementally(first, extended, history_lab,
                                                                               capsys):
    """Every commit of the series builds in the repository's one checkout for builds: the
    first compiles every object, each later one what its commit touched (one file here);
    the rows say so, and whether the build came from the store."""
    lab, _, shas = history_lab
    points = first["points"]
    assert points[0]["built"] and points[0]["compiled"] >= 5 and points[0]["checkout_from"] is None
    for i in range(1, index(PLANTED) + 1):    # a comment, a counter, the planted cost: one .c file each
        assert (points[i]["compiled"], points[i]["checkout_from"]) == (1, shas[i - 1]), i
    assert all(p["build_s"] > 0 for p in points if p["value"] is not None)
    # the next night's series: the same builds, from the store, as they were recorded
    again = extended["points"]
    assert [p["compiled"] for p in again[:LAST + 1]] == [p["compiled"] for p in points]
    assert not any(p["built"] for p in again[:LAST + 1])
    assert lab.main("show", str(lab.tmp / "first.json")) == 0
    rows = capsys.readouterr().out.splitlines()
    assert f"{points[0]['compiled']} obj, " in rows[4] and ", stored" not in rows[4]
    planted = rows[4 + index(PLANTED)]
    assert PLANTED in planted and " 1 obj, " in planted and ", stored" not in planted
    assert lab.main("show", str(lab.tmp / "extended.json")) == 0
    assert ", stored" in capsys.readouterr().out.splitlines()[4]


def test_a_format_1_series_is_read_with_its_builds_not_counted(extended, history_lab, capsys):
    lab, _, _ = history_lab
    table, again = shown_as_format_1(lab, capsys, json.loads((lab.tmp / "extended.json").read_text()), "points",
                                     "format-1.json")
    assert "? obj, " in table
    assert again["format_version"] == 2 and all(p["compiled"] is None for p in again["points"])


def test_candidates_find_a_step_in_noise_and_none_in_noise_alone():
    flat = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]
    noisy = [[v - 1, v, v + 1] for v in flat]
    assert track_exp.candidates(flat, noisy, 2.0)[0] == []
    stepped = flat + [v * 1.1 for v in flat]
    assert track_exp.candidates(stepped, noisy + noisy, 2.0)[0] == [6]
    assert track_exp.candidates([1.0], [[1.0]], 2.0) == ([], 0.0)


# -- bad input: one line each, before any build --------------------------------------

def one_error(err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("kernellab: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize("case, message", [
    ("missing-ref", "'no-such-ref' is no branch, tag or commit"),
    ("not-ancestors", "neither is an ancestor of the other"),
    ("every-0", "--every 0: give 1 (every commit) or more"),
    ("unknown-metric", "unknown metric 'syscall.nul'"),
    ("refs-and-range", "give --refs or --range, not both"),
    ("source-with-ref", "with --refs or --range give one --source git:PATH"),
    ("missing-source-ref", "'v9.9' is no branch, tag or commit"),
    ("not-a-repository", "is not a git repository"),
])
def test_bad_input_is_refused_in_one_line_before_any_build(tmp_path, capsys, case, message, history_lab):
    lab, repo, shas = history_lab
    if case == "not-ancestors":
        repo = tmp_path / "forked"
        shutil.copytree(history_lab[1], repo)
        git(repo, "checkout", "-q", "-b", "side", shas[1])
        edit(repo, "mm/memory.c", None, "int side;\n")
        commit(repo, "mm: on a side branch")
    source = ["--source", f"git:{repo}"]
    args = {"missing-ref": [*source, "--refs", f"{shas[0]},no-such-ref"],
            "not-ancestors": [*source, "--range", "side..master"],
            "every-0": [*source, "--range", f"{shas[0]}..master", "--every", "0"],
            "unknown-metric": [*source, "--refs", "master", "--metric", "syscall.nul"],
            "refs-and-range": [*source, "--refs", "master", "--range", f"{shas[0]}..master"],
            "source-with-ref": ["--source", f"git:{repo}@master", "--refs", "master"],
            "missing-source-ref": ["--source", f"git:{repo}@master", "--source", f"git:{repo}@v9.9"],
            "not-a-repository": ["--source", f"git:{tmp_path}", "--refs", "master"]}[case]
    metric = [] if "--metric" in args else list(METRIC)
    builds = sorted(lab.cache.glob("artifacts/*"))
    assert lab.main("track", "defconfig", *args, *metric) == 2
    assert message in one_error(capsys.readouterr().err)
    assert sorted(lab.cache.glob("artifacts/*")) == builds


def test_the_nightly_example_is_yaml_whose_kernellab_lines_kernellab_accepts():
    example = Path(__file__).resolve().parent.parent / "examples" / "nightly-track.yml"
    steps = yaml.safe_load(example.read_text())["jobs"]["track"]["steps"]
    lines = [line for s in steps for line in s.get("run", "").splitlines() if "bin/kernellab " in line]
    commands = [cli.parser().parse_args(shlex.split(line.split("bin/kernellab ", 1)[1])) for line in lines]
    assert [c.command for c in commands] == ["track", "show", "show"]
    assert commands[0].range == "v6.1..master" and commands[0].every == 20 and commands[0].format == "json"


def test_in_wall_mode_each_kernel_has_its_runs_spread_and_the_change_is_judged_on_them(first, history_lab):
    lab, repo, shas = history_lab
    result = run_track(lab, "wall", "--source", f"git:{repo}", "--refs",
                       f"{shas[0]},{shas[index(PLANTED) - 1]},{shas[index(PLANTED)]}", "--mode", "wall")
    assert result["builds"] == 0 and not result["deterministic"]    # the kernels of the first run
    assert all(len(p["runs"]) >= 3 and p["spread"][0] <= p["value"] <= p["spread"][1] for p in result["points"])
    [change] = result["change_points"]
    assert change["after"] == 2 and change["verdict"]["verdict"] == DIFFERENT
    assert "significant" in change["verdict"]["reason"] and "--mode wall" in change["why"]
