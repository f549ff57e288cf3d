"""`kernellab why A B --metric M` (issue 32) in the fake lab: the change split into code and
configuration parts that add up, the code part bisected over a git history of the fake
kernel tree down to the planted commit (skipping the one that does not build, confirmed
by its revert), the configuration part down to the planted option, in at most
ceil(log2 N) + 3 builds for the commit; bad input refused in one line before any build;
an interrupted answer resumed from the store.

The history (tests/githistory.py, shared with tests/test_track.py): the fake tree as its
first commit, then 12 commits: a comment only, innocuous ones, one that makes the
system-call path 10% slower (a FAKE_COST string the fake QEMU reads from vmlinux), one that
breaks the build and the one that fixes it, and one that turns a Kconfig default on
(FAKE_SLOW: 25% slower, but only for a configuration that does not already say "is not
set", so not for A's held fixed)."""

import json
import math
import shutil
from pathlib import Path

import pytest

from fakes import lab_fixture, module_lab
from githistory import BROKEN, HISTORY, PANICS, PLANTED, commit, edit, git, make_history, shown_as_format_1
from kernellab.experiments import commits
from kernellab.experiments.probe import DIFFERENT, SAME, Verdict


@lab_fixture(scope="module")
def history_lab(tmp_path_factory, request):
    with module_lab(tmp_path_factory, request, "why") as lab:
        repo, shas = make_history(lab.tmp)
        yield lab, repo, shas


def why(lab, capsys, *args, expect=0):
    rc = lab.main("why", *args)
    captured = capsys.readouterr()
    assert rc == expect, captured.err
    return captured


RANGE_ARGS = ("a=defconfig", "b=defconfig", "--metric", "syscall.null")


