"""`kernellab audit`: verdicts, totals and the fragment on a small Kconfig tree with rules
made here; then the real rule base on Debian's 6.1 config, its fragment checked by make."""

import dataclasses
import json
import lzma
import re
import textwrap
from pathlib import Path

import pytest

from kernellab import arches, sources, toolchain
from kernellab.config import audit, kconfig
from kernellab.config.dotconfig import parse_settings
from kernellab.config.resolve import resolve
from kernellab.errors import LabError
from kernellab.knowledge import PROFILES, Evidence, Rule, Switch, default_dir, load_rules, rules_for
from kernellab.report import auditreport
from test_kconfig import tiny_tree

TREE = """
    mainmenu "audit test tree"

    config MODULES
    	bool "Enable loadable module support"
    	modules

    config AUDIT
    	bool "Auditing support"

    config SECURITY_APPARMOR
    	bool "AppArmor support"
    	select AUDIT

    choice
    	prompt "Timer frequency"
    	default HZ_250
    config HZ_250
    	bool "250 HZ"
    config HZ_1000
    	bool "1000 HZ"
    endchoice

    config HZ
    	int
    	default 250 if HZ_250
    	default 1000 if HZ_1000

    config LOG_BUF_SHIFT
    	int "Kernel log buffer size"
    	range 12 25
    	default 17

    config PAGE_TABLE_ISOLATION
    	bool "Remove the kernel mapping in user mode"
    	default y

    config DEBUG_KERNEL
    	bool "Kernel debugging"

    config PROVE_LOCKING
    	bool "Lock debugging: prove locking correctness"
    	depends on DEBUG_KERNEL

    config NEEDS_ARM64
    	bool "Something only arm64 boards have"
    	depends on ARM64

    config IRQ_WORK
    	bool "IRQ work"

    config USER_A
    	bool "Uses irq_work"
    	select IRQ_WORK
    config USER_B
    	bool "Uses irq_work"
    	select IRQ_WORK
    config USER_C
    	bool "Uses irq_work"
    	select IRQ_WORK
    config USER_D
    	bool "Uses irq_work"
    	select IRQ_WORK
    """

BASE = """
    CONFIG_SECURITY_APPARMOR=y
    CONFIG_AUDIT=y
    CONFIG_HZ_250=y
    CONFIG_USER_A=y
    CONFIG_USER_B=y
    CONFIG_USER_C=y
    CONFIG_USER_D=y
    CONFIG_IRQ_WORK=y
    """


def rule(rule_id, expect, category="debugging", skip=()):
    return Rule(id=rule_id, title=f"title of {rule_id}", category=category, rationale="why",
                metric="syscall.null", expected_change="faster",
                expect={p: None if p in skip else expect for p in PROFILES},
                evidence=(Evidence("seed:000_test.txt", "a figure", True, ""),))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    (root / "arch" / "arm64").mkdir(parents=True)
    (root / "arch" / "arm64" / "Kconfig").write_text("config ARM64_64K_PAGES\n\tbool \"64KB\"\n")
    return tiny_tree(root, TREE)


@pytest.fixture
def base(tree, tmp_path):
    path = tmp_path / "base.config"
    path.write_text(textwrap.dedent(BASE))
    tree.load(path)
    return path


def verdicts(report):
    return {(f.rule.id, f.option): (f.verdict, f.target, f.reason) for f in report.findings}


