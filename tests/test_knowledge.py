"""The audit rule base: shipped data is valid and well spread, and the loader rejects bad files."""

import glob
import os
import re
from pathlib import Path

import pytest

from kernellab.errors import LabError
from kernellab.knowledge import CATEGORIES, PROFILES, Rule, default_dir, load_rules, rules_for
from kernellab.metrics.catalog import catalog

# --- the shipped rule base -------------------------------------------------------------------

def test_shipped_rules_load_every_rule_of_every_file():
    import tomllib
    from collections import Counter

    from kernellab.knowledge import default_dir
    rules = load_rules()
    assert all(isinstance(r, Rule) for r in rules)
    in_files = {p.stem: len(tomllib.loads(p.read_text())["rule"]) for p in default_dir().glob("*.toml")}
    assert Counter(r.category for r in rules) == in_files


def test_at_least_60_rules():
    assert len(load_rules()) >= 60


def test_every_category_has_rules_and_one_file_each():
    rules = load_rules()
    for category in CATEGORIES:
        assert any(r.category == category for r in rules), category
    assert sorted(p.stem for p in default_dir().glob("*.toml")) == sorted(CATEGORIES)


def test_every_rule_has_evidence_with_a_figure():
    for r in load_rules():
        assert r.evidence, r.id
        for e in r.evidence:
            assert e.figure.strip() and e.source.strip(), r.id
            assert e.verified in (True, False), f"{r.id}: say whether the figure was checked"
            if e.verified is False:
                assert e.note.strip(), r.id


def test_every_profile_covered_by_30_rules():
    for profile in PROFILES:
        assert len(rules_for(profile)) >= 30, profile


def test_rules_are_resolved_for_every_profile():
    for r in load_rules():
        assert set(r.expect) == set(PROFILES)
        for profile in PROFILES:
            table = r.expected_for(profile)
            assert table is None or (table and all(v for v in table.values()))


def test_metrics_are_in_the_catalog():
    names = set(catalog())
    for r in load_rules():
        assert r.metric == "" or r.metric in names, r.id


def test_all_applies_unless_a_profile_overrides():
    by_id = {r.id: r for r in load_rules()}
    ubsan = by_id["ubsan"]
    assert ubsan.expected_for("throughput-server") is None
    assert ubsan.expected_for("latency") == {"CONFIG_UBSAN": ("n",)}
    hz = by_id["hz-low-servers-guests-embedded"]
    assert hz.expected_for("latency") is None
    assert hz.expected_for("virtual-guest") == {"CONFIG_HZ": ("100", "250")}


def test_unknown_profile_is_an_error():
    with pytest.raises(LabError):
        rules_for("gaming")
    with pytest.raises(LabError):
        load_rules()[0].expected_for("gaming")


# --- options exist in the kernel tree and values fit their type -------------------------------

def _source_tree():
    root = os.environ.get("KERNELLAB_CACHE", os.path.expanduser("~/.cache/kernellab"))
    hits = sorted(glob.glob(os.path.join(root, "sources", "linux-source-6.1-*", "linux-source-6.1")))
    return Path(hits[-1]) if hits else None


_CONFIG = re.compile(r"^\s*(?:menu)?config\s+([A-Za-z0-9_]+)\s*$")
_TYPE = re.compile(r"^\s*(bool|tristate|int|hex|string|def_bool|def_tristate)\b")


@pytest.fixture(scope="module")
def kconfig_symbols():
    """{symbol: {types}} for every config/menuconfig entry in the 6.1 tree."""
    tree = _source_tree()
    if tree is None:
        pytest.skip("Linux 6.1 source tree not found under ~/.cache/kernellab/sources")
    symbols: dict[str, set[str]] = {}
    for path in tree.rglob("Kconfig*"):
        if not path.is_file():
            continue
        current = None
        for line in path.read_text(errors="replace").splitlines():
            m = _CONFIG.match(line)
            if m:
                current = m.group(1)
                symbols.setdefault(current, set())
                continue
            t = _TYPE.match(line)
            if t and current:
                kind = t.group(1).replace("def_", "")
                symbols[current].add(kind)
                current = None
    return symbols


def _six_twelve_only(rule: Rule, option: str) -> bool:
    """The rationale must say the option is 6.12-only and name it."""
    bare = option.removeprefix("CONFIG_")
    return "6.12-only" in rule.rationale and re.search(rf"\b(CONFIG_)?{bare}\b", rule.rationale)


