from kernellab import doctor
from kernellab.build import first_error


def test_first_error_names_the_first_compiler_error(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("  CC      kernel/fork.o\n"
                   "kernel/fork.c:12:1: warning: unused variable 'x'\n"
                   "kernel/fork.c:40:5: error: 'foo' undeclared (first use in this function)\n"
                   "kernel/exit.c:9:1: error: expected ';' before '}' token\n"
                   "make[2]: *** [scripts/Makefile.build:250: kernel/fork.o] Error 1\n")
    assert first_error(log) == "kernel/fork.c:40:5: error: 'foo' undeclared (first use in this function)"


def test_first_error_falls_back_to_make_errors(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("  LD      vmlinux\nmake[1]: *** [Makefile:1234: vmlinux] Error 139\nmake: *** [all] Error 2\n")
    assert first_error(log) == "make[1]: *** [Makefile:1234: vmlinux] Error 139"


def test_doctor_names_what_is_missing_and_how_to_install_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    checks = doctor.checks()
    missing = {c.what: c for c in checks if not c.ok}
    assert {"make", "flex", "bison", "ccache", "x86_64 compiler", "x86_64 emulator"} <= set(missing)
    command = doctor.install_command(list(missing.values()))
    assert command.startswith("apt-get install -y")
    for package in ("make", "flex", "bison", "ccache", "gcc", "qemu-system-x86"):
        assert f" {package}" in command
