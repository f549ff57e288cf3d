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


def test_experiment_file_errors(tmp_path):
    bad = tmp_path / "e.toml"
    bad.write_text("[[variant]]\nname = 'x'\n")
    with pytest.raises(LabError, match="needs a name and a base"):
        load_experiment(bad)
    bad.write_text("not toml [")
    with pytest.raises(LabError, match="not valid TOML"):
        load_experiment(bad)


def test_the_example_experiments_load():
    from pathlib import Path
    examples = sorted((Path(__file__).parent.parent / "examples").glob("*.toml"))
    assert examples
    for path in examples:
        experiment = load_experiment(path)
        assert len(experiment.variants) >= 2, path
    cross = load_experiment(examples[[p.name for p in examples].index("i386-vs-x86_64.toml")])
    assert [v.arch for v in cross.variants] == ["x86_64", "i386"]
