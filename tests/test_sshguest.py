"""The ssh test guest itself (tests/sshguest.py): it answers ssh, kexec works in it under
TCG, a reboot returns it to the kernel QEMU booted, and a changed host key is refused.

This is the flow kernellab's ssh target runs on a remote, done by hand with ssh."""

import subprocess
import time

import pytest

from kernellab.experiments import lab as lab_stage
from kernellab.experiments.spec import parse_short
from sshguest import OFFLINE, VARIANT, initramfs, ssh_guest

pytestmark = pytest.mark.integration

MARKER = "kl_kexec_marker=1"
DELAY_S = 1  # a detached command waits this long, so that the ssh that starts it ends cleanly


def detached(command: str) -> str:
    return f"setsid sh -c 'sleep {DELAY_S}; {command}' </dev/null >/dev/null 2>&1 &"


@pytest.fixture(scope="session")
def ssh_guest_kernel(store):
    """lab-minimal + tests/data/ssh-guest.config, built in the shared build tree."""
    prepared = lab_stage.prepare(parse_short(VARIANT))
    assert prepared.config.dropped == []
    return prepared, lab_stage.ensure_built(prepared, store)


@pytest.fixture(scope="session")
def ssh_guest_userland():
    return initramfs()


def test_kexec_round_trip_reboot_and_host_key(ssh_guest_kernel, ssh_guest_userland):
    _, build = ssh_guest_kernel
    initrd, keys = ssh_guest_userland
    with ssh_guest(build.image, initrd, keys) as guest:
        times = {"boot to ssh": guest.boot_s}
        release = guest.output("uname -r").strip()
        assert release
        first_boot = guest.boot_id()
        cmdline = guest.output("cat /proc/cmdline").strip()
        assert MARKER not in cmdline
        assert guest.output("zcat /proc/config.gz | grep '^CONFIG_KEXEC='").strip() == "CONFIG_KEXEC=y"
        assert guest.output("test -s /boot/initrd.img-$(uname -r) && echo ok").strip() == "ok"

        # Copy a kernel over (dropbear has no SFTP): the same bzImage.
        copied = guest.ssh("cat > /tmp/kl-kernel", input=build.image.read_bytes())
        assert copied.returncode == 0, copied.stderr
        assert guest.output("wc -c < /tmp/kl-kernel").strip() == str(build.image.stat().st_size)

        # Load it with the running kernel's initramfs and command line, plus a marker.
        loaded = guest.ssh('kexec -l /tmp/kl-kernel --initrd=/boot/initrd.img-$(uname -r) '
                           f'--command-line="$(cat /proc/cmdline) {MARKER}" && cat /sys/kernel/kexec_loaded')
        assert loaded.returncode == 0 and loaded.stdout.strip() == b"1", loaded.stderr

        # Start it detached, as kernellab does where no systemd runs.
        started = guest.ssh(detached("sync; kexec -e"))
        assert started.returncode == 0, started.stderr
        times["kexec -e to ssh"] = guest.wait_for_ssh(180, unless_boot_id=first_boot) - DELAY_S
        assert MARKER in guest.output("cat /proc/cmdline"), guest.console_tail()
        assert guest.output("uname -r").strip() == release
        kexec_boot = guest.boot_id()
        assert kexec_boot != first_boot
        # The kexec'd system keeps its initramfs too: it could kexec again.
        assert guest.output("test -s /boot/initrd.img-$(uname -r) && echo ok").strip() == "ok"

        # Back to the default kernel: `reboot` (busybox init stops everything, then the
        # machine restarts, and QEMU boots its -kernel again: it runs without -no-reboot).
        started = guest.ssh(detached("reboot"))
        assert started.returncode == 0, started.stderr
        times["reboot to ssh"] = guest.wait_for_ssh(180, unless_boot_id=kexec_boot) - DELAY_S
        assert MARKER not in guest.output("cat /proc/cmdline")

        # A kernel that never comes back (booted offline): the power-cycle command resets the
        # machine through QEMU's monitor, and it boots its default kernel again.
        rebooted = guest.boot_id()
        assert guest.ssh("cat > /tmp/kl-kernel", input=build.image.read_bytes()).returncode == 0  # /tmp is new
        loaded = guest.ssh(f'kexec -l /tmp/kl-kernel --initrd=/boot/initrd.img-$(uname -r) '
                           f'--command-line="$(cat /proc/cmdline) {OFFLINE}"')
        assert loaded.returncode == 0, loaded.stderr
        mark = guest.console_size()
        assert guest.ssh(detached("sync; kexec -e")).returncode == 0
        guest.wait_for_console("kl-guest: offline", 180, since=mark)
        time.sleep(2)
        assert not guest.sshd_answers(), guest.console_tail()
        subprocess.run(guest.power_cycle_command, shell=True, check=True, timeout=30)
        times["power cycle to ssh"] = guest.wait_for_ssh(180, unless_boot_id=rebooted)
        assert OFFLINE not in guest.output("cat /proc/cmdline")

        # Another host key for the same [127.0.0.1]:PORT: refused, never accepted.
        refused = guest.ssh("true", known_hosts=guest.alternate_known_hosts())
        assert refused.returncode == 255
        err = refused.stderr.decode()
        assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in err and "Host key verification failed" in err, err
        # No key for it at all: refused too (StrictHostKeyChecking yes).
        empty = guest.workdir / "known_hosts.empty"
        empty.write_text("")
        unknown = guest.ssh("true", known_hosts=empty)
        assert unknown.returncode == 255 and b"Host key verification failed" in unknown.stderr, unknown.stderr
        print("\nssh guest times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
