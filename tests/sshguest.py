"""A QEMU x86_64 guest that plays a remote machine reached over ssh (issue 11's ssh tests).

The guest runs a small kernel of its own (lab-minimal + tests/data/ssh-guest.config) and an
initramfs made here from Debian 12 packages, unpacked with `apt-get download` and
`dpkg-deb -x` (nothing is installed on the host, no root privileges are needed):

- busybox-static: the shell, the applets and PID 1 (busybox init, so that `reboot` works as
  on a real machine: init stops everything and restarts the kernel; QEMU runs without
  -no-reboot, so a reboot or a `system_reset` boots the -kernel of its command line again);
- dropbear-bin: the ssh server, public-key logins for root only (no password, no SFTP: copy
  files with `ssh HOST 'cat > FILE' < FILE`);
- kexec-tools, as Debian builds it: /sbin/kexec, which links the Xen control libraries
  (libxenctrl and its five helpers), so those packages come too.

The libraries they link that every Debian system has (libc, libcrypt, zlib, libgmp) come
from the host's /lib/x86_64-linux-gnu; Debian's dropbear and kexec need the glibc of Debian
12 or newer, which the host has.

Like a Debian machine, the guest keeps the initramfs it booted as
/boot/initrd.img-$(uname -r): its init archives its own root file system there at every
boot (busybox cpio), so a kernel kexec'd with that initrd comes up in the same state, and
so does one kexec'd from there. The kernel's `retain_initrd` is no help: Linux 6.1 only
keeps the memory, it exposes nothing to user space.

Everything downloaded or generated is kept under kernellab's cache (`sshguest/`), so a
second test session downloads nothing and reuses the keys: the guest's two host keys (the
second for "host key changed") and the client's key pair.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from kernellab import apt, paths
from kernellab.initramfs import build_cpio

FRAGMENT = Path(__file__).resolve().parent / "data" / "ssh-guest.config"
VARIANT = f"ssh-guest=lab-minimal+{FRAGMENT}"

# Debian 12 packages unpacked into the guest: the three tools and the libraries they link
# that a Debian host may lack.
PACKAGES = ("busybox-static", "dropbear-bin", "kexec-tools",
            "libtomcrypt1", "libtommath1",  # dropbear's crypto
            # /sbin/kexec links libxenctrl.so.4.17 (for kexec into Xen), and its helpers
            "libxenmisc4.17", "libxentoollog1", "libxentoolcore1", "libxencall1", "libxenevtchn1",
            "libxengnttab1", "libxenforeignmemory1", "libxendevicemodel1")
HOST_LIB_DIRS = (Path("/lib/x86_64-linux-gnu"), Path("/usr/lib/x86_64-linux-gnu"))
LOADER = "/lib64/ld-linux-x86-64.so.2"
# From the packages into the guest, at the same paths.
BINARIES = ("usr/sbin/dropbear", "sbin/kexec")

HOST = "127.0.0.1"
ALIAS = "kl-guest"
# RDRAND (TCG emulates it) with random.trust_cpu=on: the kernel's random pool is ready at
# once, instead of dropbear waiting for it ("Waiting for kernel randomness") a few seconds
# into every boot, for a time that varies boot to boot.
QEMU_ARGS = ("-machine", "pc", "-cpu", "qemu64,+rdrand", "-m", "512M", "-smp", "1", "-accel", "tcg")
# The kernel command line: kexec passes it on with /proc/cmdline. No panic=: a kernel that
# panics stays down, as a machine with no watchdog would, until it is power-cycled.
CMDLINE = "console=ttyS0 printk.time=1 loglevel=7 random.trust_cpu=on"
OFFLINE = "kl_guest_offline"  # on a kernel command line: the guest boots with no network

_DIR_SSH = 0o040700
_DIR = 0o040755
_FILE = 0o100644
_EXEC = 0o100755
_SECRET = 0o100600
_LINK = 0o120777

# PID 1 is busybox init (/init links to busybox): the guest kernel, like lab-minimal, has
# no BINFMT_SCRIPT, so no script can be /init. The kernel's built-in initramfs already
# holds /dev/console, init's stdin, stdout and stderr.
RCS = """export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
# The initramfs this kernel booted, as Debian keeps it (kexec -l --initrd= takes it):
# the root file system as it is now, without /boot and what is mounted (their mount
# points empty).
cd /
{ find . \\( -path ./boot -o -path ./dev -o -path ./proc -o -path ./sys -o -path ./tmp -o -path ./run \\) -prune \\
    -o -print; printf './%s\\n' boot dev proc sys tmp run; } | cpio -o -H newc >/boot/initrd.img
