import pytest

from kernellab.errors import LabError
from kernellab.experiments.spec import load_experiment, parse_short


def test_short_syntax_with_name():
    v = parse_short("dbg=lab-minimal+debug-kernel+CONFIG_HZ_1000=y+CONFIG_SMP=n")
    assert (v.name, v.base, v.fragments, v.options) == ("dbg", "lab-minimal", ["debug-kernel"],
                                                         ["CONFIG_HZ_1000=y", "CONFIG_SMP=n"])


def test_short_syntax_without_name():
    v = parse_short("lab-minimal+CONFIG_X=y")
    assert v.name == "lab-minimal+CONFIG_X=y" and v.base == "lab-minimal" and v.options == ["CONFIG_X=y"]
    assert parse_short("defconfig").base == "defconfig"


def test_inline_settings_become_settings():
    settings = parse_short("v=tinyconfig+CONFIG_A=y+CONFIG_B=n").settings()
    assert [(s.name, s.value) for s in settings] == [("CONFIG_A", "y"), ("CONFIG_B", "n")]


def test_fragment_file_and_packaged_fragment(tmp_path):
    frag = tmp_path / "f.config"
    frag.write_text("CONFIG_A=y\n# CONFIG_B is not set\n")
    settings = parse_short(f"v=tinyconfig+{frag}+debug-kernel").settings()
    assert settings[0].origin == f"{frag}:1"
    assert any(s.name == "CONFIG_PROVE_LOCKING" for s in settings)


def test_malformed_fragment_line_says_file_line(tmp_path):
    frag = tmp_path / "bad.config"
    frag.write_text("CONFIG_A=y\nCONFIG_B is on\n")
    with pytest.raises(LabError, match=r"bad.config:2:"):
        parse_short(f"v=tinyconfig+{frag}").settings()


def test_bad_inline_option():
    with pytest.raises(LabError, match="option 1"):
        parse_short("v=tinyconfig+CONFIG_A=maybe").settings()


def test_missing_fragment():
    with pytest.raises(LabError, match="not found"):
        parse_short("v=tinyconfig+no-such-fragment").settings()


def test_empty_part():
    with pytest.raises(LabError, match="bad variant"):
        parse_short("v=tinyconfig++CONFIG_A=y")


def test_default_experiment_is_debug_cost():
    exp = load_experiment(None)
    assert [v.name for v in exp.variants] == ["lab-minimal", "debug"]
    assert exp.variants[1].fragments == ["debug-kernel"] and exp.mode == "icount"


@pytest.mark.parametrize("text, error", [
    ("[[variant]]\nname = 'x'\n", r"variant #1: missing key 'base'$"),
    ("not toml [", "not valid TOML"),
    # A typo must not compare a kernel with itself: every unknown key is refused.
    ("[[variant]]\nname = 'a'\nbase = 'lab-minimal'\noptoins = ['CONFIG_HZ_1000=y']\n",
     r"variant #1: unknown key 'optoins' "
     r"\(allowed: arch, base, boot_args, devices, fragments, fs, name, options, source, sysctls, toolchain, vcpus\)$"),
    ("mdoe = 'wall'\n[[variant]]\nname = 'a'\nbase = 'lab-minimal'\n",
     r"e.toml: unknown key 'mdoe' \(allowed: arch, cold_builds, description, mode, name, runs, source, toolchain, "
     r"variant, with, workloads\)$"),
    ("mode = 'cycles'\n[[variant]]\nname = 'a'\nbase = 'lab-minimal'\n",
     r"unknown mode 'cycles' \(modes: icount, wall\)$"),
    ("runs = '3'\n[[variant]]\nname = 'a'\nbase = 'lab-minimal'\n",
     r"e.toml: runs: expected an integer, got a string '3'$"),
    ("runs = 0\n[[variant]]\nname = 'a'\nbase = 'lab-minimal'\n", r"runs must be 1 to 1000, got 0$"),
    ("runs = 1001\n[[variant]]\nname = 'a'\nbase = 'lab-minimal'\n", r"runs must be 1 to 1000, got 1001$"),
    ("[[variant]]\nname = 'a'\nbase = 'lab-minimal'\noptions = 'CONFIG_X=y'\n",
     r"variant #1: options: expected a list"),
    ("[[variant]]\nname = 'a'\nbase = 'lab-minimal'\nsysctls = { 'vm.swappiness' = 10 }\n",
     r"variant #1: sysctls.vm.swappiness: expected a string, got an integer 10$"),
    ("name = 'empty'\n", r"missing key 'variant'$"),
])
def test_experiment_file_errors_are_one_line_naming_file_and_key(tmp_path, text, error):
    bad = tmp_path / "e.toml"
    bad.write_text(text)
    with pytest.raises(LabError, match=error) as err:
        load_experiment(bad)
    assert str(err.value).startswith(f"experiment {bad}") or "not valid TOML" in str(err.value)
    assert "\n" not in str(err.value)


def test_boot_parameters_and_sysctls_in_a_file_and_on_the_command_line(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text("[[variant]]\nname = 'a'\nbase = 'lab-minimal'\n"
                    "[[variant]]\nname = 'b'\nbase = 'lab-minimal'\nboot_args = ['mitigations=off']\n"
                    "sysctls = { 'kernel.randomize_va_space' = '0' }\n")
    b = load_experiment(path).variants[1]
    short = parse_short("b=lab-minimal+boot:mitigations=off+sysctl:kernel.randomize_va_space=0")
    assert (b.boot_args, b.sysctls) == (short.boot_args, short.sysctls) == (
        ["mitigations=off"], {"kernel.randomize_va_space": "0"})
    assert short.boot_words() == ["mitigations=off", "sysctl.kernel.randomize_va_space=0"]
    assert short.to_dict()["boot_args"] == ["mitigations=off"]


@pytest.mark.parametrize("text, error", [
    ("x=lab-minimal+boot:", "bad boot parameter ''"),
    ("x=lab-minimal+boot:KL_ONLY=syscall.null", "KL_\\* words are the agent's own"),
    ("x=lab-minimal+sysctl:vm.swappiness", "needs KEY=VALUE"),
    ("x=lab-minimal+sysctl:VM SWAP=1", "bad sysctl"),
])
def test_bad_boot_parameters_and_sysctls(text, error):
    with pytest.raises(LabError, match=error):
        parse_short(text)


def test_the_example_experiments_load():
    from pathlib import Path
    examples = sorted((Path(__file__).parent.parent / "examples").glob("*.toml"))
    assert examples
    for path in examples:
        experiment = load_experiment(path)
        assert len(experiment.variants) >= 2, path
    cross = load_experiment(examples[[p.name for p in examples].index("i386-vs-x86_64.toml")])
    assert [v.arch for v in cross.variants] == ["x86_64", "i386"]


def test_cold_builds_are_asked_in_the_file_and_refused_on_a_cluster(tmp_path):
    """Builds timed on several workers at once compare machines, not kernels."""
    from kernellab.experiments import executor
    path = tmp_path / "e.toml"
    path.write_text('cold_builds = true\n[[variant]]\nname = "a"\nbase = "tinyconfig"\n')
    exp = load_experiment(str(path))
    assert exp.cold_builds
    with pytest.raises(LabError, match="times cold builds, which must all run on one machine: run it without"):
        executor.run_experiment(exp, store=None, how=None, cluster=None)
