"""Tools that take what a new user has (issue 33, point 4): the config tools take variants,
resolve says why an option was dropped, a misspelled base or metric gets a suggestion and
never a path inside kernellab's source, `kernellab metrics` lists every metric, and the
shell completion knows metric, study and arch names."""

import json
import re
import subprocess
import sys

import pytest

from kernellab import arches, errors
from kernellab.errors import LabError
from kernellab.experiments import study
from kernellab.metrics.catalog import catalog
from kernellab.report import conclusion
from test_cli_habits import _bash_complete, _completion_script
from test_study import FAST_SLOW, study_file

KERNELLAB = [sys.executable, "-m", "kernellab.cli"]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("kernellab: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def config(lab, *args: str) -> int:
    """`kernellab config ...` on the fake tree (lab.main gives --source only to the commands that build)."""
    return lab.main("config", *args, "--source", str(lab.tree))


# -- config explain and config diff take variants ------------------------------------------

def test_config_explain_takes_a_variant_as_compare_does(lab, capsys):
    assert config(lab, "explain", "DEBUG_LIST", "--config", "lab-minimal") == 0
    out = capsys.readouterr().out
    assert out.startswith("CONFIG_DEBUG_LIST=n    [bool, in lab-minimal]")
    assert "to set it to y:\n  DEBUG_KERNEL=y" in out

    assert config(lab, "explain", "DEBUG_LIST", "--config", "debug=lab-minimal+debug-kernel") == 0
    assert capsys.readouterr().out.startswith("CONFIG_DEBUG_LIST=y    [bool, in debug=lab-minimal+debug-kernel]")


def test_config_explain_still_takes_a_path(lab, capsys):
    path = lab.tmp / "mine.config"
    path.write_text("CONFIG_DEBUG_KERNEL=y\nCONFIG_DEBUG_LIST=y\n")
    assert config(lab, "explain", "DEBUG_LIST", "--config", str(path)) == 0
    assert capsys.readouterr().out.startswith(f"CONFIG_DEBUG_LIST=y    [bool, in {path}]")


def test_config_diff_takes_variants_and_paths(lab, capsys):
    assert config(lab, "diff", "lab-minimal", "debug=lab-minimal+debug-kernel", "--format", "json") == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["a"], d["b"]) == ("lab-minimal", "debug=lab-minimal+debug-kernel")
    changes = {c["option"]: (c["a"], c["b"]) for c in d["changes"]}
    assert changes["CONFIG_DEBUG_KERNEL"] == ("n", "y") and changes["CONFIG_DEBUG_LIST"] == (None, "y")

    path = lab.tmp / "debug.config"
    path.write_text("CONFIG_DEBUG_KERNEL=y\n")
    assert config(lab, "diff", str(path), "lab-minimal") == 0
    out = capsys.readouterr().out
    assert out.startswith(f"A: {path}\nB: lab-minimal\n")
    assert re.search(r"^  CONFIG_DEBUG_KERNEL +y -> n ", out, re.M), out


def test_a_misspelled_base_in_the_config_tools_gets_a_suggestion(lab, capsys):
    assert config(lab, "explain", "DEBUG_LIST", "--config", "lab-minimall") == 2
    assert "unknown config base 'lab-minimall': did you mean lab-minimal?" in one_line_error(capsys)


# -- resolve says why ----------------------------------------------------------------------

def test_resolve_says_why_an_option_was_dropped(lab, capsys):
    assert lab.main("resolve", "x=tinyconfig+CONFIG_UNIX=y") == 0
    assert ("  asked CONFIG_UNIX=y, got n (variant 'x' option 1): needs NET=y (now n); add +CONFIG_NET=y\n"
            in capsys.readouterr().out)
    assert lab.main("resolve", "x=tinyconfig+CONFIG_UNIX=y", "--format", "json") == 0
    (dropped,) = json.loads(capsys.readouterr().out)["dropped_options"]
    assert dropped["why"] == "needs NET=y (now n); add +CONFIG_NET=y"
    # build says it too, in its log
    assert lab.main("build", "x=tinyconfig+CONFIG_UNIX=y") == 0
    assert "asked CONFIG_UNIX=y, got n (variant 'x' option 1): needs NET=y (now n)" in capsys.readouterr().err


def test_compare_says_why_an_option_was_dropped_in_every_view(lab, capsys):
    """The reason is computed once per variant and written in the report (dropped_options
    "why"): the log, the header of every format and `show` of the JSON say it."""
    why = "needs NET=y (now n); add +CONFIG_NET=y"
    out = lab.tmp / "r.json"
    assert lab.main("compare", "x=tinyconfig+CONFIG_UNIX=y", "--format", "json", "-o", str(out)) == 0
    assert f"x: asked CONFIG_UNIX=y, got n (variant 'x' option 1): {why}" in capsys.readouterr().err
    (dropped,) = json.loads(out.read_text())["variants"][0]["dropped_options"]
    assert dropped["why"] == why
    for fmt in ("markdown", "table"):
        assert lab.main("show", str(out), "--format", fmt, "--verbose") == 0
        assert f"dropped by olddefconfig: asked CONFIG_UNIX=y, got n: {why}" in capsys.readouterr().out