def test_every_option_exists_in_6_1_or_is_marked_6_12_only(kconfig_symbols):
    missing = []
    for r in load_rules():
        for option in sorted(r.options()):
            if option.removeprefix("CONFIG_") not in kconfig_symbols and not _six_twelve_only(r, option):
                missing.append(f"{r.id}: {option}")
    assert not missing, missing


def test_values_fit_the_option_type(kconfig_symbols):
    allowed = {"bool": re.compile(r"[yn]"), "tristate": re.compile(r"[ynm]"),
               "int": re.compile(r"-?[0-9]+"), "hex": re.compile(r"0x[0-9a-fA-F]+"),
               "string": re.compile(r'"([^"\\]|\\.)*"')}
    wrong = []
    for r in load_rules():
        for profile in PROFILES:
            for option, values in (r.expected_for(profile) or {}).items():
                types = kconfig_symbols.get(option.removeprefix("CONFIG_"))
                if not types:
                    continue            # 6.12-only, checked above
                for v in values:
                    # An unset option reads as "n" in an audit, whatever its type.
                    if v != "n" and not any(allowed[t].fullmatch(v) for t in types):
                        wrong.append(f"{r.id}/{profile}: {option}={v} ({'/'.join(sorted(types))})")
    assert not wrong, wrong


def test_choice_values_name_their_numeric_option_too(kconfig_symbols):
    """CONFIG_HZ_1000 = y goes together with CONFIG_HZ = 1000."""
    hz = next(r for r in load_rules() if r.id == "hz-1000-latency").expected_for("latency")
    assert hz == {"CONFIG_HZ_1000": ("y",), "CONFIG_HZ": ("1000",)}


# --- validation errors ---------------------------------------------------------------------

GOOD = '''
[[rule]]
id = "{id}"
title = "A rule"
category = "{category}"
expect.all = {{ CONFIG_DEBUG_LIST = "n" }}
rationale = "Because."
metric = "{metric}"
expected_change = "Faster."
[[rule.evidence]]
source = "kconfig:lib/Kconfig.debug"
figure = "2%"
verified = true
'''


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def good(id="a-rule", category="debugging", metric="syscall.null"):
    return GOOD.format(id=id, category=category, metric=metric)


def expect_error(directory: Path, *fragments: str):
    with pytest.raises(LabError) as info:
        load_rules(directory)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_a_good_directory_loads(tmp_path):
    write(tmp_path, "debugging.toml", good())
    write(tmp_path, "size.toml", good(id="other", category="size", metric=""))
    rules = load_rules(tmp_path)
    assert [r.id for r in rules] == ["a-rule", "other"]
    assert rules[0].expected_for("storage") == {"CONFIG_DEBUG_LIST": ("n",)}
    assert rules[0].evidence[0].verified is True and rules[0].evidence[0].note == ""
    assert [r.id for r in rules_for("latency", tmp_path)] == ["a-rule", "other"]


def test_duplicate_ids_across_files(tmp_path):
    write(tmp_path, "debugging.toml", good(id="same"))
    write(tmp_path, "size.toml", good(id="same", category="size"))
    expect_error(tmp_path, "size.toml", "same", "duplicate")


def test_duplicate_ids_in_one_file(tmp_path):
    write(tmp_path, "debugging.toml", good(id="same") + good(id="same"))
    expect_error(tmp_path, "debugging.toml: same: duplicate")


def test_unknown_profile(tmp_path):
    text = good().replace('expect.all = { CONFIG_DEBUG_LIST = "n" }',
                          'expect.all = { CONFIG_DEBUG_LIST = "n" }\nexpect.gaming = "skip"')
    write(tmp_path, "debugging.toml", text)
    expect_error(tmp_path, "debugging.toml: a-rule:", "unknown profile", "gaming")


def test_category_must_equal_file_stem(tmp_path):
    write(tmp_path, "debugging.toml", good(category="size"))
    expect_error(tmp_path, "debugging.toml: a-rule:", "unknown category", "size")


def test_unknown_category_file(tmp_path):
    write(tmp_path, "networking.toml", good(category="networking"))
    expect_error(tmp_path, "networking.toml", "unknown category")


