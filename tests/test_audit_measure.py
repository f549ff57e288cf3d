"""audit --measure on the fake lab: every recommendation group built and booted, each rule
shown the effect measured on its metric, and what could not be measured said with why."""

import json

import markupsafe
import pytest

# DEBUG_LIST costs 1% on syscall.null in the fake QEMU; CC_OPTIMIZE_FOR_SIZE, HZ_1000 and
# KERNEL_XZ each draw a recommendation of another kind.
CONFIG = ("CONFIG_DEBUG_KERNEL=y\nCONFIG_DEBUG_LIST=y\nCONFIG_DEBUG_SPINLOCK=y\nCONFIG_HZ_1000=y\n"
          "CONFIG_KERNEL_XZ=y\nCONFIG_CC_OPTIMIZE_FOR_SIZE=y\n")


def measure(lab, capsys, config, *extra):
    assert lab.main("audit", str(config), "--profile", "throughput-server", "--measure", *extra) == 0
    return capsys.readouterr().out


def test_each_rule_gets_the_effect_measured_on_its_metric(lab, capsys, tmp_path):
    config = tmp_path / "server.config"
    config.write_text(CONFIG)
    m = json.loads(measure(lab, capsys, config, "--format", "json"))["measured"]
    assert m["mode"] == "icount" and m["kernel"] == f"{config} as it resolves"
    assert [g["name"] for g in m["groups"]] == ["all recommendations", "compiler", "debugging", "preemption-timers"]
    assert m["builds"] == 5 and m["boots"] == 5   # the config as it is, and each group

    rules = {r["rule"]: r for r in m["rules"]}
    assert set(rules) == {"cc-optimize-performance", "debug-list", "hz-low-servers-guests-embedded"}
    debug_list = rules["debug-list"]
    assert (debug_list["group"], debug_list["metric"], debug_list["value"]) == ("debugging", "syscall.null", "n")
    # The fake kernel's DEBUG_LIST adds 1% to the null syscall: removing it takes 1/1.01 off.
    assert debug_list["group_effect"]["delta_pct"] == pytest.approx(-100 / 101, abs=0.01)
    assert debug_list["group_effect"]["direction"] == "better"
    assert rules["cc-optimize-performance"]["metric"] == "size.image"
    assert rules["cc-optimize-performance"]["group_effect"]["delta_pct"] > 0   # -O2 is bigger than -Os

    why = {u["rule"]: u["why"] for u in m["unmeasured"]}
    assert why["kernel-compression-fast-boot"].startswith("not built: takes more than assignments")
    assert why["psi"] == "not applicable here: CONFIG_PSI does not exist in Linux 6.1.0-fake"
    assert "gave no ctx.ring2_0k" in why["lock-debug-primitives"]   # the fake agent lacks that metric


def test_the_table_says_how_it_was_measured_and_a_rerun_builds_nothing(lab, capsys, tmp_path):
    config = tmp_path / "server.config"
    config.write_text(CONFIG)
    measure(lab, capsys, config)
    text = measure(lab, capsys, config)
    assert "measured by kernellab: " in text and "icount mode" in text and "1 run(s) per kernel" in text
    [row] = [line for line in text.splitlines() if line.startswith("debug-list ") and "syscall.null" in line]
    assert "-1.0%* better (debugging)" in row
    assert "cost: 0 build(s), 0 boot(s)" in text
    html = measure(lab, capsys, config, "--format", "html")
    assert "Measured by kernellab" in html and "-1.0%* better (debugging)" in html


def test_a_change_made_at_boot_is_measured_on_the_same_kernel_booted_with_its_parameter(lab, capsys, tmp_path,
                                                                                       monkeypatch):
    import dataclasses

    from kernellab import cli
    from kernellab.knowledge import Switch, rules_for
    shipped = rules_for("throughput-server")
    # As if this kernel could turn its list debugging off at boot.
    at_boot = [dataclasses.replace(r, switch=Switch((("CONFIG_DEBUG_KERNEL", "y"),), "list_debug=off"))
               if r.id == "debug-list" else r for r in shipped]
    monkeypatch.setattr(cli, "rules_for", lambda profile: at_boot)
    config = tmp_path / "server.config"
    config.write_text(CONFIG)
    m = json.loads(measure(lab, capsys, config, "--format", "json"))["measured"]
    boot = next(g for g in m["groups"] if g["name"] == "boot list_debug=off")
    assert boot["settings"] == {} and boot["built"] is False    # the kernel as configured, booted again
    assert "CONFIG_DEBUG_LIST" not in next(g for g in m["groups"] if g["name"] == "debugging")["settings"]
    rule = next(r for r in m["rules"] if r["rule"] == "debug-list")
    assert rule["group"] == "boot list_debug=off" and rule["all_effect"] is None
    assert m["builds"] == 5 and m["boots"] == 6   # as configured, all and three categories; + the boot


@pytest.mark.parametrize(("flaws", "said"), [
    (("meltdown",), "inactive on the emulated CPU (the kernel reported the CPU not affected by meltdown): "
                    "this is not the mitigation's cost"),
    (("meltdown", "spectre_v2"), "partly inactive on the emulated CPU (the kernel reported the CPU not "
                                 "affected by meltdown): only the rest of it was measured"),
    (("spectre_v2",), None)])
def test_a_mitigation_the_kernel_never_ran_is_called_inactive_not_free(lab, capsys, tmp_path, monkeypatch,
                                                                      flaws, said):
    import dataclasses

    from kernellab import cli
    from kernellab.knowledge import rules_for
    shipped = rules_for("throughput-server")
    # As if DEBUG_LIST mitigated these flaws; the fake QEMU's CPU is not affected by Meltdown.
    monkeypatch.setattr(cli, "rules_for", lambda profile: [dataclasses.replace(r, flaws=flaws)
                                                           if r.id == "debug-list" else r for r in shipped])
    config = tmp_path / "server.config"
    config.write_text(CONFIG)
    text = measure(lab, capsys, config)
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("debug-list ") and "syscall.null" in line)
    if said is None:
        assert "inactive" not in text
    else:
        assert lines[row + 1].strip() == said
        assert str(markupsafe.escape(said)) in measure(lab, capsys, config, "--format", "html")


def test_an_exact_change_within_the_noise_floor_is_not_called_an_effect(lab, capsys, tmp_path):
    from kernellab.experiments import floor
    from kernellab.experiments import lab as lab_stage
    from kernellab.experiments.spec import VariantSpec
    config = tmp_path / "server.config"
    config.write_text(CONFIG)
    measured = lab_stage.prepare(VariantSpec("as-configured", str(config), source=str(lab.tree)))
    floor.save(measured, floor.Floor(str(config), "icount", {"syscall.null": 2.0}, {"syscall.null": "CONFIG_X"},
                                     [], "8 neutral options flipped (a test's)"))
    assert "/" not in floor.key(measured)     # a .config by path keys its floor by name and content
    text = measure(lab, capsys, config)
    assert "noise floor: " in text and "8 neutral options flipped (a test's)" in text
    [row] = [line for line in text.splitlines() if line.startswith("debug-list ") and "syscall.null" in line]
    assert "within floor (-1.0%, floor 2.0%) (debugging)" in row
