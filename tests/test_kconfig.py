"""The Kconfig model: kconfiglib on Linux >= 5.13, the $(shell) cache, loading configs.

Unit tests run on a small Kconfig tree written here; the integration tests hold kernellab's
resolution equal to `make olddefconfig`'s on Debian's 6.1 and 6.12 trees.
"""

import hashlib
import lzma
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernellab import arches, sources, toolchain
from kernellab.config import kconfig
from kernellab.config.resolve import resolve
from kernellab.errors import LabError
from kernellab.sources import Source
from kernellab.toolchain import Toolchain

TINY = """
    mainmenu "kernellab test tree"

    config MODULES
    	bool "Enable loadable module support"
    	modules

    config 64BIT
    	def_bool y

    config X86_64
    	def_bool 64BIT

    config X86_32
    	def_bool !64BIT

    config PROBED
    	def_bool $(shell,echo y)

    config PROBED_IN
    	string
    	default "$(shell,pwd)"

    config DEBUG_KERNEL
    	bool "Kernel debugging"

    config DRIVER
    	tristate "A driver"

    config HZ
    	int "Timer frequency"
    	default 250

    config CMDLINE
    	string "Built-in command line"
    	default ""

    config IMPLIER
    	bool "Implies a feature"
    	imply FEATURE

    config FEATURE
    	bool
    	depends on ARM64
    """