def test_verdicts_and_reasons(tree, base):
    rules = [
        rule("lockdep-on", {"CONFIG_PROVE_LOCKING": ("y",)}),
        rule("audit-off", {"CONFIG_AUDIT": ("n",)}, "accounting"),
        rule("hz-1000", {"CONFIG_HZ_1000": ("y",), "CONFIG_HZ": ("1000",)}, "preemption-timers"),
        rule("log-buf", {"CONFIG_LOG_BUF_SHIFT": ("12", "13")}, "size"),
        rule("log-buf-huge", {"CONFIG_LOG_BUF_SHIFT": ("30",)}, "size"),
        rule("pti", {"CONFIG_PAGE_TABLE_ISOLATION": ("y",), "CONFIG_MITIGATION_PAGE_TABLE_ISOLATION": ("y",)},
             "mitigations-hardening"),
        rule("arm-pages", {"CONFIG_ARM64_64K_PAGES": ("y",)}, "memory"),
        rule("needs-arm", {"CONFIG_NEEDS_ARM64": ("y",)}, "memory"),
        rule("irq-work-off", {"CONFIG_IRQ_WORK": ("n",)}, "size"),
        rule("skipped", {"CONFIG_AUDIT": ("y",)}, skip=("latency",)),
    ]
    report = audit.audit(tree, rules, "latency")
    assert verdicts(report) == {
        ("lockdep-on", "CONFIG_PROVE_LOCKING"): ("change", "y", "needs CONFIG_DEBUG_KERNEL=y too"),
        ("audit-off", "CONFIG_AUDIT"): ("change", "n", "needs CONFIG_SECURITY_APPARMOR=n too"),
        ("hz-1000", "CONFIG_HZ_1000"): ("change", "y", ""),
        ("hz-1000", "CONFIG_HZ"): ("change", "1000", "needs CONFIG_HZ_1000=y too"),
        ("log-buf", "CONFIG_LOG_BUF_SHIFT"): ("change", "12", ""),
        ("log-buf-huge", "CONFIG_LOG_BUF_SHIFT"): (
            "n/a", None, "30 is outside the range of LOG_BUF_SHIFT (12..25)"),
        ("pti", "CONFIG_PAGE_TABLE_ISOLATION"): ("ok", None, ""),
        ("arm-pages", "CONFIG_ARM64_64K_PAGES"): (
            "n/a", None, "CONFIG_ARM64_64K_PAGES is arch-specific: not defined for x86_64 in Linux 6.99.0"),
        ("needs-arm", "CONFIG_NEEDS_ARM64"): ("n/a", None, "ARM64 is not defined for x86_64 in Linux 6.99.0"),
        ("irq-work-off", "CONFIG_IRQ_WORK"): (
            "change", "n", "takes more than assignments: IRQ_WORK=n "
                           "(selected by 4 options that are on: USER_A, USER_B, USER_C, USER_D)"),
    }
    # The other kernel's name of PTI's option is no row of its own: this kernel has the option.
    assert report.left_out == {"pti": ("CONFIG_MITIGATION_PAGE_TABLE_ISOLATION",)}


def test_rule_verdicts_and_totals(tree, base):
    rules = [rule("pti", {"CONFIG_PAGE_TABLE_ISOLATION": ("y",), "CONFIG_MITIGATION_PAGE_TABLE_ISOLATION": ("y",)},
                  "mitigations-hardening"),
             rule("lockdep-on", {"CONFIG_PROVE_LOCKING": ("y",), "CONFIG_AUDIT": ("y",)}),
             rule("arm-pages", {"CONFIG_ARM64_64K_PAGES": ("y",)}, "memory")]
    report = audit.audit(tree, rules, "storage")
    # A change wins over an ok option.
    assert {k: v for k, (_, v) in report.rule_verdicts().items()} == {
        "pti": "ok", "lockdep-on": "change", "arm-pages": "n/a"}
    totals = report.totals()
    assert totals["total"] == {"ok": 1, "change": 1, "n/a": 1}
    assert totals["memory"] == {"n/a": 1}
    # The reasons of two rows, out of the table to keep its lines short.
    needs_debug = "needs CONFIG_DEBUG_KERNEL=y too"
    arm_only = "CONFIG_ARM64_64K_PAGES is arch-specific: not defined for x86_64 in Linux 6.99.0"
    assert auditreport.render_table(auditreport.body(report)) == textwrap.dedent(f"""\
        audit of {base} (Linux 6.99.0 x86_64)
        profile: storage (given with --profile)
        rules: 1 ok, 0 boot, 1 change, 1 n/a (3 rules)

        rule        option                        current  expected    verdict  reason
        pti         CONFIG_PAGE_TABLE_ISOLATION         y  y           ok
        lockdep-on  CONFIG_PROVE_LOCKING                n  y           change   {needs_debug}
        lockdep-on  CONFIG_AUDIT                        y  y           ok
        arm-pages   CONFIG_ARM64_64K_PAGES              -  y           n/a      {arm_only}

        left out: 1 option name(s) that Linux 6.99.0 x86_64 does not define, other kernels' names of the options \
of 1 rule(s) (listed in --format json)

        rules per category         ok    boot  change     n/a   rules
        debugging                   0       0       1       0       1
        memory                      0       0       0       1       1
        mitigations-hardening       1       0       0       0       1
        total                       1       0       1       1       3
        """)



