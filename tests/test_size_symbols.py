"""The symbol view of `kernellab size` against the kernel's own scripts/bloat-o-meter, run
on two objects gcc makes here: every symbol kind nm distinguishes, statics with .NUMBER
suffixes, weak symbols, the generated ones the script skips."""

import subprocess
import sys

import pytest

from kernellab import sources
from kernellab.size import symbols

OLD = r"""
int shared_grows(int x) { return x + 1; }
int shared_shrinks(int x) { volatile int a[8]; for (int i = 0; i < 8; i++) a[i] = x * i; return a[3] + a[5]; }
int removed_func(int x) { return x * 3; }
static int local_func(int x) { volatile int y = x; return y * 7; }
int use_local(int x) { return local_func(x); }
int data_same[4] = {1, 2, 3, 4};
int data_grows[2] = {1, 2};
static int local_data[3] = {1, 2, 3};
int *keep_local = local_data;
int bss_big[64];
const int ro_table[8] = {1};
__attribute__((weak)) int weak_func(int x) { return x - 1; }
__attribute__((weak)) int weak_obj[5] = {1};
static int dup1 __asm__("dup.1") = 1;
static int dup2 __asm__("dup.2") = 2;
int *keep_dups[2] = {&dup1, &dup2};
int __mod_skipped[16] = {1};
const char linux_banner[] = "Linux version 0.0";
"""

NEW = r"""
int shared_grows(int x) { volatile int a[16]; for (int i = 0; i < 16; i++) a[i] = x ^ i; return a[1] + a[9] + a[15]; }
int shared_shrinks(int x) { return x; }
int added_func(int x) { return x * 5; }
static int local_func(int x) { volatile int y = x; return y * 7 + 1; }
int use_local(int x) { return local_func(x); }
int data_same[4] = {1, 2, 3, 4};
int data_grows[6] = {1, 2};
static int local_data[3] = {1, 2, 3};
int *keep_local = local_data;
int bss_big[16];
int bss_added[100];
const int ro_table[32] = {1};
__attribute__((weak)) int weak_func(int x) { return x - 2; }
__attribute__((weak)) int weak_obj[9] = {1};
static int dup1 __asm__("dup.1") = 1;
static int dup3 __asm__("dup.3") = 3;
static int dup4 __asm__("dup.4") = 4;
int *keep_dups[3] = {&dup1, &dup3, &dup4};
int __mod_skipped[32] = {1};
const char linux_banner[] = "Linux version 0.0.0.0.0";
"""


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bloat")
    for name, text in (("old", OLD), ("new", NEW)):
        (tmp / f"{name}.c").write_text(text)
        subprocess.run(["gcc", "-O2", "-fno-common", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=tmp, check=True)
    return tmp / "old.o", tmp / "new.o"


@pytest.fixture(scope="module")
def script():
    """scripts/bloat-o-meter of Linux 6.12 (Debian's source, which the tests extract anyway)."""
    return sources.resolve("debian:6.12").tree / "scripts" / "bloat-o-meter"


@pytest.mark.parametrize("flag,tables", [("-c", ["code", "data", "rodata"]), (None, ["all"])])
def test_the_view_is_bloat_o_meters_line_for_line(objects, script, flag, tables):
    old, new = objects
    argv = [sys.executable, str(script), *([flag] if flag else []), str(old), str(new)]
    theirs = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    ours = "".join(symbols.as_bloat_o_meter(symbols.bloat(old, new, t), symbols.TITLES[t]) for t in tables)
    assert ours == theirs


def test_every_kind_of_change_is_classified(objects):
    old, new = objects
    b = symbols.bloat(old, new)
    kinds = {c.name: c.kind for c in b.changes}
    assert kinds["added_func"] == kinds["bss_added"] == "added"
    assert kinds["removed_func"] == "removed"
    assert kinds["shared_grows"] == kinds["data_grows"] == kinds["ro_table"] == kinds["weak_obj"] == "grown"
    assert kinds["shared_shrinks"] == kinds["bss_big"] == "shrunk"
    assert kinds["data_same"] == "same"
    # Statics with .NUMBER suffixes are one symbol; the generated ones are left out.
    assert "dup" in kinds and "dup.1" not in kinds
    assert "__mod_skipped" not in kinds and "linux_banner" not in kinds
    assert (b.up - b.down) == b.after - b.before