def test_resolve_suggests_the_base_meant(lab, capsys):
    assert lab.main("resolve", "x=lab-minimall+CONFIG_UNIX=y") == 2
    err = one_line_error(capsys)
    assert "unknown config base 'lab-minimall': did you mean lab-minimal? (a base is one of " in err


# -- every name the user types gets the one suggestion (errors.did_you_mean) --------------

def test_an_unknown_option_of_the_tree_gets_did_you_mean(lab, capsys):
    assert config(lab, "explain", "DEBUG_LST", "--config", "lab-minimal") == 2
    err = one_line_error(capsys)
    assert "CONFIG_DEBUG_LST does not exist in Linux 6.1.0-fake; did you mean CONFIG_DEBUG_LIST" in err


@pytest.mark.parametrize("args, said", [
    (("study", "run", "versoins"), "unknown study 'versoins': did you mean versions? (the studies are "),
    (("compare", "a=tinyconfig", "--workload", "fioo"), "no workload 'fioo': did you mean fio? (use one of "),
    (("compare", "a=tinyconfig", "--arch", "s390"), "unknown arch 's390': did you mean s390x? (use one of "),
])
def test_a_misspelled_study_workload_or_arch_gets_a_suggestion(lab, capsys, args, said):
    assert lab.main(*args) == 2
    assert said in one_line_error(capsys)


def test_an_arch_misspelled_in_a_study_file_gets_a_suggestion(lab):
    path = study_file(lab, text=FAST_SLOW.replace('arches = ["x86_64"]', 'arches = ["x86-64"]'))
    with pytest.raises(LabError, match=r"unknown arch 'x86-64': did you mean x86_64\? \(arches: "):
        study.load(str(path))


# -- metric names: one suggestion everywhere, never a path of the source ------------------

def test_the_suggestion_puts_the_name_with_its_group_first():
    assert errors.did_you_mean("fork_exit", catalog()).startswith("did you mean proc.fork_exit")
    assert errors.did_you_mean("syscall.nul", catalog()).startswith("did you mean syscall.null, ")
    assert errors.did_you_mean("syscall.null", catalog()).count(",") == 2   # at most three, never the word itself
    assert "syscall.null," not in errors.did_you_mean("syscall.null", catalog())
    assert errors.did_you_mean("zzzz", catalog()) == ""
    assert errors.did_you_mean("CONFIG_UNIXX", ["UNIX", "NET"], prefix="CONFIG_") == "did you mean CONFIG_UNIX?"


def no_source_path(err: str) -> None:
    assert "src/kernellab" not in err and "metrics.toml" not in err, err
    assert "`kernellab metrics` lists every metric" in err or "`kernellab metrics` lists them" in err, err


def test_fail_on_suggests_the_metric(lab, capsys):
    with pytest.raises(SystemExit) as exit_:
        lab.main("compare", "a=tinyconfig", "b=tinyconfig", "--fail-on", "fork_exit:+5")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --fail-on: unknown metric 'fork_exit': did you mean proc.fork_exit" in err
    no_source_path(err)