def test_a_profile_no_rule_audits(tree, base):
    report = audit.audit(tree, [rule("skipped", {"CONFIG_AUDIT": ("y",)}, skip=("latency",))], "latency")
    assert report.findings == []
    assert auditreport.render_table(auditreport.body(report, profile_reason="chosen because of a test")) == (
        f"audit of {base} (Linux 6.99.0 x86_64)\nprofile: latency (chosen because of a test)\n"
        "rules: 0 ok, 0 boot, 0 change, 0 n/a (0 rules)\n\nno rule audits this profile\n")

def test_json_rows_carry_evidence_and_metric(tree, base):
    report = audit.audit(tree, [rule("lockdep-on", {"CONFIG_PROVE_LOCKING": ("y",)})], "latency")
    [row] = json.loads(json.dumps(report.to_json()))
    assert row == {"rule_verdict": "change",
        "rule": "lockdep-on", "title": "title of lockdep-on", "category": "debugging",
        "option": "CONFIG_PROVE_LOCKING", "current": "n", "expected": ["y"], "verdict": "change",
        "reason": "needs CONFIG_DEBUG_KERNEL=y too", "recommended": "y",
        "settings": ["CONFIG_DEBUG_KERNEL=y", "CONFIG_PROVE_LOCKING=y"],
        "evidence": [{"source": "seed:000_test.txt", "figure": "a figure", "verified": True, "note": ""}],
        "metric": "syscall.null", "expected_change": "faster"}


def applied_cleanly(tree, text):
    """The fragment's every line holds once merged onto the audited config."""
    tree.restore()
    settings = parse_settings(text, "fragment")
    tree.apply(settings, "fragment")
    kept = all(tree.value(tree.symbol(s.name)) == s.value for s in settings)
    tree.restore()
    return kept


def test_fragment_includes_what_a_change_needs(tree, base):
    rules = [rule("lockdep-on", {"CONFIG_PROVE_LOCKING": ("y",)}),
             rule("hz-1000", {"CONFIG_HZ_1000": ("y",), "CONFIG_HZ": ("1000",)}, "preemption-timers")]
    report = audit.audit(tree, rules, "latency")
    text = audit.fragment(tree, report)
    assert [s.line() for s in parse_settings(text, "f")] == [
        "CONFIG_DEBUG_KERNEL=y", "CONFIG_PROVE_LOCKING=y", "CONFIG_HZ_1000=y"]
    assert "#   CONFIG_PROVE_LOCKING=y needs CONFIG_DEBUG_KERNEL=y too" in text
    assert "#   CONFIG_HZ=1000 comes with the lines above" in text
    assert applied_cleanly(tree, text)
    assert tree.value(tree.symbol("HZ")) == "250"     # the audited config is back


def test_fragment_leaves_out_what_does_not_survive_and_says_why(tree, base):
    rules = [rule("hz-1000", {"CONFIG_HZ_1000": ("y",)}, "preemption-timers"),
             rule("hz-250", {"CONFIG_HZ_250": ("y",), "CONFIG_HZ": ("250",)}, "preemption-timers"),
             rule("hz-250-off", {"CONFIG_HZ_250": ("n",)}, "preemption-timers"),
             rule("irq-work-off", {"CONFIG_IRQ_WORK": ("n",)}, "size")]
    report = audit.audit(tree, rules, "latency")
    text = audit.fragment(tree, report)
    assert [s.line() for s in parse_settings(text, "f")] == ["CONFIG_HZ_1000=y"]
    assert "# hz-250-off: CONFIG_HZ_250=n left out: the lines above already give it this value" in text
    assert "# irq-work-off: CONFIG_IRQ_WORK=n left out: takes more than assignments" in text
    assert applied_cleanly(tree, text)


