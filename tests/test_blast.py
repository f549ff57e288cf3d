"""The blast radius of an option: fixdep's records and the Makefiles' flags."""

from pathlib import Path

from kernellab import blast

ARCH_MAKEFILE = """\
ifdef CONFIG_RETPOLINE
  KBUILD_CFLAGS += $(RETPOLINE_CFLAGS)
endif
ifeq ($(CONFIG_STACKPROTECTOR),y)
  ifdef CONFIG_SMP
    KBUILD_CFLAGS += -mstack-protector-guard-reg=gs
  endif
endif
cflags-$(CONFIG_MCORE2) += -march=core2
objtool-args-$(CONFIG_CPU_UNRET_ENTRY) += --unret
ifdef CONFIG_MODULES
  targets += modules.order
endif
obj-$(CONFIG_NET) += net/
"""


def test_options_that_set_flags_are_found_in_conditionals_and_assignments():
    assert blast.flag_options_of(ARCH_MAKEFILE) == {"RETPOLINE", "STACKPROTECTOR", "SMP", "MCORE2",
                                                     "CPU_UNRET_ENTRY"}


def _cmd(tree: Path, obj: str, options: list[str]) -> None:
    path = tree / f".{obj}.cmd"
    path.parent.mkdir(parents=True, exist_ok=True)
    deps = "".join(f"  $(wildcard include/config/{o}) \\\n" for o in options)
    path.write_text(f"cmd_{obj} := gcc -c {obj}\n\ndeps_{obj} := \\\n{deps}\n")


def test_radius_counts_the_objects_naming_an_option_and_whole_tree_for_flags(tmp_path):
    build, source = tmp_path / "build", tmp_path / "src"
    for i in range(40):
        _cmd(build, f"kernel/f{i}.o", ["LOCKDEP"] if i < 30 else ["NLS_UTF8"] if i == 39 else [])
    (source / "arch" / "x86").mkdir(parents=True)
    (source / "Makefile").write_text("ifdef CONFIG_FUNCTION_TRACER\n  CC_FLAGS_FTRACE := -pg\nendif\n")
    (source / "arch" / "x86" / "Makefile").write_text(ARCH_MAKEFILE)
    r = blast.measure(build, source, "x86_64", ["CONFIG_LOCKDEP", "CONFIG_NLS_UTF8", "CONFIG_RETPOLINE",
                                               "CONFIG_FUNCTION_TRACER", "CONFIG_IKCONFIG"])
    assert r.objects == 40
    assert r.recompiles == {"CONFIG_LOCKDEP": 30, "CONFIG_NLS_UTF8": 1, "CONFIG_RETPOLINE": 40,
                            "CONFIG_FUNCTION_TRACER": 40, "CONFIG_IKCONFIG": 0}
    assert [o for o in r.recompiles if r.wide(o)] == ["CONFIG_LOCKDEP", "CONFIG_RETPOLINE", "CONFIG_FUNCTION_TRACER"]
    assert r.flag_options == {"CONFIG_RETPOLINE", "CONFIG_FUNCTION_TRACER"}
