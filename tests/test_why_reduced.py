"""`kernellab why` on two distribution-size configurations (issue 32) in the fake lab:
measured reduced onto lab-minimal (config.reduce), keeping every option in which A and B
differ whatever menu it is in, the answer saying so and listing what the reduction left
out; `--whole` measures them as they are.

The fake tree has no modules and a few dozen options: the threshold of "distribution
size" (config.reduce.DISTRIBUTION_OPTIONS) is made small here. The two "distribution"
configurations share options lab-minimal does not set, outside the reduction's menus
(HZ_1000, KERNEL_XZ, FAKE_LAYOUT_1: left out), and differ in FAKE_SLOW (25% slower
system calls: the planted option, in the fake knobs' menu), CC_OPTIMIZE_FOR_SIZE (General
setup), FAKE_LAYOUT_2 (forks only), DEBUG_LIST (Kernel hacking, 1%: below the threshold)
and SLUB_DEBUG_ON (Kernel hacking, forks only)."""

import json
from pathlib import Path

import pytest

from kernellab.config import reduce

SHARED = """CONFIG_HZ_1000=y
CONFIG_KERNEL_XZ=y
CONFIG_FAKE_LAYOUT_1=y
CONFIG_DEBUG_KERNEL=y
CONFIG_NET=y
CONFIG_UNIX=y
CONFIG_INET=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_DEVTMPFS=y
CONFIG_TMPFS=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_BLK=y
CONFIG_CRYPTO=y
CONFIG_CRYPTO_AES=y
CONFIG_CRYPTO_CBC=y
CONFIG_CRYPTO_USER_API_SKCIPHER=y
"""
A_ONLY = "# CONFIG_FAKE_SLOW is not set\n# CONFIG_DEBUG_LIST is not set\n"
B_ONLY = ("CONFIG_FAKE_SLOW=y\nCONFIG_DEBUG_LIST=y\nCONFIG_CC_OPTIMIZE_FOR_SIZE=y\nCONFIG_FAKE_LAYOUT_2=y\n"
          "CONFIG_SLUB_DEBUG_ON=y\n")
DIFFERING = {"CONFIG_FAKE_SLOW", "CONFIG_DEBUG_LIST", "CONFIG_CC_OPTIMIZE_FOR_SIZE",
             "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE", "CONFIG_FAKE_LAYOUT_2", "CONFIG_SLUB_DEBUG_ON"}
LEFT_OUT = {"CONFIG_HZ_1000", "CONFIG_KERNEL_XZ", "CONFIG_FAKE_LAYOUT_1"}


@pytest.fixture
def distributions(lab, monkeypatch):
    """Two "distribution" configs of the fake tree, and a distribution-size threshold
    they pass (lab-minimal's resolution sets about as many: only A and B are judged)."""
    monkeypatch.setattr(reduce, "DISTRIBUTION_OPTIONS", 20)
    a, b = lab.tmp / "vendor.config", lab.tmp / "tuned.config"
    a.write_text(SHARED + A_ONLY)
    b.write_text(SHARED + B_ONLY)
    return lab, f"a={a}", f"b={b}"


def why_json(lab, capsys, *args):
    rc = lab.main("why", *args, "--metric", "syscall.null", "--format", "json")
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(captured.out)