def test_a_change_the_others_make_possible_is_planned_again(tree, base):
    rules = [rule(f"user-{x}-off", {f"CONFIG_USER_{x}": ("n",)}, "size") for x in "ABCD"]
    rules.append(rule("irq-work-off", {"CONFIG_IRQ_WORK": ("n",)}, "size"))
    report = audit.audit(tree, rules, "latency")
    assert verdicts(report)["irq-work-off", "CONFIG_IRQ_WORK"][2].startswith("takes more than assignments")
    text = audit.fragment(tree, report)
    assert [s.line() for s in parse_settings(text, "f")][-1] == "# CONFIG_IRQ_WORK is not set"
    assert "Not applied" not in text
    assert applied_cleanly(tree, text)


def test_conflicting_recommendations_keep_the_last(tree, base):
    rules = [rule("log-12", {"CONFIG_LOG_BUF_SHIFT": ("12",)}, "size"),
             rule("log-13", {"CONFIG_LOG_BUF_SHIFT": ("13",)}, "size"),
             rule("no-hz-100", {"CONFIG_HZ": ("100",)}, "preemption-timers")]
    report = audit.audit(tree, rules, "latency")
    assert verdicts(report)["no-hz-100", "CONFIG_HZ"] == ("n/a", None, "HZ has no prompt and no default gives it 100")
    text = audit.fragment(tree, report)
    assert [s.line() for s in parse_settings(text, "f")] == ["CONFIG_LOG_BUF_SHIFT=13"]
    assert ("# log-12: CONFIG_LOG_BUF_SHIFT=12 left out: with the other recommendations, olddefconfig "
            "turns CONFIG_LOG_BUF_SHIFT=12 into CONFIG_LOG_BUF_SHIFT=13") in text
    assert applied_cleanly(tree, text)


# --- a rule that outranks another ------------------------------------------------------------

# Transparent huge pages need !PREEMPT_RT. Where RT is an option of its own (mainline since
# 6.12) turning it off takes one assignment; inside the preemption choice (Debian's 6.12
# source) it takes picking another model.
RT_TREES = {
    "bool": """
        mainmenu "real-time test tree"

        choice
        	prompt "Preemption Model"
        config PREEMPT_NONE
        	bool "No forced preemption"
        config PREEMPT
        	bool "Preemptible kernel"
        endchoice

        config PREEMPT_RT
        	bool "Fully preemptible kernel (real-time)"

        config TRANSPARENT_HUGEPAGE
        	bool "Transparent huge pages"
        	depends on !PREEMPT_RT

        config HZ_1000
        	bool "1000 HZ"
        """,
    "choice": """
        mainmenu "real-time test tree"

        choice
        	prompt "Preemption Model"
        config PREEMPT_NONE
        	bool "No forced preemption"
        config PREEMPT
        	bool "Preemptible kernel"
        config PREEMPT_RT
        	bool "Fully preemptible kernel (real-time)"
        endchoice

        config TRANSPARENT_HUGEPAGE
        	bool "Transparent huge pages"
        	depends on !PREEMPT_RT

        config HZ_1000
        	bool "1000 HZ"
        """,
}


@pytest.fixture(scope="module", params=sorted(RT_TREES))
def rt_tree(request, tmp_path_factory):
    return tiny_tree(tmp_path_factory.mktemp(f"rt-{request.param}"), RT_TREES[request.param])


def parse_lines(fragment_text):
    return [s.line() for s in parse_settings(fragment_text, "fragment")]


def load_config(tree, tmp_path, text):
    path = tmp_path / "rt.config"
    path.write_text(textwrap.dedent(text))
    assert tree.load(path) == []
    return path


REAL_TIME = """
    CONFIG_PREEMPT_RT=y
    # CONFIG_TRANSPARENT_HUGEPAGE is not set
    """
