"""`kernellab why`'s answer as an HTML page (issue 32, "the answer"), from real answers of
the fake lab, looked at in the real headless Chromium (tests/browser.py): the split charted
as a waterfall of parts and culprits with the remainder, the ranked culprits, the bisection
of commits charted step by step with each step's verdict, every probe, the skipped commits,
and what a reduction left out; what came from outside (commit subjects, authors, option
names) stays text.

The history is a short one of its own (githistory's helpers): the fake tree, a comment, the
commit that does not build and the one that fixes it, the planted commit (10% slower system
calls) under a subject that holds markup and an author whose name holds what git keeps of
it (no angle brackets), and an innocuous one; B also turns FAKE_SLOW on (25% slower)."""

import json
import shutil

from selenium.webdriver.common.by import By

from browser import chart_labels
from fakes import KERNEL_TREE, lab_fixture, module_lab
from githistory import HISTORY, PLANTED, commit, edit, git
from test_html import HOSTILE, no_alert, shown
from test_why_reduced import distributions  # noqa: F401  (the fixture: two distribution-size configs)

SUBJECT = f"sched: {HOSTILE} getppid walks the task list"
# git drops angle brackets from a name, and quotes at its ends: these it keeps
AUTHOR = "Mallory \"Eve\" O'Brien & Co <mallory@example.org>"
BROKEN_EDIT = ("kernel/fork.c", "\treturn 1;\n}", "\tclone_hook_that_does_not_exist();\n\treturn 1;\n}")
STEP_LEGEND = ["different, worse than A", "different, better than A", "same", "cannot tell (the tooltip says why)"]


def make_history(where):
    """The fake tree, then: a comment, one that does not build, its fix, the planted commit
    (markup in its subject), an innocuous one. -> (the repository, GOOD's sha)"""
    repo = where / "linux"
    shutil.copytree(KERNEL_TREE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "master")
    git(repo, "add", "-A")
    good = commit(repo, "the fake tree as shipped")
    planted = dict(HISTORY)[PLANTED]
    # In this order the bisection's first pick is the commit that does not build.
    for subject, edits in (("init: say hello in a comment", dict(HISTORY)["init: say hello in a comment"]),
                           ("fork: call the new clone hook", [BROKEN_EDIT]),
                           ("fork: drop the clone hook", [("kernel/fork.c", BROKEN_EDIT[2], BROKEN_EDIT[1])]),
                           (SUBJECT, planted), ("mm: count pages", [("mm/memory.c", None, "int page_count;\n")])):
        for path, old, new in edits:
            edit(repo, path, old, new)
        if subject == SUBJECT:
            git(repo, "commit", "-qam", subject, "--author", AUTHOR)
        else:
            commit(repo, subject)
    return repo, good


@lab_fixture(scope="module")
def answered(tmp_path_factory, request):
    """`why` on the history, its answer written as JSON. -> (the lab, the argv of `why`, the JSON file)"""
    with module_lab(tmp_path_factory, request, "whyhtml") as lab:
        repo, good = make_history(lab.tmp)
        args = ("why", "a=defconfig", "b=defconfig+CONFIG_FAKE_SLOW=y", "--metric", "syscall.null",
                "--source-range", f"git:{repo}@{good}..master")
        saved = lab.tmp / "why.json"
        assert lab.main(*args, "--format", "json", "-o", str(saved)) == 0
        yield lab, args, saved


