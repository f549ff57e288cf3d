"""`kernellab config explain` and `config diff`: the logic on a small Kconfig tree, the
command line end to end on Debian's 6.1 tree."""

import json
import lzma
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernellab import arches, sources, toolchain
from kernellab.config import diff, explain, planner
from kernellab.config.resolve import resolve
from kernellab.errors import LabError
from kernellab.report import configdiff, explanation
from test_kconfig import tiny_tree

TREE = """
    mainmenu "commands test tree"

    config MODULES
    	bool "Enable loadable module support"
    	modules

    menu "General setup"
    config EXPERT
    	bool "Configure standard kernel features (expert users)"
    	select DEBUG_KERNEL
    choice
    	prompt "Preemption Model"
    	default PREEMPT_VOLUNTARY
    config PREEMPT_NONE
    	bool "No Forced Preemption (Server)"
    config PREEMPT_VOLUNTARY
    	bool "Voluntary Kernel Preemption (Desktop)"
    config PREEMPT
    	bool "Preemptible Kernel (Low-Latency Desktop)"
    endchoice
    config HZ
    	int "Timer frequency"
    	default 250
    endmenu

    config HAVE_ARCH_THING
    	bool

    config ARCH_THING
    	bool "An arch feature"
    	depends on HAVE_ARCH_THING

    menu "Kernel hacking"
    config DEBUG_KERNEL
    	bool "Kernel debugging"
    config LOCK_DEBUGGING_SUPPORT
    	def_bool y
    config PROVE_LOCKING
    	bool "Lock debugging: prove locking correctness"
    	depends on DEBUG_KERNEL && LOCK_DEBUGGING_SUPPORT
    	select LOCKDEP
    	help
    	  Prove locking correctness.
    config LOCKDEP
    	bool
    endmenu

    menu "Device Drivers"
    config BLOCK
    	bool "Enable the block layer"
    config SCSI
    	tristate "SCSI device support"
    	depends on BLOCK
    config USB_SUPPORT
    	bool "USB support"
    config USB
    	tristate "Support for Host-side USB"
    	depends on USB_SUPPORT
    config USB_STORAGE
    	tristate "USB Mass Storage support"
    	depends on SCSI && USB
    config ARM_ONLY_DRIVER
    	tristate "A driver for arm64 boards"
    	depends on ARM64
    endmenu
    """


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return tiny_tree(tmp_path_factory.mktemp("tree"), TREE)