def test_missing_evidence(tmp_path):
    text = good().split("[[rule.evidence]]")[0]
    write(tmp_path, "debugging.toml", text)
    expect_error(tmp_path, "debugging.toml: a-rule:", "evidence")


def test_evidence_needs_a_figure(tmp_path):
    write(tmp_path, "debugging.toml", good().replace('figure = "2%"', 'figure = ""'))
    expect_error(tmp_path, "debugging.toml: a-rule:", "figure")


def test_unverified_evidence_needs_a_note(tmp_path):
    write(tmp_path, "debugging.toml", good().replace("verified = true", "verified = false"))
    expect_error(tmp_path, "debugging.toml: a-rule:", "note")


def test_bad_option_name(tmp_path):
    write(tmp_path, "debugging.toml", good().replace("CONFIG_DEBUG_LIST", "DEBUG_LIST"))
    expect_error(tmp_path, "debugging.toml: a-rule:", "DEBUG_LIST", "CONFIG_[A-Z0-9_]+")


def test_lowercase_option_name(tmp_path):
    write(tmp_path, "debugging.toml", good().replace("CONFIG_DEBUG_LIST", "CONFIG_debug_list"))
    expect_error(tmp_path, "debugging.toml: a-rule:", "CONFIG_debug_list")


def test_empty_expect(tmp_path):
    text = good().replace('expect.all = { CONFIG_DEBUG_LIST = "n" }\n', "expect = {}\n")
    write(tmp_path, "debugging.toml", text)
    expect_error(tmp_path, "debugging.toml: a-rule:", "empty expect")


def test_missing_expect(tmp_path):
    write(tmp_path, "debugging.toml", good().replace('expect.all = { CONFIG_DEBUG_LIST = "n" }\n', ""))
    expect_error(tmp_path, "debugging.toml: a-rule:", "expect")


def test_empty_option_table(tmp_path):
    write(tmp_path, "debugging.toml", good().replace('{ CONFIG_DEBUG_LIST = "n" }', "{}"))
    expect_error(tmp_path, "debugging.toml: a-rule:", "empty expect")


def test_every_profile_skipped_is_empty(tmp_path):
    write(tmp_path, "debugging.toml", good().replace('{ CONFIG_DEBUG_LIST = "n" }', '"skip"'))
    expect_error(tmp_path, "debugging.toml: a-rule:", "empty expect")


def test_metric_not_in_catalog(tmp_path):
    write(tmp_path, "debugging.toml", good(metric="syscall.nope"))
    expect_error(tmp_path, "debugging.toml: a-rule:", "syscall.nope", "catalog")


def test_empty_metric_is_allowed(tmp_path):
    write(tmp_path, "debugging.toml", good(metric=""))
    assert load_rules(tmp_path)[0].metric == ""


def test_values_must_be_written_as_in_dotconfig(tmp_path):
    write(tmp_path, "debugging.toml", good().replace('CONFIG_DEBUG_LIST = "n"', "CONFIG_DEBUG_LIST = false"))
    expect_error(tmp_path, "debugging.toml: a-rule:", "CONFIG_DEBUG_LIST")
    write(tmp_path, "debugging.toml", good().replace('CONFIG_DEBUG_LIST = "n"', 'CONFIG_DEBUG_LIST = "yes"'))
    expect_error(tmp_path, "debugging.toml: a-rule:", "'yes'")
    write(tmp_path, "debugging.toml", good().replace('CONFIG_DEBUG_LIST = "n"', 'CONFIG_DEBUG_LIST = []'))
    expect_error(tmp_path, "debugging.toml: a-rule:", "empty list")


def test_lists_numbers_and_strings_are_values(tmp_path):
    text = good().replace('{ CONFIG_DEBUG_LIST = "n" }',
                          '{ CONFIG_HZ = ["100", "250"], CONFIG_X = "0x10", CONFIG_S = \'"deadline"\', '
                          'CONFIG_T = ["y", "m"] }')
    write(tmp_path, "debugging.toml", text)
    table = load_rules(tmp_path)[0].expected_for("latency")
    assert table == {"CONFIG_HZ": ("100", "250"), "CONFIG_X": ("0x10",), "CONFIG_S": ('"deadline"',),
                     "CONFIG_T": ("y", "m")}


def test_bad_id(tmp_path):
    write(tmp_path, "debugging.toml", good(id="Bad_Id"))
    expect_error(tmp_path, "debugging.toml: Bad_Id:", "[a-z0-9-]+")