def tiny_tree(root: Path, text: str = TINY) -> kconfig.KconfigTree:
    """A KconfigTree over a Kconfig file written in `root` (a path source, x86_64).

    What it caches goes to root/.cache, not to kernellab's cache."""
    text = textwrap.dedent(text)
    (root / "Kconfig").write_text(text)
    source = Source(str(root), "path", "6.99.0", hashlib.sha256(f"{root}\n{text}".encode()).hexdigest(), root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELLAB_CACHE", str(root / ".cache"))
        tree = kconfig.open_tree(source, arches.load("x86_64"), Toolchain("gcc", "", "gcc (test) 12.2.0"))
        _ = tree.any_arch_symbols   # read now, while the cache is root/.cache
    return tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return tiny_tree(tmp_path_factory.mktemp("tree"))


def write(tmp_path, text, name="test.config") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_bare_modules_attribute_parses_and_marks_modules(tree, tmp_path):
    """Linux >= 5.13 writes `modules`, not `option modules`: MODULES must still gate m."""
    assert tree.kconf.modules.name == "MODULES"
    tree.load(write(tmp_path, "CONFIG_MODULES=y\nCONFIG_DRIVER=m\n"))
    assert tree.value(tree.symbol("DRIVER")) == "m"
    tree.load(write(tmp_path, "# CONFIG_MODULES is not set\nCONFIG_DRIVER=m\n"))
    assert tree.value(tree.symbol("DRIVER")) == "y"   # no modules: m becomes y, as in kconfig


def test_parsed_tree_is_cached(tmp_path, monkeypatch):
    first = tiny_tree(tmp_path)
    assert first.symbol("PROBED").str_value == "y"
    # $(shell,...) runs in kernellab's cache, not in the user's working directory.
    assert first.symbol("PROBED_IN").str_value == str(tmp_path / ".cache" / "kconfig")
    monkeypatch.setattr(kconfig, "_parse", lambda *a: pytest.fail("parsed again"))
    assert tiny_tree(tmp_path).symbol("PROBED").str_value == "y"


def test_damaged_cache_is_parsed_over(tmp_path):
    tree = tiny_tree(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELLAB_CACHE", str(tmp_path / ".cache"))
        cache = kconfig.cache_path(tree.source, tree.profile, tree.toolchain)
    cache.write_bytes(b"\x80\x05not a pickle")
    assert tiny_tree(tmp_path).symbol("DEBUG_KERNEL") is not None
    assert cache.stat().st_size > 1000


def test_resolved_writes_active_implies_like_the_c_tools(tree, tmp_path):
    tree.load(write(tmp_path, "CONFIG_IMPLIER=y\n"))
    assert tree.resolved()["CONFIG_FEATURE"] == "n"     # "# CONFIG_FEATURE is not set"
    tree.load(write(tmp_path, "# CONFIG_IMPLIER is not set\n"))
    assert "CONFIG_FEATURE" not in tree.resolved()


def test_values_as_dotconfig_writes_them(tree, tmp_path):
    tree.load(write(tmp_path, 'CONFIG_HZ=1000\nCONFIG_CMDLINE="console=ttyS0 \\"quoted\\""\n'))
    assert tree.value(tree.symbol("CONFIG_HZ")) == "1000"
    assert tree.value(tree.symbol("CMDLINE")) == '"console=ttyS0 \\"quoted\\""'
    assert tree.resolved()["CONFIG_CMDLINE"] == '"console=ttyS0 \\"quoted\\""'
    assert tree.value(tree.symbol("DEBUG_KERNEL")) == "n"


def test_malformed_line_is_an_error_with_file_and_line(tree, tmp_path):
    path = write(tmp_path, "CONFIG_DEBUG_KERNEL=y\nCONFIG_HZ 100\n")
    with pytest.raises(LabError, match=rf"{path}:2: expected CONFIG_NAME=value"):
        tree.load(path)


def test_not_utf8_is_an_error_with_its_line(tree, tmp_path):
    path = tmp_path / "bin.config"
    path.write_bytes(b"CONFIG_DEBUG_KERNEL=y\n# \xff\xfe\n")
    with pytest.raises(LabError, match=rf"{path}:2: not UTF-8"):
        tree.load(path)


def test_missing_file_is_an_error(tree, tmp_path):
    with pytest.raises(LabError, match="cannot read"):
        tree.load(tmp_path / "nope.config")


def test_unknown_options_are_one_warning_with_close_names(tree, tmp_path):
    warnings = tree.load(write(tmp_path, "CONFIG_DEBUG_KERNLE=y\nCONFIG_HZ=300\n# CONFIG_GONE_LONG_AGO is not set\n"))
    assert len(warnings) == 1
    warning = warnings[0]
    assert "2 option(s) unknown" in warning
    assert "CONFIG_DEBUG_KERNLE (line 1; did you mean CONFIG_DEBUG_KERNEL?)" in warning
    assert "CONFIG_GONE_LONG_AGO (line 3" in warning
    assert tree.value(tree.symbol("HZ")) == "300"   # the rest still loads


def test_values_of_the_wrong_type_are_warned_and_ignored(tree, tmp_path):
    path = write(tmp_path, "CONFIG_DEBUG_KERNEL=m\nCONFIG_HZ=0x10\nCONFIG_DRIVER=y\n")
    warnings = tree.load(path)
    assert [w.split(": ", 1)[0] for w in warnings] == [f"{path}:1", f"{path}:2"]
    assert "bool option: m is not a valid value" in warnings[0]
    assert tree.value(tree.symbol("HZ")) == "250"
    assert tree.value(tree.symbol("DRIVER")) == "y"


@pytest.mark.parametrize("text, arch", [
    ("CONFIG_ARM64=y\nCONFIG_DEBUG_KERNEL=y\n", "arm64"),
    ("CONFIG_X86_32=y\n# CONFIG_64BIT is not set\n", "i386"),
    ("CONFIG_PPC64=y\nCONFIG_64BIT=y\n", "powerpc64"),
])
def test_config_for_another_arch_is_detected(tree, tmp_path, text, arch):
    path = write(tmp_path, text)
    with pytest.raises(LabError, match=rf"{path} is a config for {arch} \({path}:1: CONFIG_\w+=y\), not for x86_64"):
        tree.load(path)


def test_symbol_lookup_with_or_without_prefix(tree):
    assert tree.symbol("CONFIG_HZ") is tree.symbol("HZ") is not None
    assert tree.symbol("ARM64") is None          # referenced, never defined
    with pytest.raises(LabError,
                       match="CONFIG_DEBUG_KERNL does not exist in Linux 6.99.0; did you mean CONFIG_DEBUG_KERNEL"):
        tree.require("DEBUG_KERNL")


def test_other_arches_options_are_called_arch_specific(tmp_path):
    root = tmp_path / "t"
    (root / "arch" / "arm64").mkdir(parents=True)
    (root / "arch" / "arm64" / "Kconfig").write_text("config ARM64_SVE\n\tbool \"SVE\"\n")
    tree = tiny_tree(root)
    assert tree.missing("CONFIG_ARM64_SVE") == ("CONFIG_ARM64_SVE is arch-specific: "
                                               "not defined for x86_64 in Linux 6.99.0")


lines = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
    st.sampled_from(["CONFIG_DEBUG_KERNEL=y", "CONFIG_DRIVER=m", "CONFIG_HZ=1000", "# CONFIG_MODULES is not set",
                     'CONFIG_CMDLINE="x"', "CONFIG_HZ=y", "CONFIG_DRIVER=12", "CONFIG_NOPE=y", "CONFIG_ARM64=y"]),
    st.builds(lambda n, v: f"CONFIG_{n}={v}", st.from_regex(r"[A-Z0-9_]{1,12}", fullmatch=True),
              st.from_regex(r'y|m|n|-?[0-9]{1,25}|0x[0-9a-f]{1,8}|"[^"\\]{0,10}"', fullmatch=True)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(lines, max_size=15))
def test_loader_never_raises_anything_but_a_lab_error(tree, tmp_path, lines):
    """Garbage in: a LabError naming file:line (or the arch), or a load. Never a traceback."""
    path = tmp_path / "fuzz.config"
    path.write_text("\n".join(lines), encoding="utf-8")
    try:
        warnings = tree.load(path)
    except LabError as exc:
        assert str(exc).startswith(f"{path}")
    else:
        assert all(w.startswith(str(path)) for w in warnings)
        tree.resolved()


# --- the real trees ---------------------------------------------------------------------------

def debian_config(source: Source, profile, tmp_path: Path) -> Path:
    series = ".".join(source.version.split(".")[:2])
    path = tmp_path / f"debian-{series}.config"
    path.write_bytes(lzma.decompress(Path(f"/usr/src/linux-config-{series}/{profile.debian_config}").read_bytes()))
    return path


@pytest.mark.integration
@pytest.mark.parametrize("spec", ["debian:6.1", "debian:6.12"])
def test_resolution_equals_make_olddefconfig(spec, tmp_path):
    """Debian's stock amd64 config, resolved by kconfiglib and by the kernel's own make."""
    source = sources.resolve(spec)
    profile = arches.load("x86_64")
    tc = toolchain.detect(profile)
    made = resolve(source, profile, tc, "debian", [])
    tree = kconfig.open_tree(source, profile, tc)
    config = debian_config(source, profile, tmp_path)
    warnings = tree.load(config)
    # The only warning allowed is the cannot-hold line: options the build host decides
    # (BTF needs a pahole this host may lack). Each it names, make changed the same way.
    assert all("cannot hold" in w for w in warnings), warnings
    ours = tree.resolved()
    theirs = made.values
    assert set(ours.items()) == set(theirs.items())
    asked = dict(line.split("=", 1) for line in config.read_text().splitlines() if line.startswith("CONFIG_"))
    for name, value, got in re.findall(r"(CONFIG_\w+)=(\S+) -> (\S+)", "".join(warnings)):
        assert asked[name] == value and theirs.get(name, "n") == got.replace("(unset)", "n")
    assert len(ours) > 8000


@pytest.mark.integration
def test_defconfig_is_makes():
    source = sources.resolve("debian:6.1")
    profile = arches.load("x86_64")
    tc = toolchain.detect(profile)
    tree = kconfig.open_tree(source, profile, tc)
    assert tree.load_defconfig() == []
    assert tree.loaded == "x86_64 defconfig"
    assert tree.resolved() == resolve(source, profile, tc, "defconfig", []).values


CHAINS = """
    config MITIGATIONS
    	bool "Mitigations"

    config RETPOLINE
    	bool "Retpolines"
    	depends on MITIGATIONS

    menuconfig FTRACE
    	bool "Tracers"

    if FTRACE
    config FUNCTION_TRACER
    	bool "Function tracer"
    	depends on HAVE_FUNCTION_TRACER

    config FUNCTION_GRAPH_TRACER
    	bool "Function graph tracer"
    	depends on FUNCTION_TRACER
    endif

    config HAVE_FUNCTION_TRACER
    	bool
    	default y

    config CONSOLE
    	bool "Console"
    	depends on SERIAL

    config SERIAL
    	bool "Serial"
    	depends on TTY

    config TTY
    	bool "TTY"

    config BASE_FULL
    	bool "Full-sized data structures"
    	default y

    config BASE_SMALL
    	int
    	default 0 if BASE_FULL
    	default 1 if !BASE_FULL

    config TRACING
    	bool
    	select RING_BUFFER

    config RING_BUFFER
    	bool

    config BLK_TRACE
    	bool "Block tracing"
    	select TRACING
    """


def test_needs_names_the_options_of_the_list_a_dependency_reaches(tmp_path):
    """Through `if` blocks and through options outside the list (CONSOLE needs TTY by
    way of SERIAL), and for an option without a prompt what its defaults and selectors
    name: what olddefconfig needs set before it sets the option."""
    tree = tiny_tree(tmp_path, CHAINS)
    names = ["CONFIG_MITIGATIONS", "CONFIG_RETPOLINE", "CONFIG_FTRACE", "CONFIG_FUNCTION_TRACER",
             "CONFIG_FUNCTION_GRAPH_TRACER", "CONFIG_CONSOLE", "CONFIG_TTY", "CONFIG_UNKNOWN",
             "CONFIG_BASE_FULL", "CONFIG_BASE_SMALL", "CONFIG_RING_BUFFER", "CONFIG_BLK_TRACE"]
    assert kconfig.needs(tree, names) == {
        "CONFIG_MITIGATIONS": set(), "CONFIG_RETPOLINE": {"CONFIG_MITIGATIONS"}, "CONFIG_FTRACE": set(),
        "CONFIG_FUNCTION_TRACER": {"CONFIG_FTRACE"},
        "CONFIG_FUNCTION_GRAPH_TRACER": {"CONFIG_FTRACE", "CONFIG_FUNCTION_TRACER"},
        "CONFIG_CONSOLE": {"CONFIG_TTY"}, "CONFIG_TTY": set(), "CONFIG_UNKNOWN": set(),
        # A derived int follows its defaults' conditions; a selected option its selectors'.
        "CONFIG_BASE_FULL": set(), "CONFIG_BASE_SMALL": {"CONFIG_BASE_FULL"},
        "CONFIG_RING_BUFFER": {"CONFIG_BLK_TRACE"}, "CONFIG_BLK_TRACE": set()}