def test_the_answer_as_a_page_charts_the_split_and_the_bisection(answered, capsys, browser, tmp_path):
    lab, args, saved = answered
    [culprit] = [c for c in json.loads(saved.read_text())["metrics"][0]["culprits"] if c["kind"] == "commit"]
    page = tmp_path / "why.html"
    assert lab.main(*args, "--format", "html", "-o", str(page)) == 0   # every probe from the store
    capsys.readouterr()
    charts = shown(browser, page, tmp_path, min_charts=2)   # drawn, a clean console, fits 1,280 px, labels whole
    assert browser.title == "kernellab why: syscall.null"
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings == ["Summary", "How the numbers were obtained", "syscall.null: the split",
                        "syscall.null: culprits, largest share first", "syscall.null: the bisection of commits",
                        "syscall.null: the bisection of options", "Probes: every kernel built and booted",
                        "The text report"]
    how = browser.find_element(By.CSS_SELECTOR, "#how-the-numbers-were-obtained").text
    assert "one run per kernel, every figure exact" in how and "2% (syscall.null)" in how
    # The split: parts, culprits, the remainder and the whole change, each a row of the waterfall.
    split, bisection = (c.id for c in charts)
    [rows] = [axis for axis in chart_labels(browser)[split] if "the code part" in axis]
    assert rows == ["the code part", "the configuration part", f"commit {culprit['commit']['sha'][:12]} {SUBJECT}",
                    "option CONFIG_FAKE_SLOW=y", "remainder: interactions, changes below the threshold",
                    "the change A -> B (+37.5%)"]
    drawn = browser.find_element(By.ID, split).get_attribute("textContent")
    assert "+9.5 ns, 27%" in drawn and "+26.12 ns, 73%" in drawn and "+35.62 ns, 100%" in drawn
    # The culprits, ranked: the option's larger share first, the commit with its subject and author.
    culprits = browser.find_elements(By.CSS_SELECTOR, "#syscall-null-culprits-largest-share-first tbody tr")
    assert culprits[0].text.startswith("1 option CONFIG_FAKE_SLOW=y")
    assert SUBJECT in culprits[1].text and AUTHOR in culprits[1].text
    assert "yes" in culprits[1].text and culprits[2].text.startswith("remainder")
    # The bisection: each step at its commit, its verdict in the three words of a step; the
    # commit that does not build skipped, with why.
    assert chart_labels(browser)[bisection][-1] == STEP_LEGEND
    section = browser.find_element(By.CSS_SELECTOR, "#syscall-null-the-bisection-of-commits")
    steps = [r.text for r in section.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert [s for s in steps if "skipped" in s and "does not build" in s and "implicit declaration" in s]
    assert {"different", "same"} <= {w for s in steps for w in s.split()}
    assert 'skipped' in section.text and '"fork: call the new clone hook"' in section.text
    marks = browser.find_elements(By.CSS_SELECTOR, f"#{bisection} g.mark-symbol.role-mark path")
    assert len(marks) == len([s for s in steps if "skipped" not in s]) + 2   # and the ends, A and B's source
    probes = browser.find_element(By.CSS_SELECTOR, "#probes-every-kernel-built-and-booted").text
    # This `why` was answered from the store: every build reused, the one that failed remembered.
    assert "revert:" in probes and "skipped: does not build (remembered)" in probes
    assert "from the store (built in" in probes and "built in" not in probes.replace("from the store (built in", "")
    assert "objects compiled" in probes    # each build's, as its record says


def test_subjects_authors_and_option_names_from_outside_stay_text(answered, capsys, browser, tmp_path):
    """The subject holds markup as git kept it; an author (git drops angle brackets from
    names, other sources need not) and option names are given markup in the saved answer."""
    lab, _, saved = answered
    answer = json.loads(saved.read_text())
    [m] = answer["metrics"]
    for c in m["culprits"]:
        if c["kind"] == "option":
            c["name"], c["brought_along"] = f"CONFIG_{HOSTILE}=y", ["CONFIG_<img src=x onerror=alert(2)>=y"]
        else:
            c["commit"]["author"] = f"{HOSTILE} <x@example.org>"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(answer))
    page = tmp_path / "hostile.html"
    assert lab.main("show", str(hostile), "--format", "html", "-o", str(page)) == 0
    text = page.read_text()
    assert HOSTILE not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    specs = text.split('id="kernellab-charts">', 1)[1].split("</script>", 1)[0]
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in specs
    shown(browser, page, tmp_path, min_charts=2)
    assert no_alert(browser)
    culprits = browser.find_element(By.CSS_SELECTOR, "#syscall-null-culprits-largest-share-first").text
    assert f"CONFIG_{HOSTILE}=y" in culprits and "brings along CONFIG_<img src=x onerror=alert(2)>=y" in culprits
    assert SUBJECT in culprits and f"{HOSTILE} <x@example.org>" in culprits
    split = browser.find_element(By.CSS_SELECTOR, "#syscall-null-the-split [data-chart] svg")
    assert HOSTILE in split.get_attribute("textContent")   # the chart data reached Vega intact


def test_show_renders_a_stored_answer_as_html_and_a_step_that_cannot_tell_says_so(answered, capsys, tmp_path):
    """Wall mode's third verdict ("not yet known" in the answer) reads "cannot tell", and is
    drawn as html's not-compared cross."""
    lab, _, saved = answered
    assert lab.main("show", str(saved), "--format", "html") == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and "<title>kernellab why: syscall.null</title>" in out
    answer = json.loads(saved.read_text())
    step = next(s for s in answer["metrics"][0]["commit_search"]["steps"] if s["verdict"])
    step["verdict"] = {"verdict": "not yet known", "reason": "+4.1%, 95% interval [-1.0, +9.2]% after 30 run(s) each"}
    unsure = tmp_path / "unsure.json"
    unsure.write_text(json.dumps(answer))
    assert lab.main("show", str(unsure), "--format", "html") == 0
    out = capsys.readouterr().out
    assert "<td class=\"\">cannot tell</td>" in out and "after 30 run(s) each" in out
    assert '"verdict":"not compared"' in out


def test_an_answer_measured_reduced_says_what_the_reduction_left_out(distributions, capsys,  # noqa: F811
                                                                     browser, tmp_path):
    lab, a, b = distributions
    page = tmp_path / "reduced.html"
    assert lab.main("why", a, b, "--metric", "syscall.null", "--format", "html", "-o", str(page)) == 0
    capsys.readouterr()
    shown(browser, page, tmp_path, min_charts=1)
    reduced = browser.find_element(By.CSS_SELECTOR, "#measured-reduced").text
    assert "measured reduced onto lab-minimal" in reduced and "kept: CONFIG_FAKE_SLOW" in reduced
    assert "Processor type and features" in reduced and "CONFIG_HZ_1000" in reduced
    # One source: no code part, no bisection of commits.
    assert browser.find_elements(By.CSS_SELECTOR, "#syscall-null-the-bisection-of-commits") == []
