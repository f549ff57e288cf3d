"""The agent compiles statically for every architecture kernellab boots (CI compiles all),
and the binaries are what the guests need: right machine, class, byte order, no interpreter.
Where qemu-user is installed, each one also runs its AES self-test (big-endian included)."""

import shutil
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from kernellab.agent.compile import agent_binary, cross_targets
from kernellab.agent.version import check_hello
from kernellab.guest.records import RecordStream

TARGETS = cross_targets()


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_agent_cross_compiles_static(arch):
    target = TARGETS[arch]
    binary = agent_binary(target.cc, arch)
    with binary.open("rb") as f:
        elf = ELFFile(f)
        assert elf.elfclass == target.elf.class_
        assert elf.little_endian == (target.elf.endian == "little")
        assert elf["e_machine"] == target.elf.machine
        assert not any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments()), "not static"


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_agent_runs_under_qemu_user(arch):
    target = TARGETS[arch]
    emulator = shutil.which(target.qemu_user)
    if emulator is None:
        pytest.skip(f"{target['qemu_user']} not installed (Debian package qemu-user)")
    binary = agent_binary(target.cc, arch)
    out = subprocess.run([emulator, str(binary), "--only", "crypto.aes256cbc_user,syscall.null",
                          "--repeats", "2", "--target-us", "200"],
                         capture_output=True, text=True, timeout=120).stdout
    stream = RecordStream()
    for line in out.splitlines():
        stream.feed(line)
    assert stream.complete, stream.rejected
    check_hello(stream.records[0].fields)
    metrics = {r.fields.get("metric") for r in stream.records if r.type == "sample"}
    assert {"crypto.aes256cbc_user", "syscall.null"} <= metrics, [r for r in stream.records if r.type == "na"]