PREEMPTIBLE = "CONFIG_PREEMPT=y\n"
THP = rule("thp", {"CONFIG_TRANSPARENT_HUGEPAGE": ("y",)}, "memory")
# As preempt-full-latency: PREEMPT asked for, a real-time kernel accepted as stronger.
PREEMPTION = dataclasses.replace(rule("preemption", {"CONFIG_PREEMPT": ("y",)}, "preemption-timers"),
                                 satisfied_by=(("CONFIG_PREEMPT_RT", "y"),))
NOT_APPLICABLE = "not applicable here: needs PREEMPT_RT=n, but CONFIG_PREEMPT_RT=y holds for {}, which outranks thp"


def test_without_outranks_the_way_to_a_rule_undoes_the_real_time_kernel(rt_tree, tmp_path):
    """What the audit said before rules could outrank others: a change, and with RT a plain
    option, a fragment that turns it off."""
    load_config(rt_tree, tmp_path, REAL_TIME)
    report = audit.audit(rt_tree, [PREEMPTION, THP], "latency")
    text = audit.fragment(rt_tree, report)
    if rt_tree.symbol("PREEMPT_RT").choice is None:
        assert verdicts(report)["thp", "CONFIG_TRANSPARENT_HUGEPAGE"] == (
            "change", "y", "needs CONFIG_PREEMPT_RT=n too")
        assert "# CONFIG_PREEMPT_RT is not set" in parse_lines(text)
    else:
        assert verdicts(report)["thp", "CONFIG_TRANSPARENT_HUGEPAGE"] == ("change", "y", (
            "takes more than assignments: PREEMPT_RT=n (select another option of the choice "
            "'Preemption Model': PREEMPT_NONE, PREEMPT)"))


@pytest.mark.parametrize("strong", [
    PREEMPTION,                                                      # holds a stronger choice
    rule("rt", {"CONFIG_PREEMPT_RT": ("y",)}, "preemption-timers"),  # holds its own option
], ids=["satisfied_by", "expect"])
def test_a_rule_is_not_applicable_where_its_way_gives_up_what_an_outranking_rule_holds(
        rt_tree, tmp_path, strong):
    strong = dataclasses.replace(strong, outranks=("thp",))
    load_config(rt_tree, tmp_path, REAL_TIME)
    report = audit.audit(rt_tree, [strong, THP], "latency")
    assert verdicts(report)["thp", "CONFIG_TRANSPARENT_HUGEPAGE"] == ("n/a", None, NOT_APPLICABLE.format(strong.id))
    assert report.rule_verdicts()["thp"][1] == "n/a"
    text = audit.fragment(rt_tree, report)
    assert "PREEMPT_RT" not in text and "TRANSPARENT_HUGEPAGE" not in text


def test_outranking_holds_only_what_the_config_has_and_where_the_profile_audits_it(rt_tree, tmp_path):
    strong = dataclasses.replace(PREEMPTION, outranks=("thp",))
    # Not a real-time kernel: nothing stands in the way of huge pages.
    load_config(rt_tree, tmp_path, PREEMPTIBLE)
    report = audit.audit(rt_tree, [strong, THP], "latency")
    assert verdicts(report)["thp", "CONFIG_TRANSPARENT_HUGEPAGE"] == ("change", "y", "")
    # A profile the outranking rule does not audit: a server is told to leave RT.
    load_config(rt_tree, tmp_path, REAL_TIME)
    not_for_servers = dataclasses.replace(strong, expect={p: None if p == "throughput-server" else e
                                                          for p, e in strong.expect.items()})
    report = audit.audit(rt_tree, [not_for_servers, THP], "throughput-server")
    assert verdicts(report)["thp", "CONFIG_TRANSPARENT_HUGEPAGE"][0] == "change"
    # A rule it does not outrank, whose way keeps RT, is still a change.
    hz = rule("hz", {"CONFIG_HZ_1000": ("y",)}, "preemption-timers")
    report = audit.audit(rt_tree, [strong, THP, hz], "latency")
    assert verdicts(report)["hz", "CONFIG_HZ_1000"] == ("change", "y", "")


# --- the real rule base on Debian's 6.1 config ------------------------------------------------