def test_distribution_configs_are_measured_reduced_keeping_every_differing_option(distributions, capsys):
    lab, a, b = distributions
    result = why_json(lab, capsys, a, b)
    reduced = result["reduced"]
    assert reduced["measured"] == "reduced onto lab-minimal"
    assert reduced["threshold"]["options"] == 20 and reduced["size"]["B"]["set"] > 20
    # Every option in which A and B differ is kept, whatever its menu, and holds.
    assert {k.split(":")[0] for k in reduced["kept"]} == DIFFERING and reduced["not_kept"] == []
    kept = {side: Path(path).read_text() for side, path in reduced["configs"].items()}
    # (lab-minimal, on tinyconfig, optimizes for size: A's reduction is what keeps -O2)
    assert "CONFIG_FAKE_SLOW=y" in kept["B"] and "CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y" in kept["A"], kept
    # What they share outside the reduction's menus is left out, listed by menu.
    left_out = {o for group in reduced["left_out"] for o in group["options"]}
    assert LEFT_OUT <= left_out and not left_out & DIFFERING
    assert {g["menu"] for g in reduced["left_out"] if "CONFIG_HZ_1000" in g["options"]} == {
        "Processor type and features"}
    assert not any("HZ_1000" in text for text in kept.values())
    # The answer names the planted option; the kernels measured are the reductions.
    [m] = result["metrics"]
    assert [c["name"] for c in m["culprits"]] == ["CONFIG_FAKE_SLOW=y"]
    assert m["option_search"]["candidates"] == len(DIFFERING)   # the left-out options are not bisected
    assert result["a"]["base"].endswith("vendor.config")   # the variants as given
    # The text and Markdown say it was measured reduced, and what was left out.
    path = lab.tmp / "why.json"
    path.write_text(json.dumps(result))
    for fmt, marker in (("table", "measured reduced onto lab-minimal"), ("markdown", "measured reduced onto")):
        assert lab.main("show", str(path), "--format", fmt) == 0
        out = capsys.readouterr().out
        assert marker in out and "left out" in out and "CONFIG_HZ_1000" in out, out


def test_whole_measures_the_configurations_as_they_are(distributions, capsys):
    lab, a, b = distributions
    result = why_json(lab, capsys, a, b, "--whole")
    assert result["reduced"] is None
    [m] = result["metrics"]
    assert [c["name"] for c in m["culprits"]] == ["CONFIG_FAKE_SLOW=y"]


def test_configs_below_the_threshold_are_measured_as_they_are(lab, capsys):
    result = why_json(lab, capsys, "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y")
    assert result["reduced"] is None


def test_a_differing_option_the_reduction_cannot_hold_is_reported_with_why(distributions, capsys, monkeypatch):
    """A reduction that does not hold FAKE_LAYOUT_2 (as one leaves debug info off): the
    answer lists it as not kept, with what olddefconfig made of it, and does not call it kept."""
    lab, a, b = distributions
    whole = reduce.reduce

    def losing(tree, lean, config, also=()):
        out = whole(tree, lean, config, also)
        out.pop("CONFIG_FAKE_LAYOUT_2", None)
        return out
    monkeypatch.setattr(reduce, "reduce", losing)
    reduced = why_json(lab, capsys, a, b)["reduced"]
    [lost] = reduced["not_kept"]
    assert (lost["option"], lost["side"], lost["wanted"], lost["got"]) == ("CONFIG_FAKE_LAYOUT_2", "B", "y", "n")
    assert lost["needs"]
    assert not any(k.startswith("CONFIG_FAKE_LAYOUT_2:") for k in reduced["kept"])


def test_what_a_differing_option_needs_is_kept_too_and_said(lab, capsys, monkeypatch):
    """B sets FAKE_NEEDS_BASE, which depends on FAKE_BASE: both configurations set FAKE_BASE
    (so it is not an option in which they differ), outside the reduction's menus, and
    lab-minimal leaves it unset. The reduction keeps it because the differing option needs
    it, and says so; without that step FAKE_NEEDS_BASE would not hold on B's reduction.
    (B is also FAKE_SLOW: a change for `why` to explain.)"""
    from kernellab.experiments import why

    monkeypatch.setattr(reduce, "DISTRIBUTION_OPTIONS", 20)
    a, b = lab.tmp / "vendor.config", lab.tmp / "tuned.config"
    a.write_text(SHARED + "CONFIG_FAKE_BASE=y\n")
    b.write_text(SHARED + "CONFIG_FAKE_BASE=y\nCONFIG_FAKE_NEEDS_BASE=y\nCONFIG_FAKE_SLOW=y\n")
    reduced = why_json(lab, capsys, f"a={a}", f"b={b}")["reduced"]
    assert reduced["needed"] == ["CONFIG_FAKE_BASE"]
    assert {k.split(":")[0] for k in reduced["kept"]} == {"CONFIG_FAKE_NEEDS_BASE", "CONFIG_FAKE_SLOW"}
    assert reduced["not_kept"] == []
    assert "CONFIG_FAKE_BASE=y" in Path(reduced["configs"]["B"]).read_text()

    # The step this proves: with no rounds of it, the option is reported not kept, with why.
    monkeypatch.setattr(why, "NEED_ROUNDS", 0)
    again = why_json(lab, capsys, f"a={a}", f"b={b}")["reduced"]
    assert again["needed"] == [] and [n["option"] for n in again["not_kept"]] == ["CONFIG_FAKE_NEEDS_BASE"]
    assert "FAKE_BASE" in again["not_kept"][0]["needs"]