ln -sf initrd.img "/boot/initrd.img-$(uname -r)"
hostname kl-guest
ip link set lo up
# A test hook: a kernel booted with kl_guest_offline never answers again (as a variant
# without its network driver would), until the machine is power-cycled.
case " $(cat /proc/cmdline) " in
*" kl_guest_offline "*) echo "kl-guest: offline (kl_guest_offline)"; exit 0;;
esac
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
ip route add default via 10.0.2.2
echo "kl-guest: up, $(uname -r), boot_id $(cat /proc/sys/kernel/random/boot_id)"
"""

# Then dropbear in the foreground (-F), logging to the console (-E), public keys only (-s),
# restarted if it dies. A `reboot` (SIGTERM to init) stops everything, then restarts the
# machine.
INITTAB = """::sysinit:/bin/sh /etc/init.d/rcS
::respawn:/usr/sbin/dropbear -F -E -s -p 22 -r /etc/dropbear/dropbear_ed25519_host_key -P /run/dropbear.pid
::shutdown:/bin/echo kl-guest: going down
"""

ETC = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
    "etc/shadow": "root:*:19000:0:99999:7:::\n",
    "etc/group": "root:x:0:\n",
    "etc/shells": "/bin/sh\n",
    "etc/nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
    "etc/hosts": "127.0.0.1 localhost kl-guest\n",
    "etc/profile": "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n",
}


def cache() -> Path:
    return paths.cache_dir("sshguest")


# --- the packages ---------------------------------------------------------------------


def debs() -> list[Path]:
    """The .deb files, downloaded once into the cache."""
    found = apt.download(PACKAGES, paths.cache_dir("sshguest", "debs"))
    return [found[name] for name in PACKAGES]


def unpacked() -> Path:
    """The packages' files under one directory, unpacked once per set of .debs."""
    files = debs()
    digest = hashlib.sha256("\n".join(p.name for p in files).encode()).hexdigest()[:16]
    return apt.unpack(files, cache() / f"root-{digest}")


def _lib_dirs(root: Path) -> list[Path]:
    return [root / "usr/lib/x86_64-linux-gnu", root / "lib/x86_64-linux-gnu", *HOST_LIB_DIRS]


