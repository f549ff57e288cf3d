"""`kernellab audit`'s output, as easy to act on as kernel-hardening-checker's (issue 33,
point 5): --only filters the rules by verdict, verdicts are coloured on a terminal, the
profile comes from the config when not given (and says why), -o writes a file in the format
its name says, rules are the one unit counted, and the JSON is an object saying what was
audited, by which kernellab. Command-level tests run on the fake lab; the rule base on
Debian's configs, at the end, reads the real Kconfig trees (integration)."""

import hashlib
import json
import lzma
import re
import textwrap
from pathlib import Path

import pytest

from kernellab import __version__, arches, sources, toolchain
from kernellab.config import audit, kconfig
from kernellab.errors import LabError
from kernellab.knowledge import PROFILES, rules_for
from kernellab.report import auditreport, kinds
from kernellab.report.terminal import Screen
from test_audit import rule
from test_kconfig import tiny_tree

# DEBUG_LIST=y draws a change (debug-list), HZ_1000 one (hz-low-servers-guests-embedded),
# and KERNEL_XZ one that takes more than assignments; most other rules are ok.
CONFIG = "CONFIG_DEBUG_KERNEL=y\nCONFIG_DEBUG_LIST=y\nCONFIG_HZ_1000=y\nCONFIG_KERNEL_XZ=y\n"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

TREE = """
    mainmenu "profile test tree"

    config PREEMPT_RT
    	bool "Fully preemptible kernel (real-time)"

    config CC_OPTIMIZE_FOR_SIZE
    	bool "Optimize for size"

    config DEBUG_KERNEL
    	bool "Kernel debugging"

    config PAGE_TABLE_ISOLATION
    	bool "Remove the kernel mapping in user mode"
    	default y
    """


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return tiny_tree(tmp_path_factory.mktemp("profile-tree"), TREE)


def loaded(tree, tmp_path, text):
    path = tmp_path / "test.config"
    path.write_text(textwrap.dedent(text))
    tree.load(path)
    return path


def audited(lab, capsys, tmp_path, *args, config=CONFIG):
    path = tmp_path / "server.config"
    path.write_text(config)
    code = lab.main("audit", str(path), *args)
    out, err = capsys.readouterr()
    return code, out, err


# --- --only ------------------------------------------------------------------------------

def test_only_shows_the_rules_with_those_verdicts_and_counts_every_rule(lab, capsys, tmp_path):
    code, everything, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--format", "json")
    assert code == 0
    full = json.loads(everything)
    to_act_on = {f["rule"] for f in full["findings"] if f["rule_verdict"] in ("change", "boot")}
    assert to_act_on and to_act_on < {f["rule"] for f in full["findings"]}

    code, out, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--only", "change,boot")
    assert code == 0
    rows = out.split("\n\n")[1].splitlines()[1:]   # the table after its header line
    assert {row.split()[0] for row in rows} == to_act_on
    total = sum(full["totals"]["total"].values())
    assert f"showing the rules whose verdict is boot, change: {len(to_act_on)} of {total}\n" in out
    assert auditreport.count_line(full) in out   # the counts stay those of every rule

    code, shown, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--only", "change,boot",
                             "--format", "json")
    document = json.loads(shown)
    assert document["only"] == ["boot", "change"]
    assert {f["rule"] for f in document["findings"]} == to_act_on
    assert document["totals"] == full["totals"]


@pytest.mark.parametrize(("only", "said"), [
    ("fail", "--only 'fail': unknown verdict 'fail'; give verdicts, comma-separated: ok, boot, change, n/a"),
    (",", "--only ',': no verdict; give verdicts"),
])
def test_an_unknown_verdict_is_one_line(lab, capsys, tmp_path, only, said):
    code, out, err = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--only", only)
    assert code == 2 and out == ""
    assert said in err and len(err.strip().splitlines()) == 1


def test_only_on_a_profile_where_no_rule_has_the_verdict_says_so(tree, tmp_path):
    loaded(tree, tmp_path, "CONFIG_PAGE_TABLE_ISOLATION=y\n")
    report = audit.audit(tree, [rule("pti", {"CONFIG_PAGE_TABLE_ISOLATION": ("y",)})], "latency")
    text = auditreport.render_table(auditreport.body(report, only=("change",)))
    assert "showing the rules whose verdict is change: 0 of 1\n" in text
    assert "no rule has change\n" in text


# --- colour -------------------------------------------------------------------------------