def test_what_a_kept_option_selects_is_set_alike_on_both_reductions(lab, capsys, monkeypatch):
    """Both configurations set FAKE_GROUPS (outside the reduction's menus; lab-minimal leaves
    it unset); A also sets FAKE_AUTOGROUP, which selects it, and B does not. Reduced, A
    would have FAKE_GROUPS through its select and B not: a difference that is no part of
    the change A -> B, bisected as a candidate. Both reductions keep the configurations'
    common value of it, so the kernels measured differ only where A and B do."""
    monkeypatch.setattr(reduce, "DISTRIBUTION_OPTIONS", 20)
    a, b = lab.tmp / "vendor.config", lab.tmp / "tuned.config"
    a.write_text(SHARED + "CONFIG_FAKE_GROUPS=y\nCONFIG_FAKE_AUTOGROUP=y\n")
    b.write_text(SHARED + "CONFIG_FAKE_GROUPS=y\n# CONFIG_FAKE_AUTOGROUP is not set\nCONFIG_FAKE_SLOW=y\n")
    result = why_json(lab, capsys, f"a={a}", f"b={b}")
    reduced = result["reduced"]
    kept = {side: Path(path).read_text() for side, path in reduced["configs"].items()}
    assert all("CONFIG_FAKE_GROUPS=y" in text for text in kept.values()), kept
    assert "CONFIG_FAKE_GROUPS" in reduced["needed"]
    [m] = result["metrics"]
    assert m["option_search"]["candidates"] == 2   # FAKE_AUTOGROUP and FAKE_SLOW, not FAKE_GROUPS
    assert [c["name"] for c in m["culprits"]] == ["CONFIG_FAKE_SLOW=y"]


def test_a_kept_option_that_does_not_hold_brings_what_it_needs(lab, capsys, monkeypatch):
    """Both configurations have security module A built in and as their default, outside
    the reduction's menus; B also has module B (as Debian's config has SELinux beside
    AppArmor, and a tuned one leaves it out). Reduced, B's default would become module B
    and A's none: kept alike on both sides, the default needs module A, which the
    reduction then keeps too, so that both kernels run the default they have."""
    monkeypatch.setattr(reduce, "DISTRIBUTION_OPTIONS", 20)
    a, b = lab.tmp / "tuned.config", lab.tmp / "vendor.config"
    lsm = "CONFIG_FAKE_LSM_A=y\nCONFIG_FAKE_DEFAULT_A=y\n"
    a.write_text(SHARED + lsm + "# CONFIG_FAKE_LSM_B is not set\n")
    b.write_text(SHARED + lsm + "CONFIG_FAKE_LSM_B=y\nCONFIG_FAKE_SLOW=y\n")
    result = why_json(lab, capsys, f"a={a}", f"b={b}")
    reduced = result["reduced"]
    kept = {side: Path(path).read_text() for side, path in reduced["configs"].items()}
    assert all("CONFIG_FAKE_DEFAULT_A=y" in text and "CONFIG_FAKE_LSM_A=y" in text for text in kept.values()), kept
    assert {"CONFIG_FAKE_LSM_A", "CONFIG_FAKE_DEFAULT_A"} <= set(reduced["needed"])
    [m] = result["metrics"]
    assert m["option_search"]["candidates"] == 2   # FAKE_LSM_B and FAKE_SLOW, not the default
    assert [c["name"] for c in m["culprits"]] == ["CONFIG_FAKE_SLOW=y"]