def test_metric_suggests_the_metric(lab, capsys):
    assert lab.main("sweep", "tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "proc.fork_exti") == 2
    err = one_line_error(capsys)
    assert ("--metric: unknown metric 'proc.fork_exti', nor a metric of a --workload given: "
            "did you mean proc.fork_exit") in err
    no_source_path(err)


def test_profile_metric_suggests_an_agent_metric(capsys):
    from kernellab import cli
    with pytest.raises(SystemExit):
        cli.main(["profile", "a", "b", "--metric", "syscall.nul"])
    err = capsys.readouterr().err
    assert "'syscall.nul' is not a metric the agent runs: did you mean syscall.null" in err
    no_source_path(err)


def test_a_study_file_naming_a_misspelled_metric_gets_a_suggestion(lab, capsys):
    path = study_file(lab, text=FAST_SLOW.replace('"irq.idle_timer"]', '"irq.idle_timr"]'))
    with pytest.raises(LabError) as exc:
        study.load(str(path))
    assert "names metric 'irq.idle_timr'" in str(exc.value) and "did you mean irq.idle_timer" in str(exc.value)
    no_source_path(str(exc.value))


def test_a_noise_floor_file_naming_a_misspelled_metric_gets_a_suggestion(tmp_path):
    bad = tmp_path / "floor.toml"
    bad.write_text('[floor]\n"fork_exit" = 3.0\n')
    with pytest.raises(LabError) as exc:
        conclusion.load_floor(bad)
    assert "unknown metric 'fork_exit': did you mean proc.fork_exit" in str(exc.value)
    no_source_path(str(exc.value))


# -- kernellab metrics ---------------------------------------------------------------------

def test_metrics_lists_every_metric_with_its_unit_group_source_and_modes(capsys):
    from kernellab import cli
    assert cli.main(["metrics", "--format", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) >= set(name for name, m in catalog().items() if m.source != "workload")
    fork = rows["proc.fork_exit"]
    assert {k: fork[k] for k in ("unit", "group", "source", "modes", "better")} == {
        "unit": "ns", "group": "processes", "source": "agent", "modes": ["icount", "wall"], "better": "lower"}
    assert fork["label"]
    assert rows["build.wall"]["source"] == "build" and rows["boot.init_start.printk"]["source"] == "console"
    wall_only = [r for r in rows.values() if r["modes"] == ["wall"]]
    # What the catalog says of each (in a process where other tests registered workload
    # metrics, those are listed too: the catalog is the reference, not a list of groups).
    assert "bw.mem_read" in {r["name"] for r in wall_only}
    assert all(catalog()[r["name"]].valid_in("wall") and not catalog()[r["name"]].valid_in("icount")
               for r in wall_only)

    assert cli.main(["metrics"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["metric", "unit", "better", "group", "from", "modes", "label"]
    (line,) = [t for t in table if t.startswith("proc.fork_exit ")]
    assert line.split()[:6] == ["proc.fork_exit", "ns", "lower", "processes", "agent", "icount,wall"]
    assert any(t.startswith("  agent ") for t in table) and any(t.startswith("  wall ") for t in table)


def test_metrics_adds_a_workloads_metrics(capsys):
    from kernellab import cli
    assert cli.main(["metrics", "--workload", "hackbench", "--format", "json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["name"].startswith("hackbench.")]
    assert rows and all(r["source"] == r["group"] == "workload" for r in rows)


# -- shell completion ----------------------------------------------------------------------

def test_bash_completes_metric_study_and_arch_names():
    assert set(_bash_complete("kernellab sweep --metric proc.fork_")) == {"proc.fork_exit", "proc.fork_exec"}
    assert "syscall.null" in _bash_complete("kernellab compare --fail-on syscall.nu")
    assert set(_bash_complete("kernellab study run ''")) == set(study.packaged())
    assert set(_bash_complete("kernellab compare --arch ''")) == set(arches.available())
    assert "fio" in _bash_complete("kernellab compare --workload fi")


def test_zsh_completion_names_metrics_studies_and_arches():
    script = _completion_script("zsh")
    checked = subprocess.run(["zsh", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    metrics = [name for name, m in catalog().items() if m.source != "workload"]   # the script's own process
    for words in (metrics, sorted(study.packaged()), arches.available()):
        assert f"({' '.join(words)})" in script   # zsh's action: one of these words


# -- show of an audit: --only and colours, as `audit` has them ------------------------------

def _audit_json(lab, capsys, tmp_path, *args):
    from test_audit_output import audited
    path = tmp_path / "audit.json"
    code, _, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--format", "json",
                         "-o", str(path), *args)
    assert code == 0
    return path


def test_show_of_an_audit_takes_only_as_audit_does(lab, capsys, tmp_path):
    from test_audit_output import audited
    path = _audit_json(lab, capsys, tmp_path)
    _, direct, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--only", "change,boot")
    assert lab.main("show", str(path), "--only", "change,boot") == 0
    shown = capsys.readouterr().out
    assert shown == direct and "showing the rules whose verdict is boot, change: 3 of 52" in shown
    assert " ok " not in shown.split("\n\n")[1]
    assert lab.main("show", str(path), "--only", "change", "--format", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["only"] == ["change"] and {f["rule_verdict"] for f in document["findings"]} == {"change"}


def test_show_only_refuses_what_it_cannot_show_in_one_line(lab, capsys, tmp_path):
    narrow = _audit_json(lab, capsys, tmp_path, "--only", "change")
    assert lab.main("show", str(narrow), "--only", "change,ok") == 2
    assert "holds only the rules whose verdict is change (written with --only change): audit the config again " \
        "without --only" in one_line_error(capsys)
    assert lab.main("show", str(narrow), "--only", "okk") == 2
    assert "--only 'okk': unknown verdict 'okk'" in one_line_error(capsys)
    compared = lab.tmp / "r.json"
    assert lab.main("compare", "a=tinyconfig", "--format", "json", "-o", str(compared)) == 0
    capsys.readouterr()
    assert lab.main("show", str(compared), "--only", "change") == 2
    assert "--only shows an audit's rules of some verdicts; " in one_line_error(capsys)


def test_show_of_an_audit_colours_a_terminal_and_nothing_else(lab, capsys, tmp_path, monkeypatch):
    from kernellab.report.terminal import Screen
    monkeypatch.delenv("NO_COLOR", raising=False)
    path = _audit_json(lab, capsys, tmp_path)
    assert lab.main("show", str(path)) == 0
    piped = capsys.readouterr().out
    monkeypatch.setattr(Screen, "of", classmethod(lambda cls, stream: cls(80, True)))
    assert lab.main("show", str(path)) == 0
    shown = capsys.readouterr().out
    assert "\x1b[1;31mchange" in shown and re.sub(r"\x1b\[[0-9;]*m", "", shown) == piped
    assert lab.main("show", str(path), "-o", str(tmp_path / "a.txt")) == 0
    assert (tmp_path / "a.txt").read_text() == piped