def load(tree, tmp_path, text, name="c.config"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    tree.load(path)
    return path


# --- explain ----------------------------------------------------------------------------------

def test_unmet_dependency_and_what_setting_it_takes(tree, tmp_path):
    load(tree, tmp_path, "# CONFIG_DEBUG_KERNEL is not set\n")
    e = explain.explain(tree, "PROVE_LOCKING")
    assert (e.option, e.value, e.type, e.menu) == ("CONFIG_PROVE_LOCKING", "n", "bool", "Kernel hacking")
    assert [(t.text, t.value) for t in e.depends_on] == [("DEBUG_KERNEL", "n"), ("LOCK_DEBUGGING_SUPPORT", "y")]
    assert [t.text for t in e.selects] == ["LOCKDEP"]
    assert [s.line() for s in e.to_y.settings()] == ["CONFIG_DEBUG_KERNEL=y", "CONFIG_PROVE_LOCKING=y"]
    assert e.locations[0].startswith("Kconfig:") and e.help == "Prove locking correctness."
    text = explanation.render(e)
    assert "to set it to y:\n  DEBUG_KERNEL=y" in text and "now n" in text


def test_prefix_is_optional_and_unknown_names_suggest(tree, tmp_path):
    load(tree, tmp_path, "")
    assert explain.explain(tree, "CONFIG_HZ").option == explain.explain(tree, "HZ").option == "CONFIG_HZ"
    with pytest.raises(LabError, match="CONFIG_PROVE_LOCKNG does not exist .*did you mean CONFIG_PROVE_LOCKING"):
        explain.explain(tree, "PROVE_LOCKNG")


def test_selected_by_with_the_selectors_values(tree, tmp_path):
    load(tree, tmp_path, "CONFIG_EXPERT=y\nCONFIG_PROVE_LOCKING=y\n")
    e = explain.explain(tree, "LOCKDEP")
    assert e.prompt is None and e.value == "y"
    assert [(t.text, t.value) for t in e.selected_by] == [
        ("PROVE_LOCKING && DEBUG_KERNEL && LOCK_DEBUGGING_SUPPORT", "y")]
    assert [(t.text, t.value) for t in explain.explain(tree, "DEBUG_KERNEL").selected_by] == [("EXPERT", "y")]


def test_needs_are_a_tree_down_to_what_can_be_set(tree, tmp_path):
    load(tree, tmp_path, "")
    need = explain.explain(tree, "USB_STORAGE").to_y
    assert [n.text for n in need.needs] == ["SCSI=y", "USB=y"]
    assert [n.text for n in need.needs[0].needs] == ["BLOCK=y"]
    assert [s.line() for s in need.settings()] == [
        "CONFIG_BLOCK=y", "CONFIG_SCSI=y", "CONFIG_USB_SUPPORT=y", "CONFIG_USB=y", "CONFIG_USB_STORAGE=y"]
    assert json.dumps(explain.explain(tree, "USB_STORAGE").to_dict())


def test_explanation_text(tree, tmp_path):
    path = load(tree, tmp_path, "")
    assert explanation.render(explain.explain(tree, "USB_STORAGE")) == textwrap.dedent(f"""\
        CONFIG_USB_STORAGE=n    [tristate, in {path}]
          "USB Mass Storage support"
          menu: Device Drivers > USB support > Support for Host-side USB
          defined at Kconfig:60
        depends on:
          SCSI                                                         = n
          USB                                                          = n
        to set it to y:
          SCSI=y                                     now n
            BLOCK=y                                  now n
          USB=y                                      now n
            USB_SUPPORT=y                            now n
        """)


def test_module_value_needs_modules(tree, tmp_path):
    load(tree, tmp_path, "CONFIG_BLOCK=y\nCONFIG_SCSI=y\nCONFIG_USB_SUPPORT=y\nCONFIG_USB=y\n")
    need = planner.plan(tree, tree.symbol("USB_STORAGE"), "m")
    assert [s.line() for s in need.settings()] == ["CONFIG_MODULES=y", "CONFIG_USB_STORAGE=m"]


@pytest.mark.parametrize("option, reason", [
    ("ARM_ONLY_DRIVER", "ARM64 is not defined for x86_64 in Linux 6.99.0"),
    ("ARCH_THING", "HAVE_ARCH_THING has no prompt and nothing selects it for x86_64"),
])
def test_what_cannot_be_met_says_why(tree, tmp_path, option, reason):
    load(tree, tmp_path, "")
    e = explain.explain(tree, option)
    assert e.to_y.reason() == reason and e.to_y.settings() is None
    assert f"not possible in this tree: {reason}" in explanation.render(e)


def test_turning_off_a_choice_member_is_the_users_call(tree, tmp_path):
    load(tree, tmp_path, "CONFIG_PREEMPT_VOLUNTARY=y\n")
    need = planner.plan(tree, tree.symbol("PREEMPT_VOLUNTARY"), "n")
    assert need.manual and need.settings() is None
    assert "select another option of the choice 'Preemption Model': PREEMPT_NONE, PREEMPT" in need.text
    assert [s.line() for s in planner.plan(tree, tree.symbol("PREEMPT"), "y").settings()] == ["CONFIG_PREEMPT=y"]


# --- diff -------------------------------------------------------------------------------------

def test_categories_symbol_patterns_beat_menus():
    cats = diff.load_categories()
    assert {c.name for c in cats} >= {"debugging", "preemption and timers", "memory management",
                                      "security hardening", "scheduler", "block and file systems",
                                      "networking", "drivers", "size"}
    assert diff.categorize("SLUB_DEBUG", ["Memory Management options"], cats) == "debugging"
    assert diff.categorize("TRANSPARENT_HUGEPAGE", ["Memory Management options"], cats) == "memory management"
    assert diff.categorize("E1000", ["Device Drivers", "Network device support"], cats) == "drivers"
    assert diff.categorize("LOCK_TORTURE_TEST", ["Kernel hacking", "Kernel Testing and Coverage"], cats) == "debugging"
    assert diff.categorize("CRYPTO_AES", ["Cryptographic API", "Block ciphers"], cats) == diff.OTHER


@pytest.mark.parametrize("table, message", [
    ('name = "debugging"\nsymbol = ["DEBUG_*"]\nmenus = []\n',
     "categories.toml: category #1: unknown key 'symbol' (allowed: menus, name, symbols)"),
    ('name = "debugging"\nsymbols = "DEBUG_*"\nmenus = []\n',
     "categories.toml: category #1: symbols: expected a list, got a string 'DEBUG_*'"),
    ('name = "debugging"\nsymbols = ["DEBUG_*", 7]\nmenus = []\n',
     "categories.toml: category #1: symbols #2: expected a string, got an integer 7"),
    ('name = "debugging"\nsymbols = ["DEBUG_*"]\n', "categories.toml: category #1: missing key 'menus'"),
])
def test_a_bad_categories_file_is_one_line_naming_the_key(tmp_path, table, message):
    path = tmp_path / "categories.toml"
    path.write_text(f"[[category]]\n{table}")
    with pytest.raises(LabError) as exc:
        diff.load_categories(path)
    assert str(exc.value) == message


def test_a_categories_file_loads_in_order(tmp_path):
    path = tmp_path / "categories.toml"
    path.write_text('[[category]]\nname = "a"\nsymbols = ["X_*"]\nmenus = []\n'
                    '[[category]]\nname = "b"\nsymbols = []\nmenus = ["Menu B"]\n')
    cats = diff.load_categories(path)
    assert [c.name for c in cats] == ["a", "b"]
    assert diff.categorize("X_ONE", ["Menu B"], cats) == "a"
    assert diff.categorize("Y", ["Menu B", "Inner"], cats) == "b"
    assert diff.categorize("Y", ["Elsewhere"], cats) == diff.OTHER


def test_diff_groups_by_menu_with_category_and_kind(tree, tmp_path):
    a = tmp_path / "a.config"
    a.write_text("CONFIG_BLOCK=y\nCONFIG_SCSI=y\nCONFIG_DEBUG_KERNEL=y\nCONFIG_PROVE_LOCKING=y\nCONFIG_HZ=1000\n")
    b = tmp_path / "b.config"
    b.write_text("CONFIG_PREEMPT=y\nCONFIG_HZ=250\n# CONFIG_STALE_OPTION is not set\n")
    d, warnings = diff.diff(tree, diff.ConfigArg(str(a)), diff.ConfigArg(str(b)))
    assert len(warnings) == 1 and "CONFIG_STALE_OPTION" in warnings[0]
    rows = {c.option: (c.a, c.b, c.kind, c.category, c.menu) for c in d.changes}
    assert rows == {
        "CONFIG_PREEMPT_VOLUNTARY": ("y", "n", "changed", "preemption and timers", "General setup > Preemption Model"),
        "CONFIG_PREEMPT": ("n", "y", "changed", "preemption and timers", "General setup > Preemption Model"),
        "CONFIG_HZ": ("1000", "250", "changed", "preemption and timers", "General setup"),
        "CONFIG_DEBUG_KERNEL": ("y", "n", "changed", "debugging", "Kernel hacking"),
        # B has no DEBUG_KERNEL, so no PROVE_LOCKING at all; SCSI sits under BLOCK, which
        # it depends on, as in menuconfig.
        "CONFIG_PROVE_LOCKING": ("y", None, "only in A", "debugging", "Kernel hacking"),
        "CONFIG_BLOCK": ("y", "n", "changed", "block and file systems", "Device Drivers"),
        "CONFIG_SCSI": ("y", None, "only in A", "block and file systems",
                        "Device Drivers > Enable the block layer"),
    }
    assert d.hidden == 1                                      # LOCKDEP, selected, no prompt
    everything, _ = diff.diff(tree, diff.ConfigArg(str(a)), diff.ConfigArg(str(b)), derived=True)
    assert "CONFIG_LOCKDEP" in {c.option for c in everything.changes}
    assert d.summary()["debugging"] == {"changed": 1, "only in A": 1}
    legend = ("Linux 6.99.0 x86_64, both as olddefconfig resolves them; "
              "'-' marks an option a config does not have (its dependencies are unmet)")
    assert configdiff.render_table(d) == textwrap.dedent(f"""\
        A: {a}
        B: {b}
        {legend}

        General setup > Preemption Model
          CONFIG_PREEMPT_VOLUNTARY     y -> n     preemption and timers   Voluntary Kernel Preemption (Desktop)
          CONFIG_PREEMPT               n -> y     preemption and timers   Preemptible Kernel (Low-Latency Desktop)

        General setup
          CONFIG_HZ                 1000 -> 250   preemption and timers   Timer frequency

        Kernel hacking
          CONFIG_DEBUG_KERNEL          y -> n     debugging               Kernel debugging
          CONFIG_PROVE_LOCKING         y -> -     debugging               Lock debugging: prove locking correctness

        Device Drivers
          CONFIG_BLOCK                 y -> n     block and file systems  Enable the block layer

        Device Drivers > Enable the block layer
          CONFIG_SCSI                  y -> -     block and file systems  SCSI device support

        category                  changed  only in A  only in B      all
        block and file systems          1          1          0        2
        debugging                       1          1          0        2
        preemption and timers           3          0          0        3
        total                           5          2          0        7
        1 more options without a prompt differ as a consequence (--all shows them)
        """)
    assert json.loads(json.dumps(d.to_dict()))["summary"]["block and file systems"] == {"changed": 1, "only in A": 1}


def test_identical_configs_have_no_difference(tree, tmp_path):
    a = tmp_path / "a.config"
    a.write_text("CONFIG_HZ=250\n")
    d, _ = diff.diff(tree, diff.ConfigArg(str(a)), diff.ConfigArg(str(a)))
    assert d.changes == [] and configdiff.render_table(d) == (
        f"no differences between {a} and {a} (Linux 6.99.0 x86_64, as olddefconfig resolves them)\n")


# --- the command line on Debian's 6.1 tree ----------------------------------------------------

def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kernellab.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def tinyconfig(tmp_path_factory):
    source = sources.resolve("debian:6.1")
    profile = arches.load("x86_64")
    path = tmp_path_factory.mktemp("configs") / "tiny.config"
    path.write_text(resolve(source, profile, toolchain.detect(profile), "tinyconfig", []).text)
    return path


@pytest.mark.integration
def test_cli_explain_unmet_dependencies(tinyconfig):
    r = cli("config", "explain", "CONFIG_USB_STORAGE", "--config", str(tinyconfig))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("CONFIG_USB_STORAGE=n    [tristate, in ")
    assert "defined at drivers/usb/storage/Kconfig:9" in r.stdout
    assert "to set it to y:\n" in r.stdout and "  SCSI=y" in r.stdout and "  USB=y" in r.stdout


@pytest.mark.integration
def test_cli_errors_are_one_line(tinyconfig, tmp_path):
    bad = tmp_path / "bad.config"
    bad.write_text("CONFIG_64BIT=y\nCONFIG_SMP yes\n")
    arm = tmp_path / "arm.config"
    arm.write_text("CONFIG_ARM64=y\nCONFIG_64BIT=y\n")
    cases = [
        (("config", "explain", "NO_SUCH_OPTION"), "CONFIG_NO_SUCH_OPTION does not exist in Linux 6.1"),
        (("config", "explain", "ARM64_SVE", "--config", str(tinyconfig)), "CONFIG_ARM64_SVE is arch-specific"),
        (("config", "diff", str(bad), str(tinyconfig)), f"{bad}:2: expected CONFIG_NAME=value"),
        (("audit", str(arm), "--profile", "latency"), f"{arm} is a config for arm64"),
        (("config", "diff", str(tmp_path / "missing.config"), str(tinyconfig)), "missing.config': no such file"),
    ]
    for args, message in cases:
        r = cli(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("kernellab: error: ") and r.stderr.count("\n") == 1, r.stderr
        assert message in r.stderr


@pytest.mark.integration
def test_cli_diff_json_and_stale_option_warning(tinyconfig, tmp_path):
    old = tmp_path / "old.config"
    old.write_text(tinyconfig.read_text() + "CONFIG_PRINTK=y\nCONFIG_IKNOWN_STALE=y\n")
    r = cli("config", "diff", str(tinyconfig), str(old), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("kernellab: warning: ") and "CONFIG_IKNOWN_STALE" in r.stderr
    d = json.loads(r.stdout)
    change = next(c for c in d["changes"] if c["option"] == "CONFIG_PRINTK")
    assert change == {"option": "CONFIG_PRINTK", "a": "n", "b": "y", "kind": "changed",
                      "prompt": "Enable support for printk",
                      "menu": "General setup > Configure standard kernel features (expert users)",
                      "category": "size"}


@pytest.mark.integration
def test_every_command_reading_a_config_reports_what_the_tree_cannot_hold(tinyconfig, tmp_path):
    """Debian's 6.1 real-time config on the 6.1 source (PREEMPT_RT needs the RT patch's
    ARCH_SUPPORTS_RT there): audit, config diff and config explain say what olddefconfig
    would change, with the dependency that decides it, before the answer."""
    rt = tmp_path / "rt.config"
    rt.write_bytes(lzma.decompress(Path("/usr/src/linux-config-6.1/config.amd64_rt_amd64.xz").read_bytes()))
    expected = "CONFIG_PREEMPT_RT=y -> n (depends on EXPERT && ARCH_SUPPORTS_RT && <choice>)"
    for args in (("audit", str(rt), "--profile", "latency"), ("config", "diff", str(tinyconfig), str(rt)),
                 ("config", "explain", "PREEMPT_RT", "--config", str(rt))):
        r = cli(*args)
        assert r.returncode == 0, (args, r.stderr)
        [line] = [w for w in r.stderr.splitlines() if "cannot hold" in w]
        assert line.startswith(f"kernellab: warning: {rt}: ") and expected in line, (args, line)
        assert "CC_VERSION_TEXT" not in line   # derived from the build host, not the user's choice


@pytest.mark.integration
def test_the_debian_reduced_base_is_debians_kernel_wide_choices_without_its_drivers():
    source = sources.resolve("debian:6.1")
    profile = arches.load("x86_64")
    tc = toolchain.detect(profile)
    reduced = resolve(source, profile, tc, "debian-reduced", [])
    debian = resolve(source, profile, tc, "debian", []).values
    lean = resolve(source, profile, tc, "lab-minimal", []).values
    for option in ("CONFIG_RETPOLINE", "CONFIG_PAGE_TABLE_ISOLATION", "CONFIG_HARDENED_USERCOPY",
                   "CONFIG_INIT_ON_ALLOC_DEFAULT_ON", "CONFIG_STACKPROTECTOR_STRONG"):
        assert reduced.values.get(option) == debian[option] == "y" and lean.get(option, "n") == "n", option
    # None of Debian's thousands of modules, and no debug info: lab kernel builds.
    assert debian["CONFIG_E1000"] == "m" and "CONFIG_E1000" not in reduced.values
    assert reduced.values["CONFIG_MODULES"] == "n" and reduced.values["CONFIG_DEBUG_INFO_NONE"] == "y"
    # What the lean kernel cannot hold is reported as any variant's dropped option, with where it came from.
    dropped = {d["option"]: d for d in reduced.dropped}
    assert dropped["CONFIG_ELF_CORE"]["origin"] == "Debian's x86_64 config, reduced onto lab-minimal"
    assert 10 < len(dropped) < 40
