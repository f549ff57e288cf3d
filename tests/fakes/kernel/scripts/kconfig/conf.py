#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The fake tree's kconfig front end (Linux's scripts/kconfig/conf), on kconfiglib.

    conf.py TARGET      in the output directory; $srctree names the source tree

TARGET: olddefconfig, alldefconfig, allnoconfig, tinyconfig, defconfig, or syncconfig
(what the build runs: include/config/auto.conf, include/generated/autoconf.h, and
include/config/<SYMBOL> touched for every symbol whose value changed, which the
objects' .cmd files name so that only what depends on a change is rebuilt).
"""

import os
import sys

try:
    import kconfiglib
except ImportError:
    sys.exit(f"*** fake kernel: {sys.executable} cannot import kconfiglib; "
             "set KERNELLAB_FAKE_PYTHON to a Python that has it")


def header():
    return ("#\n# Automatically generated file; DO NOT EDIT.\n"
            f"# Linux/{os.environ.get('SRCARCH', 'x86')} {os.environ.get('KERNELVERSION', '')} "
            "Kernel Configuration\n#\n")


def write_if_changed(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def config_text(kconf):
    # kconfiglib's own .config writer, into a string (write_config wants a file).
    tmp = ".config.kconfig-tmp"
    kconf.write_config(tmp, header=header(), save_old=False)
    with open(tmp) as f:
        text = f.read()
    os.remove(tmp)
    return text


def allno(kconf):
    # As kconfiglib's allnoconfig: every symbol n unless it must be y.
    kconf.warn = False
    for sym in kconf.unique_defined_syms:
        sym.set_value(2 if sym.is_allnoconfig_y else 0)
    kconf.warn = True


def auto_conf(kconf):
    """auto.conf: the set symbols as make assignments (n bool/tristate symbols omitted)."""
    lines = []
    for sym in kconf.unique_defined_syms:
        if sym.config_string and not (sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE)
                                      and sym.tri_value == 0):
            lines.append(sym.config_string)
    return "".join(lines)


def values(text):
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.startswith("CONFIG_"):
            out[name[len("CONFIG_"):]] = value
    return out


def syncconfig(kconf, config):
    if not os.path.exists(config):
        sys.exit(f'***\n*** Configuration file "{config}" not found!\n***\n'
                 '*** Please run some configurator (e.g. "make oldconfig" or\n'
                 '*** "make menuconfig" or "make xconfig").\n***')
    kconf.load_config(config)
    write_if_changed(config, config_text(kconf))
    os.makedirs("include/config", exist_ok=True)
    os.makedirs("include/generated", exist_ok=True)
    auto_path = "include/config/auto.conf"
    old = values(open(auto_path).read()) if os.path.exists(auto_path) else {}
    text = auto_conf(kconf)
    new = values(text)
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            stamp = os.path.join("include/config", name)
            with open(stamp, "a"):
                pass
            os.utime(stamp)
    # Rewritten only when it changed: kbuild keeps objects from depending on it anyway.
    tmp = "include/generated/.autoconf.h.kconfig-tmp"
    kconf.write_autoconf(tmp)
    with open(tmp) as f:
        write_if_changed("include/generated/autoconf.h", f.read())
    os.remove(tmp)
    # Written even when unchanged: its time says "in sync with .config".
    with open(auto_path, "w") as f:
        f.write(text)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    target = sys.argv[1]
    srctree = os.environ["srctree"]
    config = os.environ.get("KCONFIG_CONFIG", ".config")
    kconf = kconfiglib.Kconfig(os.path.join(srctree, "Kconfig"), warn_to_stderr=True)
    # A fragment merged onto a base overrides it, as merge_config.sh does: no noise.
    kconf.warn_assign_override = kconf.warn_assign_redun = False
    if target == "syncconfig":
        syncconfig(kconf, config)
        return
    if target == "olddefconfig":
        if os.path.exists(config):
            kconf.load_config(config)
    elif target == "alldefconfig":
        pass
    elif target == "allnoconfig":
        allno(kconf)
    elif target == "tinyconfig":
        allno(kconf)
        kconf.load_config(os.path.join(srctree, "kernel/configs/tiny.config"), replace=False)
    elif target == "defconfig":
        arch = os.environ.get("ARCH", "x86_64")
        kconf.load_config(os.path.join(srctree, "arch", os.environ.get("SRCARCH", "x86"),
                                       "configs", f"{arch}_defconfig"))
    else:
        sys.exit(f"conf.py: unknown target {target!r}")
    write_if_changed(config, config_text(kconf))


if __name__ == "__main__":
    main()