def test_verdicts_are_coloured_on_a_screen_that_takes_colours(tree, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    loaded(tree, tmp_path, "CONFIG_PAGE_TABLE_ISOLATION=y\n")
    report = audit.audit(tree, [rule("pti", {"CONFIG_PAGE_TABLE_ISOLATION": ("y",)}),
                                rule("debug-on", {"CONFIG_DEBUG_KERNEL": ("y",)})], "latency")
    document = auditreport.body(report)
    kind = kinds.get("audit")
    coloured = kind.render(document, "table", kinds.View(screen=Screen(colour=True)))
    assert "\x1b[1;31mchange\x1b[0m" in coloured and "\x1b[32mok\x1b[0m" in coloured
    # The same text as without colour, and nothing but the verdicts styled.
    plain = kind.render(document, "table")
    assert ANSI.sub("", coloured) == plain == auditreport.render_table(document)
    assert len(ANSI.findall(coloured)) == 4
    monkeypatch.setenv("NO_COLOR", "1")
    no_colour = kind.render(document, "table", kinds.View(screen=Screen(colour=True)))
    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", no_colour) and ANSI.sub("", no_colour) == plain


def test_the_command_colours_a_terminal_and_nothing_else(lab, capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, piped, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server")
    assert not ANSI.search(piped)
    monkeypatch.setattr(Screen, "of", classmethod(lambda cls, stream: cls(80, True)))
    _, shown, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server")
    assert "\x1b[1;31mchange" in shown and ANSI.sub("", shown) == piped
    # -o writes plain text, whatever the terminal
    audited(lab, capsys, tmp_path, "--profile", "throughput-server", "-o", str(tmp_path / "a.txt"))
    assert (tmp_path / "a.txt").read_text() == piped


# --- the profile --------------------------------------------------------------------------

@pytest.mark.parametrize(("config", "profile", "why"), [
    ("CONFIG_PREEMPT_RT=y\n", "latency", "chosen because the config sets CONFIG_PREEMPT_RT=y: a real-time kernel"),
    ("CONFIG_CC_OPTIMIZE_FOR_SIZE=y\n", "embedded-small",
     "chosen because the config sets CONFIG_CC_OPTIMIZE_FOR_SIZE=y: a kernel built for size"),
    # the first sign that holds decides: a real-time kernel built for size is audited for latency
    ("CONFIG_PREEMPT_RT=y\nCONFIG_CC_OPTIMIZE_FOR_SIZE=y\n", "latency",
     "chosen because the config sets CONFIG_PREEMPT_RT=y: a real-time kernel"),
])
def test_the_config_chooses_its_profile(tree, tmp_path, config, profile, why):
    loaded(tree, tmp_path, config)
    assert audit.choose_profile(tree) == (profile, why)


def test_a_config_that_says_no_workload_is_refused_with_the_profiles(tree, tmp_path):
    path = loaded(tree, tmp_path, "CONFIG_DEBUG_KERNEL=y\n")
    with pytest.raises(LabError) as refused:
        audit.choose_profile(tree)
    assert str(refused.value) == (
        f"{path} does not say which workload it is for, as it sets neither PREEMPT_RT=y (a real-time kernel: "
        "latency) nor CC_OPTIMIZE_FOR_SIZE=y (a kernel built for size: embedded-small): give --profile, one of "
        + ", ".join(PROFILES))


def test_the_command_says_which_profile_and_why(lab, capsys, tmp_path):
    code, out, _ = audited(lab, capsys, tmp_path, config=CONFIG + "CONFIG_CC_OPTIMIZE_FOR_SIZE=y\n")
    assert code == 0
    assert "profile: embedded-small (chosen because the config sets CONFIG_CC_OPTIMIZE_FOR_SIZE=y: a kernel " \
           "built for size)\n" in out
    code, out, _ = audited(lab, capsys, tmp_path, "--profile", "storage")
    assert code == 0 and "profile: storage (given with --profile)\n" in out
    code, out, err = audited(lab, capsys, tmp_path)
    assert code == 2 and out == ""
    assert f"give --profile, one of {', '.join(PROFILES)}" in err and len(err.strip().splitlines()) == 1


# --- -o -----------------------------------------------------------------------------------

def test_o_writes_the_format_its_extension_names(lab, capsys, tmp_path):
    for name, starts in (("audit.json", '{\n  "format": "kernellab-audit"'), ("audit.html", "<!DOCTYPE html>"),
                         ("audit.txt", "audit of "), ("audit", "audit of ")):
        code, out, err = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "-o", str(tmp_path / name))
        assert code == 0 and out == "", err
        assert (tmp_path / name).read_text().startswith(starts), name
        assert f"written to {tmp_path / name}" in err
    # --format says it for a name that does not
    code, _, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--format", "json",
                         "-o", str(tmp_path / "audit.out"))
    assert code == 0 and json.loads((tmp_path / "audit.out").read_text())["format"] == "kernellab-audit"