def without_btf(warnings):
    """Debian builds with pahole and this host has none: its BTF options cannot hold here,
    and loading says so. Every other warning stays."""
    return [w for w in warnings
            if not ("cannot hold" in w and all("BTF" in o for o in re.findall(r"(CONFIG_\w+)=\S+ -> ", w)))]


@pytest.fixture(scope="module")
def debian(tmp_path_factory):
    source = sources.resolve("debian:6.1")
    profile = arches.load("x86_64")
    tc = toolchain.detect(profile)
    path = tmp_path_factory.mktemp("debian") / "debian-6.1.config"
    path.write_bytes(lzma.decompress(Path(f"/usr/src/linux-config-6.1/{profile.debian_config}").read_bytes()))
    return source, profile, tc, path, kconfig.open_tree(source, profile, tc)


@pytest.mark.integration
@pytest.mark.parametrize("profile_name", ["throughput-server", "latency"])
def test_debian_fragment_resolves_cleanly_with_make(debian, profile_name):
    source, profile, tc, path, tree = debian
    assert without_btf(tree.load(path)) == []
    report = audit.audit(tree, rules_for(profile_name), profile_name)
    assert {f.verdict for f in report.findings} == {"ok", "boot", "change", "n/a"}
    text = audit.fragment(tree, report)
    settings = parse_settings(text, "fragment")
    assert settings
    made = resolve(source, profile, tc, str(path), settings)
    assert made.dropped == []


@pytest.mark.integration
def test_every_profile_audits_debian(debian):
    *_, path, tree = debian
    tree.load(path)
    for name in PROFILES:
        report = audit.audit(tree, rules_for(name), name)
        totals = report.totals()["total"]
        assert sum(totals.values()) == len(report.rule_verdicts()) == len(rules_for(name))
        assert all(f.reason for f in report.findings if f.verdict == "n/a")
        audit.fragment(tree, report)


def test_a_stronger_choice_of_the_same_kind_satisfies_a_rule(tree, tmp_path):
    path = tmp_path / "hz1000.config"
    path.write_text(textwrap.dedent(BASE).replace("CONFIG_HZ_250=y", "CONFIG_HZ_1000=y"))
    tree.load(path)
    asks = rule("hz-at-least-250", {"CONFIG_HZ_250": ("y",)})
    [plain] = audit.audit(tree, [asks], "latency").findings
    assert plain.verdict == "change"      # without the alternative: told to undo HZ_1000
    stronger = dataclasses.replace(asks, satisfied_by=(("CONFIG_HZ_1000", "y"),))
    [finding] = audit.audit(tree, [stronger], "latency").findings
    assert (finding.verdict, finding.reason) == ("ok", "CONFIG_HZ_1000=y holds: a stronger choice of the same kind")
    assert "CONFIG_HZ" not in audit.fragment(tree, audit.audit(tree, [stronger], "latency"))


def test_a_malformed_alternative_is_refused_by_the_loader(tmp_path):
    shipped = (default_dir() / "preemption-timers.toml").read_text()
    (tmp_path / "preemption-timers.toml").write_text(
        shipped.replace('satisfied_by = ["CONFIG_PREEMPT_RT=y"]', 'satisfied_by = ["PREEMPT_RT"]'))
    with pytest.raises(LabError, match="preempt-full-latency: satisfied_by 'PREEMPT_RT' is not CONFIG_NAME=VALUE"):
        load_rules(tmp_path)