@pytest.fixture(scope="module")
def answer(history_lab):
    """The answer on the history, once for the module's tests: interrupted (Ctrl-C) as it
    is about to measure the culprit's revert, then asked again. -> (the answer, its file,
    the answer the interrupted one left no file of)"""
    lab, repo, shas = history_lab
    from kernellab.cli import main
    from kernellab.experiments import why
    out = lab.tmp / "why.json"
    argv = ["why", *RANGE_ARGS, "--source-range", f"git:{repo}@{shas[0]}..master", "--format", "json",
            "-o", str(out), "--store", str(lab.store)]
    measure = why.Why._measure

    def interrupted(self, label, *args, **kwargs):
        if label.startswith("revert:"):
            raise KeyboardInterrupt("Ctrl-C")
        return measure(self, label, *args, **kwargs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(why.Why, "_measure", interrupted)
        assert main(argv) == 130
    assert not out.exists()
    assert main(argv) == 0
    return json.loads(out.read_text()), out


def test_why_names_the_planted_commit_and_option_with_shares_that_add_up(answer, history_lab):
    result, _ = answer
    _, _, shas = history_lab
    [m] = result["metrics"]
    assert (m["a"], m["b"]) == (pytest.approx(95.0, abs=0.01), pytest.approx(95 * 1.1 * 1.25, abs=0.01))
    parts = {p["part"]: p["delta"] for p in m["parts"]}
    assert parts == {"code": pytest.approx(9.5, abs=0.01), "configuration": pytest.approx(104.5 * 0.25, abs=0.01)}
    assert sum(parts.values()) == pytest.approx(m["total"], abs=1e-9)   # the parts add up, by construction
    by_kind = {c["kind"]: c for c in m["culprits"]}
    assert by_kind["commit"]["commit"]["subject"] == PLANTED
    assert by_kind["commit"]["commit"]["sha"] == shas[1 + [h[0] for h in HISTORY].index(PLANTED)]
    assert by_kind["commit"]["commit"]["author"] == "Ada Lovelace <ada@example.org>"
    assert by_kind["option"]["name"] == "CONFIG_FAKE_SLOW=y"
    # ranked by share: the option's 26.1 ns before the commit's 9.5
    assert [c["kind"] for c in m["culprits"]] == ["option", "commit"]
    assert by_kind["commit"]["share"] == pytest.approx(9.5, abs=0.01)
    assert by_kind["option"]["share"] == pytest.approx(26.125, abs=0.01)
    # What no culprit explains is within the noise floor (the agent prints three decimals).
    assert abs(m["remainder"]) < 0.01 and m["within_noise"]
    assert all(c["verdict"]["verdict"] == DIFFERENT for c in m["culprits"])


def test_the_broken_commit_is_skipped_and_the_culprit_confirmed_within_the_build_bound(answer, history_lab):
    result, _ = answer
    _, _, shas = history_lab
    search = result["metrics"][0]["commit_search"]
    broken = shas[1 + [h[0] for h in HISTORY].index(BROKEN)]
    assert search["first_parent"] and search["candidates"] == 12
    panics = shas[1 + [h[0] for h in HISTORY].index(PANICS)]
    assert {s["sha"] for s in search["skipped"]} == {broken, panics}
    why_skipped = {s["commit"]: s["skipped"] for s in search["steps"] if s["verdict"] is None}
    assert why_skipped[broken].startswith("does not build") and "implicit declaration" in why_skipped[broken]
    assert why_skipped[panics].startswith("does not boot") and "panic" in why_skipped[panics]
    # At most ceil(log2 N) + 3 builds for the commit, its confirmation included (the failed one counted).
    assert search["builds"] <= math.ceil(math.log2(12)) + 3 == search["max_builds"]
    [culprit] = [c for c in result["metrics"][0]["culprits"] if c["kind"] == "commit"]
    assert culprit["suspects"] == []
    conf = culprit["confirmation"]
    assert conf["parent"]["is_parent"] and conf["parent"]["verdict"]["verdict"] == SAME
    assert conf["confirmed"] is True and conf["moved_back"] == pytest.approx(9.5, abs=0.01)
    # A's configuration held at every probe: the Kconfig default change does not reach it.
    probes = {p["label"]: p for p in result["probes"]}
    assert all(p["values"]["syscall.null"] in (pytest.approx(95.0, abs=0.01), pytest.approx(104.5, abs=0.01))
               for p in probes.values() if p["role"] in ("commit", "revert", "split") and not p["skipped"])


def test_the_answer_renders_as_a_table_markdown_and_json_through_show(answer, capsys, history_lab):
    lab, _, _ = history_lab
    _, path = answer
    assert lab.main("show", str(path), "--format", "markdown") == 0
    markdown = capsys.readouterr().out
    assert "### [sched] " in markdown and ": syscall.null +10.0% regression" in markdown
    assert "### [config] CONFIG_FAKE_SLOW=y: syscall.null +25.0% regression" in markdown
    assert lab.main("show", str(path)) == 0
    table = capsys.readouterr().out
    assert PLANTED in table and "skipped" in table and "remainder" in table


def test_an_interrupted_answer_resumes_from_the_store(answer):
    """The interrupted answer had measured every probe but the revert: the resumed one
    built and booted only that (the commit that does not build is remembered; the one
    that panics is booted again, a boot being cheap and a panic perhaps not for ever)."""
    result, _ = answer
    built = [p["label"] for p in result["probes"] if p["built"]]
    assert [label.split(":")[0] for label in built] == ["revert"]
    assert result["builds"] == 1 and result["boots"] == 2


def test_a_second_answer_reuses_every_probe(answer, history_lab, capsys):
    lab, repo, shas = history_lab
    result, _ = answer
    again = json.loads(why(lab, capsys, *RANGE_ARGS, "--source-range", f"git:{repo}@{shas[0]}..master",
                           "--format", "json").out)
    assert (again["builds"], again["boots"]) == (0, 1)    # the panicking commit's boot
    assert again["metrics"][0]["culprits"] == result["metrics"][0]["culprits"]


def test_each_probe_shows_the_objects_its_build_compiled_commit_probes_incrementally(answer, history_lab, capsys):
    """A, the first build in the repository's checkout for builds, compiles every object;
    a commit probe compiles only what differs from the commit built before it in that
    checkout (one file here); every row says so, and whether its build came from the store."""
    result, path = answer
    lab, repo, shas = history_lab
    probes = {p["label"]: p for p in result["probes"]}
    a = probes["A"]
    assert a["compiled"] >= 5 and a["checkout_from"] is None and a["build_s"] > 0
    # A commit probe built right after its parent compiled the one file its commit touched.
    after_parent = [p for p in result["probes"] if p["role"] == "commit" and p["checkout_from"]
                    and shas.index(p["checkout_from"]) == shas.index(p["commit"]) - 1]
    assert after_parent and all(p["compiled"] == 1 for p in after_parent)
    assert all(p["compiled"] < a["compiled"] for p in result["probes"] if p["role"] in ("commit", "revert")
               and p["compiled"] is not None)
    # The kernel that panics was built: its row shows that build; the one that does not build has none.
    panics = shas[1 + [h[0] for h in HISTORY].index(PANICS)]
    [panicked] = [p for p in result["probes"] if p["commit"] == panics]
    assert panicked["skipped"].startswith("does not boot") and panicked["compiled"] is not None
    # The resumed answer took every build but the revert's from the store, as recorded.
    assert [p["role"] for p in result["probes"] if p["built"]] == ["revert"]
    first = after_parent[0]
    assert lab.main("show", str(path)) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"  {first['label']} ")]
    after = first["checkout_from"][:12]
    assert f"from the store (built in {first['build_s']:.0f} s, 1 object compiled after {after})" in row
    assert lab.main("show", str(path), "--format", "markdown") == 0
    markdown = capsys.readouterr().out
    assert (f"| {first['label']} | {first['commit'][:12]} | from the store, after {first['checkout_from'][:12]} | 1 | "
            f"{first['build_s']:.0f} |") in markdown
    assert f"| A | - | from the store | {a['compiled']} |" in markdown