def _needed(path: Path) -> list[str]:
    with path.open("rb") as f:
        elf = ELFFile(f)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                return [str(tag.needed) for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
    return []


def libraries(root: Path, binaries: list[Path]) -> dict[str, Path]:
    """soname -> the file, for everything `binaries` link, transitively: the packages'
    own libraries first, then the host's."""
    found: dict[str, Path] = {}
    todo = [soname for b in binaries for soname in _needed(b)]
    while todo:
        soname = todo.pop()
        if soname in found:
            continue
        for d in _lib_dirs(root):
            if (d / soname).exists():
                found[soname] = (d / soname).resolve()
                todo += _needed(found[soname])
                break
        else:
            raise RuntimeError(f"the ssh guest's binaries link {soname}, found neither in the packages "
                               f"({', '.join(PACKAGES)}) nor in {', '.join(map(str, HOST_LIB_DIRS))}")
    return found


def run_unpacked(root: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run one of the unpacked binaries on the host (dropbearkey), with its libraries."""
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(str(d) for d in _lib_dirs(root)[:2]))
    return subprocess.run([str(root / argv[0]), *argv[1:]], env=env, capture_output=True, text=True,
                          check=True)


# --- the keys -------------------------------------------------------------------------


@dataclass(frozen=True)
class Keys:
    host_key: Path          # dropbear's format, what the guest serves
    host_public: str        # "ssh-ed25519 AAAA..."
    other_host_key: Path    # a second host key: "the remote's key changed"
    other_host_public: str
    client_key: Path        # OpenSSH private key, no passphrase (client_key.pub beside it)

    @property
    def client_public(self) -> str:
        return Path(f"{self.client_key}.pub").read_text().strip()


def _host_key(root: Path, path: Path) -> str:
    if not path.exists():
        tmp = Path(tempfile.mkdtemp(dir=path.parent)) / "key"
        run_unpacked(root, ["usr/bin/dropbearkey", "-t", "ed25519", "-f", str(tmp)])
        tmp.replace(path)
        tmp.parent.rmdir()
    out = run_unpacked(root, ["usr/bin/dropbearkey", "-y", "-f", str(path)]).stdout
    line = next(line for line in out.splitlines() if line.startswith("ssh-ed25519 "))
    return " ".join(line.split()[:2])  # without dropbear's comment


def guest_keys(root: Path) -> Keys:
    where = paths.cache_dir("sshguest", "keys")
    client = where / "client_ed25519"
    if not client.exists():
        tmp = Path(tempfile.mkdtemp(dir=where)) / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kernellab-test-client",
                        "-f", str(tmp)], check=True, capture_output=True)
        Path(f"{tmp}.pub").replace(f"{client}.pub")
        tmp.replace(client)  # last: the private key's presence says the pair is complete
        tmp.parent.rmdir()
    return Keys(where / "host_ed25519", _host_key(root, where / "host_ed25519"),
                where / "other_host_ed25519", _host_key(root, where / "other_host_ed25519"), client)


# --- the initramfs --------------------------------------------------------------------


def busybox_applets(busybox: Path) -> list[str]:
    """Where the applets go ("usr/bin/awk", ...), as busybox itself lists them (it is static:
    it runs on the host)."""
    out = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def userland_files(root: Path, k: Keys) -> dict[str, tuple[int, bytes]]:
    files: dict[str, tuple[int, bytes]] = {}
    for d in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "lib", "lib/x86_64-linux-gnu", "lib64",
              "etc", "etc/dropbear", "dev", "proc", "sys", "run", "var", "boot", "mnt"):
        files[d] = (_DIR, b"")
    files["tmp"] = (0o041777, b"")
    files["var/run"] = (_LINK, b"/run")
    files["root"] = (_DIR_SSH, b"")
    files["root/.ssh"] = (_DIR_SSH, b"")
    files["root/.ssh/authorized_keys"] = (_SECRET, (k.client_public + "\n").encode())
    files["etc/dropbear/dropbear_ed25519_host_key"] = (_SECRET, k.host_key.read_bytes())
    for name, text in ETC.items():
        files[name] = (_FILE, text.encode())
    files["etc/inittab"] = (_FILE, INITTAB.encode())
    files["etc/init.d"] = (_DIR, b"")
    files["etc/init.d/rcS"] = (_EXEC, RCS.encode())
    files["init"] = (_LINK, b"/bin/busybox")

    files["bin/busybox"] = (_EXEC, (root / "bin/busybox").read_bytes())
    for applet in busybox_applets(root / "bin/busybox"):
        files.setdefault(applet, (_LINK, b"/bin/busybox"))
    binaries = [root / b for b in BINARIES]
    for b in BINARIES:
        files[b] = (_EXEC, (root / b).read_bytes())
    files["usr/sbin/kexec"] = (_LINK, b"/sbin/kexec")  # merged-/usr systems have it here too
    for soname, path in libraries(root, binaries).items():
        files[f"lib/x86_64-linux-gnu/{soname}"] = (_EXEC, path.read_bytes())
    loader = Path(LOADER).resolve()
    files[f"lib/x86_64-linux-gnu/{loader.name}"] = (_EXEC, loader.read_bytes())
    files[LOADER.lstrip("/")] = (_LINK, f"/lib/x86_64-linux-gnu/{loader.name}".encode())
    return files


def initramfs() -> tuple[Path, Keys]:
    """The guest's initramfs (cached by its content) and the keys it was made with."""
    root = unpacked()
    k = guest_keys(root)
    data = build_cpio(userland_files(root, k))
    target = cache() / f"initramfs-{hashlib.sha256(data).hexdigest()[:20]}.cpio"
    if not target.exists():
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return target, k


# --- the guest ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def monitor_command(socket_path: Path, command: str) -> str:
    """A shell command that sends one command to QEMU's human monitor and waits until QEMU
    has taken it (the next prompt)."""
    code = ("import socket,sys\n"
            "s=socket.socket(socket.AF_UNIX)\n"
            "s.settimeout(10)\n"
            "s.connect(sys.argv[1])\n"
            "b=b''\n"
            "while b.count(b'(qemu)')<1:\n"
            "    b+=s.recv(4096)\n"
            "s.sendall(sys.argv[2].encode()+b'\\n')\n"
            "while b.count(b'(qemu)')<2:\n"
            "    c=s.recv(4096)\n"
            "    if not c: break\n"
            "    b+=c\n")
    return shlex.join([sys.executable, "-c", code, str(socket_path), command])


@dataclass
class SshGuest:
    port: int
    ssh_config: Path
    known_hosts: Path
    console_log: Path
    monitor: Path
    power_cycle_command: str    # resets the VM (as a power cycle), through QEMU's monitor
    keys: Keys
    proc: subprocess.Popen[bytes]
    workdir: Path
    host: str = HOST
    alias: str = ALIAS
    boot_s: float = 0.0     # from QEMU's start to the first ssh answer

    def ssh_argv(self, *command: str, known_hosts: Path | None = None, timeout_s: int = 5) -> list[str]:
        argv = ["ssh", "-F", str(self.ssh_config), "-o", f"ConnectTimeout={timeout_s}"]
        if known_hosts is not None:
            argv += ["-o", f"UserKnownHostsFile={known_hosts}"]
        return [*argv, self.alias, *command]

    def ssh(self, command: str, input: bytes | None = None, timeout: float = 120,
            known_hosts: Path | None = None, connect_timeout: int = 5) -> subprocess.CompletedProcess[bytes]:
        """`ssh -F CONFIG kl-guest COMMAND`, not checked."""
        argv = self.ssh_argv(command, known_hosts=known_hosts, timeout_s=connect_timeout)
        return subprocess.run(argv, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)

    def output(self, command: str, timeout: float = 120) -> str:
        result = self.ssh(command, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"ssh {self.alias} {command!r}: exit {result.returncode}: "
                               f"{result.stderr.decode(errors='replace').strip()}")
        return result.stdout.decode()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def sshd_answers(self, timeout: float = 1.0) -> bool:
        """Whether an ssh server sends its banner on the forwarded port now. (QEMU accepts
        every connection on the host side at once, and holds it open while the guest does
        not answer: a connection alone says nothing.)"""
        try:
            with socket.create_connection((self.host, self.port), timeout=timeout) as s:
                return s.recv(64).startswith(b"SSH-")
        except OSError:
            return False

    def wait_for_ssh(self, timeout: float = 120, unless_boot_id: str | None = None) -> float:
        """Poll until `ssh kl-guest true` answers; return the seconds it took. With
        unless_boot_id: until a kernel with another boot id answers (after a kexec or a
        reboot the old kernel may still answer for a while)."""
        start = time.monotonic()
        deadline = start + timeout
        last = "no ssh banner"
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"QEMU exited ({self.proc.returncode}); console:\n{self.console_tail()}")
            if not self.sshd_answers():
                time.sleep(0.2)
                continue
            command = "cat /proc/sys/kernel/random/boot_id" if unless_boot_id else "true"
            try:
                result = self.ssh(command, timeout=30, connect_timeout=10)
            except subprocess.TimeoutExpired:
                last = "ssh timed out"
                continue
            if result.returncode == 0 and (not unless_boot_id or result.stdout.decode().strip() != unless_boot_id):
                return time.monotonic() - start
            last = result.stderr.decode(errors="replace").strip() or f"boot id still {unless_boot_id}"
            time.sleep(0.2)
        raise TimeoutError(f"no ssh from the guest within {timeout:.0f} s (last: {last}); "
                           f"console:\n{self.console_tail()}")

    def console_size(self) -> int:
        return self.console_log.stat().st_size if self.console_log.exists() else 0

    def wait_for_console(self, text: str, timeout: float = 120, since: int | None = None) -> None:
        """Until `text` shows in the console log after its first `since` bytes (by default,
        what it held at the call)."""
        seen = self.console_size() if since is None else since
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text.encode() in self.console_log.read_bytes()[seen:]:
                return
            if not self.alive():
                raise RuntimeError(f"QEMU exited ({self.proc.returncode}); console:\n{self.console_tail()}")
            time.sleep(0.2)
        raise TimeoutError(f"no {text!r} on the console within {timeout:.0f} s; console:\n{self.console_tail()}")

    def boot_id(self) -> str:
        return self.output("cat /proc/sys/kernel/random/boot_id").strip()

    def console_tail(self, lines: int = 40) -> str:
        try:
            text = self.console_log.read_text(errors="replace")
        except OSError:
            return "(no console log)"
        return "\n".join(text.splitlines()[-lines:])

    def alternate_known_hosts(self) -> Path:
        """A known_hosts file that holds the OTHER host key for this guest's [127.0.0.1]:PORT:
        ssh with it must refuse the guest ("host key changed")."""
        path = self.workdir / "known_hosts.other"
        path.write_text(f"[{self.host}]:{self.port} {self.keys.other_host_public}\n")
        return path


def _write_ssh_config(workdir: Path, port: int, k: Keys) -> tuple[Path, Path]:
    known_hosts = workdir / "known_hosts"
    known_hosts.write_text(f"[{HOST}]:{port} {k.host_public}\n")
    config = workdir / "ssh_config"
    config.write_text(f"""Host {ALIAS}
    HostName {HOST}
    Port {port}
    User root
    IdentityFile {k.client_key}
    IdentitiesOnly yes
    IdentityAgent none
    UserKnownHostsFile {known_hosts}
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    UpdateHostKeys no
    CheckHostIP no
    BatchMode yes
    PasswordAuthentication no
    KbdInteractiveAuthentication no
    RequestTTY no
    ConnectTimeout 5
    ServerAliveInterval 5
    ServerAliveCountMax 3
    LogLevel ERROR
""")
    config.chmod(0o600)
    return config, known_hosts


def qemu_command(kernel: Path, initrd: Path, port: int, console_log: Path, monitor: Path,
                 append: str = "") -> list[str]:
    return ["qemu-system-x86_64", *QEMU_ARGS, "-nodefaults", "-no-user-config", "-display", "none",
            "-serial", f"file:{console_log}",
            "-monitor", f"unix:{monitor},server=on,wait=off",
            "-netdev", f"user,id=n0,hostfwd=tcp:{HOST}:{port}-:22",
            "-device", "virtio-net-pci,netdev=n0",
            "-kernel", str(kernel), "-initrd", str(initrd),
            "-append", " ".join(w for w in (CMDLINE, append) if w)]


@contextmanager
def ssh_guest(kernel: Path, initrd: Path, keys: Keys | None = None, append: str = "",
              boot_timeout: float = 180, wait: bool = True) -> Iterator[SshGuest]:
    """Start the guest; yield it once ssh answers (unless wait=False); stop QEMU at exit.
    keys: those `initrd` was made with (initramfs() returns both); by default the cached ones.
    append: more kernel command line."""
    keys_ = keys if keys is not None else guest_keys(unpacked())
    with tempfile.TemporaryDirectory(prefix="kl-sshguest-") as tmp:
        workdir = Path(tmp)
        console_log, monitor = workdir / "console.log", workdir / "monitor.sock"
        for attempt in range(3):
            port = free_port()
            config, known_hosts = _write_ssh_config(workdir, port, keys_)
            started = time.monotonic()
            with (workdir / "qemu.stderr").open("wb") as stderr:
                proc = subprocess.Popen(qemu_command(kernel, initrd, port, console_log, monitor, append),
                                        stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr)
            time.sleep(0.5)
            if proc.poll() is None or attempt == 2:
                break
            # Most likely the port was taken between free_port() and QEMU: another one.
        guest = SshGuest(port, config, known_hosts, console_log, monitor,
                         monitor_command(monitor, "system_reset"), keys_, proc, workdir)
        try:
            if proc.poll() is not None:
                raise RuntimeError("QEMU did not start: " + (workdir / "qemu.stderr").read_text(errors="replace"))
            if wait:
                guest.wait_for_ssh(boot_timeout)
                guest.boot_s = time.monotonic() - started
            yield guest
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