@pytest.mark.integration
def test_a_real_time_kernel_is_not_told_to_undo_its_preemption(tmp_path):
    """Debian's 6.12 rt kernel (PREEMPT_RT, mainline on x86 since 6.12) audited for latency:
    its preemption is stronger than PREEMPT; Debian's generic kernel (PREEMPT_DYNAMIC,
    VOLUNTARY by default) is told to change."""
    profile = arches.load("x86_64")
    source = sources.resolve("debian:6.12")
    tree = kconfig.open_tree(source, profile, toolchain.detect(profile))
    verdicts = {}
    for flavour in ("rt_amd64", "none_amd64"):
        path = Path(f"/usr/src/linux-config-6.12/config.amd64_{flavour}.xz")
        local = tmp_path / f"{flavour}.config"
        local.write_bytes(lzma.decompress(path.read_bytes()))
        warnings = without_btf(tree.load(local))
        # The rt flavour's lazy-preemption options, and i915 under PREEMPT_RT, come from
        # the RT patch set, which the source package does not carry: reported, never
        # dropped in silence.
        if flavour == "none_amd64":
            assert warnings == []
        else:
            unknown, cannot = warnings
            assert "CONFIG_PREEMPT_LAZY" in unknown
            assert "CONFIG_DRM_I915=m -> n (depends on DRM && X86 && PCI && !PREEMPT_RT" in cannot
        report = audit.audit(tree, rules_for("latency"), "latency")
        [verdicts[flavour]] = [f for f in report.findings if f.rule.id == "preempt-full-latency"]
    assert (verdicts["rt_amd64"].verdict, verdicts["rt_amd64"].reason) == \
        ("ok", "CONFIG_PREEMPT_RT=y holds: a stronger choice of the same kind")
    # PREEMPT_DYNAMIC: the generic kernel becomes fully preemptible at boot.
    assert (verdicts["none_amd64"].verdict, verdicts["none_amd64"].reason) == \
        ("boot", "no rebuild: boot with preempt=full (CONFIG_PREEMPT_DYNAMIC=y lets the kernel choose)")


@pytest.mark.integration
@pytest.mark.parametrize("version", ["6.1", "6.12"])
def test_a_real_time_kernel_is_not_told_to_give_up_real_time_for_huge_pages(tmp_path, version):
    """Debian's rt config audited for latency: THP needs !PREEMPT_RT, and preempt-full-latency,
    which holds PREEMPT_RT=y, outranks thp-madvise, so no change is asked for. Linux 6.1's
    source cannot hold PREEMPT_RT on x86 (Debian's 6.1 rt kernel carries the RT patch set):
    the audit says so and answers for the config it resolves to, which is not real-time."""
    profile = arches.load("x86_64")
    tree = kconfig.open_tree(sources.resolve(f"debian:{version}"), profile, toolchain.detect(profile))
    local = tmp_path / "rt.config"
    local.write_bytes(lzma.decompress(Path(f"/usr/src/linux-config-{version}/config.amd64_rt_amd64.xz").read_bytes()))
    warnings = tree.load(local)
    report = audit.audit(tree, rules_for("latency"), "latency")
    thp = {f.option: (f.verdict, f.reason) for f in report.findings if f.rule.id == "thp-madvise"}
    assert not [f for f in report.findings if f.verdict == "change" and "PREEMPT_RT" in f.reason]
    assert "PREEMPT_RT" not in audit.fragment(tree, report)
    if version == "6.12":
        gives_up = ("n/a", "not applicable here: needs PREEMPT_RT=n, but CONFIG_PREEMPT_RT=y holds for "
                           "preempt-full-latency, which outranks thp-madvise")
        assert thp == {"CONFIG_TRANSPARENT_HUGEPAGE": gives_up, "CONFIG_TRANSPARENT_HUGEPAGE_MADVISE": gives_up}
    else:
        assert any("CONFIG_PREEMPT_RT=y -> n" in w for w in warnings)
        assert thp == {"CONFIG_TRANSPARENT_HUGEPAGE": ("change", ""),
                       "CONFIG_TRANSPARENT_HUGEPAGE_MADVISE": ("change", "needs CONFIG_TRANSPARENT_HUGEPAGE=y too")}


