import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernellab.config.dotconfig import effective, format_config, parse_config, parse_line, parse_settings
from kernellab.errors import LabError


def test_parses_values_and_not_set():
    text = '''
# Automatically generated file; DO NOT EDIT.
CONFIG_64BIT=y
CONFIG_MODULES=m
# CONFIG_SMP is not set
CONFIG_HZ=250
CONFIG_PHYSICAL_START=0x1000000
CONFIG_CMDLINE="console=ttyS0 quiet"
CONFIG_EMPTY=""
'''
    cfg = parse_config(text, "t")
    assert cfg == {"CONFIG_64BIT": "y", "CONFIG_MODULES": "m", "CONFIG_SMP": "n", "CONFIG_HZ": "250",
                   "CONFIG_PHYSICAL_START": "0x1000000", "CONFIG_CMDLINE": '"console=ttyS0 quiet"',
                   "CONFIG_EMPTY": '""'}


def test_later_lines_win():
    assert parse_config("CONFIG_A=y\n# CONFIG_A is not set\n", "t") == {"CONFIG_A": "n"}


def test_malformed_line_names_file_and_line():
    with pytest.raises(LabError, match=r"frag.config:3: expected CONFIG_NAME=value"):
        parse_settings("CONFIG_A=y\n\nCONFIG_B y\n", "frag.config")


def test_bad_value_is_reported():
    with pytest.raises(LabError, match=r"f:1: bad value for CONFIG_A"):
        parse_settings("CONFIG_A=yes please\n", "f")
    with pytest.raises(LabError, match="bad value"):
        parse_settings('CONFIG_S="unterminated\n', "f")


def test_format_round_trips():
    cfg = {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": '"x y"', "CONFIG_D": "-3"}
    assert parse_config(format_config(cfg), "t") == cfg
    assert "# CONFIG_B is not set" in format_config(cfg)


def test_effective_treats_missing_bool_as_n():
    assert effective({}, "CONFIG_X", "y") == "n"
    assert effective({}, "CONFIG_S", '"abc"') is None
    assert effective({"CONFIG_X": "m"}, "CONFIG_X", "y") == "m"


def test_comments_and_blank_lines_ignored():
    assert parse_line("   ", "t") is None
    assert parse_line("# just a comment", "t") is None
    assert parse_line("# CONFIG_FOO is not set", "t").value == "n"


line_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)


@given(st.lists(line_text, max_size=20))
def test_parser_never_crashes_on_garbage(lines):
    """Anything: either parsed, or a LabError naming the line. Never another exception."""
    try:
        cfg = parse_config("\n".join(lines), "fuzz")
    except LabError as exc:
        assert str(exc).startswith("fuzz:")
    else:
        assert all(k.startswith("CONFIG_") for k in cfg)


names = st.from_regex(r"CONFIG_[A-Z0-9_]{1,20}", fullmatch=True)
values = st.one_of(st.sampled_from(["y", "m", "n"]), st.integers(-10**6, 10**6).map(str),
                   st.text(alphabet="abc xyz=/", max_size=10).map(lambda s: f'"{s}"'))


@given(st.dictionaries(names, values, max_size=15))
def test_round_trip_property(cfg):
    assert parse_config(format_config(cfg), "t") == cfg