@pytest.mark.parametrize(("args", "said"), [
    (("--format", "json", "-o", "x.html"), "x.html names html, but --format is json: drop one of them"),
    (("-o", "x.md"), "x.md: say the format with --format (table, json, html); -o takes it from .json, .html"),
])
def test_o_and_format_that_disagree_are_one_line(lab, capsys, tmp_path, args, said):
    code, out, err = audited(lab, capsys, tmp_path, "--profile", "throughput-server", *args)
    assert code == 2 and out == ""
    assert said in err and len(err.strip().splitlines()) == 1
    assert not Path("x.html").exists() and not Path("x.md").exists()


# --- one unit: rules ----------------------------------------------------------------------

def test_rules_are_counted_not_options(tree, tmp_path):
    loaded(tree, tmp_path, "CONFIG_PAGE_TABLE_ISOLATION=y\n")
    # two options of one rule, both to change: one rule to change
    report = audit.audit(tree, [rule("two", {"CONFIG_DEBUG_KERNEL": ("y",), "CONFIG_PREEMPT_RT": ("y",)}),
                                rule("pti", {"CONFIG_PAGE_TABLE_ISOLATION": ("y",)})], "latency")
    document = auditreport.body(report)
    assert len(document["findings"]) == 3
    assert document["totals"]["total"] == {"change": 1, "ok": 1}
    assert auditreport.count_line(document) == "rules: 1 ok, 0 boot, 1 change, 0 n/a (2 rules)"
    assert auditreport.count_line(document) in auditreport.render_table(document)


# --- the JSON -----------------------------------------------------------------------------

def test_the_json_says_what_was_audited_and_by_which_kernellab(lab, capsys, tmp_path):
    code, out, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert isinstance(document, dict)
    assert (document["format"], document["format_version"]) == ("kernellab-audit", 2)
    assert document["kernellab"] == __version__
    assert document["config_sha256"] == hashlib.sha256(CONFIG.encode()).hexdigest()
    assert (document["source"], document["source_version"], document["arch"]) == (str(lab.tree), "6.1.0-fake",
                                                                                    "x86_64")
    assert (document["profile"], document["profile_reason"]) == ("throughput-server", "given with --profile")
    assert document["only"] is None
    assert sum(document["totals"]["total"].values()) == len({f["rule"] for f in document["findings"]})
    verdict_of = {}
    for f in document["findings"]:
        verdict_of.setdefault(f["rule"], set()).add(f["verdict"])
    assert {f["rule"]: f["rule_verdict"] for f in document["findings"]} == \
        {r: audit.rule_verdict(v) for r, v in verdict_of.items()}
    # what the command printed is what `show` prints of the file
    path = tmp_path / "audit.json"
    path.write_text(out)
    _, table, _ = audited(lab, capsys, tmp_path, "--profile", "throughput-server")
    assert lab.main("show", str(path)) == 0
    assert capsys.readouterr().out == table


def test_an_audit_written_in_format_1_is_refused_in_one_line(tmp_path, capsys):
    from kernellab.cli import main
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "kernellab-audit", "format_version": 1, "config": "c", "profile": "latency",
                                "where": "w", "findings": [], "totals": {}}))
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is kernellab-audit format 1; this kernellab reads format 2: write it again with `kernellab audit" in err
    assert len(err.strip().splitlines()) == 1


def test_the_kind_writes_version_2():
    assert (kinds.get("audit").version, kinds.get("audit").readable) == (2, (2,))


# --- say each rule once, on Debian's configs ----------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize(("version", "flavour", "this_kernels", "other_kernels"), [
    ("6.1", "none_amd64", "CONFIG_RETPOLINE", "CONFIG_MITIGATION_RETPOLINE"),
    ("6.12", "none_amd64", "CONFIG_MITIGATION_RETPOLINE", "CONFIG_RETPOLINE"),
])
def test_debian_each_rule_names_the_options_its_kernel_has(tmp_path, version, flavour, this_kernels,
                                                           other_kernels):
    """Debian's 6.1 config had nine n/a rows, the 6.12 names of options it has as ok (issue
    33): each rule says its options once, as this kernel names them."""
    profile = arches.load("x86_64")
    tree = kconfig.open_tree(sources.resolve(f"debian:{version}"), profile, toolchain.detect(profile))
    path = tmp_path / "debian.config"
    path.write_bytes(lzma.decompress(Path(f"/usr/src/linux-config-{version}/config.amd64_{flavour}.xz").read_bytes()))
    tree.load(path)
    for name in PROFILES:
        report = audit.audit(tree, rules_for(name), name)
        options = {f.option for f in report.findings}
        if name != "embedded-small":   # which skips the mitigation rules
            assert this_kernels in options and other_kernels not in options
            assert other_kernels in report.left_out["retpoline"]
        verdicts = report.rule_verdicts()
        for f in report.findings:
            # an option this kernel lacks is a row only where its rule has no option it has
            if f.verdict == "n/a" and "does not exist in" in f.reason:
                assert verdicts[f.rule.id][1] == "n/a", (name, f.option)