@pytest.mark.integration
def test_a_distribution_config_is_reduced_onto_lab_minimal_keeping_what_the_rules_check(debian):
    """audit --measure's kernel for Debian's config: its kernel-wide choices and every
    option the audit checks (a choice whole), none of its drivers."""
    source, profile, tc, path, tree = debian
    from kernellab.config import reduce
    from kernellab.config.dotconfig import parse_config
    from kernellab.experiments import lab
    from kernellab.experiments.spec import VariantSpec
    lean = lab.prepare(VariantSpec("lab-minimal", "lab-minimal", source="debian:6.1", arch="x86_64")).config.values
    values = parse_config(path.read_text(), str(path))
    assert reduce.is_distribution_size(values) and not reduce.is_distribution_size(lean)
    reduced = reduce.reduce(tree, lean, values, {"CONFIG_PREEMPT_NONE", "CONFIG_TRANSPARENT_HUGEPAGE",
                                                 "CONFIG_TRANSPARENT_HUGEPAGE_MADVISE"})
    assert reduced["CONFIG_DEBUG_LIST"] == "y"                  # Kernel hacking
    assert reduced["CONFIG_RETPOLINE"] == "y"                   # the mitigations menu
    assert reduced["CONFIG_PREEMPT_VOLUNTARY"] == "y"           # the choice of an option asked for
    assert reduced["CONFIG_PREEMPT_NONE"] == "n"
    assert reduced["CONFIG_TRANSPARENT_HUGEPAGE"] == reduced["CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS"] == "y"
    assert reduced["CONFIG_DEBUG_INFO_NONE"] == "y" and "CONFIG_DEBUG_INFO_DWARF5" not in reduced
    assert not any(o in reduced for o in ("CONFIG_E1000E", "CONFIG_EXT4_FS", "CONFIG_SECURITY_APPARMOR"))
    assert 50 < len(reduced) < 400
    assert without_btf(tree.load(path)) == []   # the module's other tests read the Debian config from the tree


def test_a_change_the_kernel_makes_at_boot_is_not_a_rebuild(tree, base):
    """With the rule's switch available (AUDIT=y here: audit=0 at boot), the verdict is
    `boot` with the parameter, and the fragment lists it apart from the lines it sets."""
    plain = rule("audit-off", {"CONFIG_AUDIT": ("n",)}, "accounting")
    switched = dataclasses.replace(plain, switch=Switch((("CONFIG_AUDIT", "y"),), "audit=0"))
    [change] = audit.audit(tree, [plain], "storage").findings
    assert change.verdict == "change"
    report = audit.audit(tree, [switched], "storage")
    [finding] = report.findings
    assert (finding.verdict, finding.target) == ("boot", "n")
    assert finding.reason == "no rebuild: boot with audit=0 (CONFIG_AUDIT=y lets the kernel choose)"
    assert report.totals()["total"] == {"boot": 1}
    text = audit.fragment(tree, report)
    assert "# audit-off: boot with audit=0 rather than setting CONFIG_AUDIT=n" in text
    assert "# CONFIG_AUDIT is not set" not in text and "CONFIG_SECURITY_APPARMOR" not in text
    # Without the condition holding (the switch belongs to another build), it is a change again.
    other = dataclasses.replace(plain, switch=Switch((("CONFIG_HZ_1000", "y"),), "audit=0"))
    assert [f.verdict for f in audit.audit(tree, [other], "storage").findings] == ["change"]


def test_a_malformed_switch_is_refused_by_the_loader(tmp_path):
    shipped = (default_dir() / "accounting.toml").read_text()
    (tmp_path / "accounting.toml").write_text(shipped.replace('boot = "audit=0"', 'boot = "audit=0 quiet"'))
    with pytest.raises(LabError, match="audit-off: switch.boot 'audit=0 quiet' is not one kernel parameter"):
        load_rules(tmp_path)


def test_a_rules_flaws_are_names_the_kernel_reports_and_a_bad_one_is_refused(tmp_path):
    by_id = {r.id: r for r in load_rules()}
    assert by_id["page-table-isolation"].flaws == ("meltdown",)
    assert by_id["retpoline"].flaws == ("spectre_v2",)
    shipped = (default_dir() / "mitigations-hardening.toml").read_text()
    (tmp_path / "mitigations-hardening.toml").write_text(shipped.replace('flaws = ["meltdown"]',
                                                                         'flaws = ["Meltdown!"]'))
    with pytest.raises(LabError, match="page-table-isolation: flaws: 'Meltdown!' is not a file name of "
                                       "/sys/devices/system/cpu/vulnerabilities"):
        load_rules(tmp_path)