def test_an_answer_of_format_1_is_read_with_its_builds_not_counted(answer, history_lab, capsys):
    result, _ = answer
    lab, _, _ = history_lab
    table, again = shown_as_format_1(lab, capsys, result, "probes", "why-format-1.json")
    assert "objects not counted" in table
    assert again["format_version"] == 2 and all(p["compiled"] is None for p in again["probes"])


# -- bad input: one line each, before any build --------------------------------------

def one_error(err: str) -> str:
    """The one error line of a refused command (its progress lines aside), no traceback."""
    errors = [line for line in err.splitlines() if line.startswith("kernellab: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def artifacts(lab) -> list[Path]:
    """The builds in the lab's cache."""
    return sorted(lab.cache.glob("artifacts/*"))


@pytest.mark.parametrize("case, message", [
    ("missing-ref", "is no branch, tag or commit"),
    ("not-ancestors", "neither is an ancestor of the other"),
    ("backwards", "comes after"),
    ("dirty", "has uncommitted changes"),
    ("bad-range", "give git:PATH@GOOD..BAD"),
])
def test_bad_ranges_are_refused_in_one_line_before_any_build(history_lab, capsys, tmp_path, case, message):
    lab, repo, shas = history_lab
    if case == "dirty":
        repo = tmp_path / "dirty"
        shutil.copytree(history_lab[1], repo)
        edit(repo, "init/main.c", None, "/* not committed */\n")
    if case == "not-ancestors":
        repo = tmp_path / "forked"
        shutil.copytree(history_lab[1], repo)
        git(repo, "checkout", "-q", "-b", "side", shas[1])
        edit(repo, "mm/memory.c", None, "int side;\n")
        commit(repo, "mm: on a side branch")
    ranges = {"missing-ref": f"git:{repo}@{shas[0]}..no-such-ref", "not-ancestors": f"git:{repo}@side..master",
              "backwards": f"git:{repo}@master..{shas[0]}", "dirty": f"git:{repo}@{shas[0]}..master",
              "bad-range": f"git:{repo}@{shas[0]}"}
    builds = artifacts(lab)
    err = why(lab, capsys, *RANGE_ARGS, "--source-range", ranges[case], expect=2).err
    assert message in one_error(err)
    assert artifacts(lab) == builds


def test_a_metric_one_of_the_kernels_does_not_have_is_refused_before_any_build(lab, capsys):
    err = why(lab, capsys, "a=tinyconfig", "b=defconfig", "--metric", "ipc.unix_rtt", expect=2).err
    assert "needs CONFIG_UNIX, which A (a) does not set" in one_error(err)
    assert artifacts(lab) == []


def test_a_good_kernel_that_is_not_better_is_refused_before_any_probe(lab, capsys):
    err = why(lab, capsys, "a=tinyconfig+CONFIG_FAKE_SLOW=y", "b=tinyconfig", "--metric", "syscall.null",
              expect=2).err
    assert "A is not better than B on syscall.null" in one_error(err)
    # A and B measured, nothing else
    assert len(lab.runs()) == 2


def test_without_a_history_the_code_part_stays_whole_and_the_options_are_named(lab, capsys):
    result = json.loads(why(lab, capsys, "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y+CONFIG_DEBUG_KERNEL=y",
                            "--metric", "syscall.null", "--format", "json").out)
    [m] = result["metrics"]
    assert [p["part"] for p in m["parts"]] == ["configuration"]   # one source: no code part
    assert [c["name"] for c in m["culprits"]] == ["CONFIG_FAKE_SLOW=y"]
    assert m["commit_search"] is None


def test_boot_words_that_differ_are_a_part_of_their_own(lab, capsys):
    result = json.loads(why(lab, capsys, "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y+boot:quiet",
                            "--metric", "syscall.null", "--format", "json").out)
    parts = {p["part"]: p for p in result["metrics"][0]["parts"]}
    assert set(parts) == {"configuration", "boot words"}
    assert parts["boot words"]["verdict"]["verdict"] == SAME


# -- the search alone ------------------------------------------------------------------

def _search(values: list[float | None], good: float = 1.0):
    """A search over commits whose metric is `values` (None: does not build)."""
    probes = []

    def at(i):
        probes.append(i)
        return values[i]

    def compare(ref, p):
        return Verdict(DIFFERENT if abs(p - ref) > 0.01 else SAME, "exact")
    s = commits.Search(len(values), at, compare, lambda i: "does not build", lambda m: None)
    return s, s.find(-1, good, len(values) - 1, values[-1]), probes


def test_one_culprit_among_n_takes_at_most_ceil_log2_n_probes():
    for n in (2, 5, 12, 33):
        for culprit in range(n):
            values = [1.0 if i < culprit else 2.0 for i in range(n)]
            s, found, probes = _search(values)
            assert found.index == culprit and found.suspects == []
            assert len(probes) <= math.ceil(math.log2(n)), (n, culprit)


def test_skipped_commits_around_the_culprit_make_it_one_of_several():
    values = [1.0, 1.0, None, None, 2.0, 2.0, 2.0, 2.0]
    s, found, _ = _search(values)
    assert s.skipped == {2, 3}
    assert found.suspects == [2, 3, 4] and found.before == 1


def test_a_toolchain_that_differs_is_a_part_of_its_own_before_the_options(lab, capsys):
    result = json.loads(why(lab, capsys, "a=tinyconfig", "b=tinyconfig+cc:clang+CONFIG_FAKE_SLOW=y",
                            "--metric", "syscall.null", "--format", "json").out)
    [m] = result["metrics"]
    parts = {p["part"]: p for p in m["parts"]}
    assert list(parts) == ["toolchain", "configuration"]
    assert parts["toolchain"]["verdict"]["verdict"] == SAME    # the fake QEMU runs clang's kernel as fast
    assert [c["name"] for c in m["culprits"]] == ["CONFIG_FAKE_SLOW=y"]
    assert sum(p["delta"] for p in m["parts"]) == pytest.approx(m["total"])


def test_a_ref_that_reads_as_an_option_is_refused_before_git_sees_it(tmp_path):
    from kernellab.errors import LabError
    from kernellab.experiments import commits
    with pytest.raises(LabError, match="does not start with '-'"):
        commits.commit(tmp_path, "--output=x")


def test_option_probes_measured_ahead_are_marked_and_counted_in_every_view(answer, history_lab, capsys):
    """A probe of the option search that a cluster's idle workers measured ahead and the
    search never needed: marked in the table and the Markdown, counted in their lines and
    in the HTML page's summary, as bisect's own views do; none, no mention."""
    from test_bisect_logic import html_summary
    result, _ = answer
    lab, _, _ = history_lab

    def views(result):
        path = lab.tmp / "why-ahead.json"
        path.write_text(json.dumps(result))
        shown = {}
        for fmt in ("table", "markdown", "html"):
            assert lab.main("show", str(path), "--format", fmt, "-o", str(lab.tmp / f"why-ahead.{fmt}")) == 0
            shown[fmt] = (lab.tmp / f"why-ahead.{fmt}").read_text()
        capsys.readouterr()
        return shown["table"], shown["markdown"], html_summary(shown["html"]), shown["html"]
    probes = result["metrics"][0]["option_search"]["probes"]
    assert probes and not any(p["ahead"] for p in probes)
    assert not any("measured ahead" in view for view in views(result))

    ahead = json.loads(json.dumps(result))
    [m] = ahead["metrics"]
    probes = m["option_search"]["probes"]
    probes[-1]["ahead"] = True
    unused = probes[-1]["label"]
    table, markdown, summary, page = views(ahead)
    count = f"{len(probes)} probe(s) (1 of them measured ahead on idle workers and not needed)"
    assert [line.split()[0] for line in table.splitlines() if line.endswith("measured ahead, not needed")] == [unused]
    assert f"options: {m['option_search']['candidates']} differing option(s) bisected, {count}" in table
    assert [line for line in markdown.splitlines() if "measured ahead, not needed |" in line][0].startswith(
        f"| {unused} |")
    assert count in markdown
    assert f"syscall.null: the option bisection took {count}" in summary
    assert page.count("measured ahead, not needed</td>") == 1