def test_missing_field(tmp_path):
    write(tmp_path, "debugging.toml", good().replace('rationale = "Because."\n', ""))
    expect_error(tmp_path, "debugging.toml: a-rule:", "rationale")


def test_invalid_toml(tmp_path):
    write(tmp_path, "debugging.toml", "[[rule]\nid = ")
    expect_error(tmp_path, "debugging.toml", "TOML")


def test_empty_directory(tmp_path):
    expect_error(tmp_path, "no rule files")


def test_unknown_keys_and_wrong_types_name_the_key(tmp_path):
    write(tmp_path, "debugging.toml", good().replace('rationale = "Because."', 'ratoinale = "Because."'))
    expect_error(tmp_path, "debugging.toml: a-rule: unknown key 'ratoinale' (allowed: category, evidence, expect, ")
    write(tmp_path, "debugging.toml", good().replace('figure = "2%"', 'figure = "2%"\nfigrue = "3%"'))
    expect_error(tmp_path,
                 "debugging.toml: a-rule: evidence #1: unknown key 'figrue' (allowed: figure, note, source, verified)")
    write(tmp_path, "debugging.toml", good().replace("verified = true", 'verified = "yes"'))
    expect_error(tmp_path, "debugging.toml: a-rule: evidence #1: verified: expected true or false, got a string 'yes'")
    write(tmp_path, "debugging.toml", "version = 2\n" + good())
    expect_error(tmp_path, "debugging.toml: unknown key 'version' (allowed: rule)")


# --- which rule outranks which ---------------------------------------------------------------

def outranking(id, beats, expect='expect.all = { CONFIG_DEBUG_LIST = "n" }'):
    return good(id=id).replace('expect.all = { CONFIG_DEBUG_LIST = "n" }',
                               f"{expect}\noutranks = {beats!r}".replace("'", '"'))


def test_a_real_time_kernel_outranks_transparent_huge_pages_in_the_shipped_rules():
    by_id = {r.id: r for r in load_rules()}
    assert by_id["preempt-full-latency"].outranks == ("thp-madvise",)
    assert all(not r.outranks for r in load_rules() if r.id != "preempt-full-latency")


def test_outranks_loads_and_is_checked_across_files(tmp_path):
    write(tmp_path, "debugging.toml", outranking("strong", ["weak"]))
    write(tmp_path, "size.toml", good(id="weak", category="size"))
    assert {r.id: r.outranks for r in load_rules(tmp_path)} == {"strong": ("weak",), "weak": ()}


@pytest.mark.parametrize("beats, message", [
    (["nobody"], "debugging.toml: strong: outranks 'nobody', which is no rule id"),
    (["strong"], "debugging.toml: strong: outranks 'strong': name the id of another rule"),
    (["Weak"], "debugging.toml: strong: outranks 'Weak': name the id of another rule"),
    (["weak", "weak"], "debugging.toml: strong: outranks names a rule twice"),
])
def test_a_bad_outranks_is_refused(tmp_path, beats, message):
    write(tmp_path, "debugging.toml", outranking("strong", beats))
    write(tmp_path, "size.toml", good(id="weak", category="size"))
    expect_error(tmp_path, message)


def test_a_rule_can_only_outrank_one_a_profile_audits_with_it(tmp_path):
    write(tmp_path, "debugging.toml",
          outranking("strong", ["weak"], 'expect.latency = { CONFIG_PREEMPT = "y" }'))
    weak = good(id="weak", category="size").replace('expect.all = { CONFIG_DEBUG_LIST = "n" }',
                                                    'expect.all = { CONFIG_DEBUG_LIST = "n" }\n'
                                                    'expect.latency = "skip"')
    write(tmp_path, "size.toml", weak)
    expect_error(tmp_path, "debugging.toml: strong: outranks 'weak', but no profile audits both")


def test_no_rule_outranks_itself_through_others(tmp_path):
    write(tmp_path, "debugging.toml", outranking("a-rule", ["b-rule"]) + outranking("c-rule", ["a-rule"]))
    write(tmp_path, "size.toml", outranking("b-rule", ["c-rule"]).replace('"debugging"', '"size"'))
    expect_error(tmp_path, "debugging.toml: a-rule: outranks itself: a-rule outranks b-rule outranks c-rule "
                           "outranks a-rule")
