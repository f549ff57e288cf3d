"""--workload on another machine (an ssh target): the workloads file and the user's own
programs in bin/ beside it reach the machine as the agent does, through the shell's stdin
with the path a quoted script argument, in a directory named by their content; the
programs the workloads name are the machine's own, a missing one named with its Debian
package. Here a shell of this machine poses as a remote one (it is not `here`, so files are
copied) and runs the real agent; the ssh guest's test is in test_ssh_target.py."""

import json
import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from kernellab.agent.compile import agent_binary
from kernellab.errors import LabError
from kernellab.experiments import compare
from kernellab.guest.workloads import Provenance
from kernellab.targets import Capacity, running
from kernellab.targets.machine import OWNER_SCRIPT, Facts
from kernellab.targets.running import (
    CAPACITY_SCRIPT,
    COPY_SCRIPT,
    DF_SCRIPT,
    EXISTS_SCRIPT,
    AgentOptions,
    RunningTarget,
    capacity_of,
    df_free_kib,
)
from kernellab.targets.shell import LocalShell, Result, SshShell, parse_ssh_url, script
from workloadfiles import running_kernel_report, workload_file

PWNED = "pwned"
# Shell text that would leave a file behind if it ever ran as shell text.
HOSTILE = f"$(touch {PWNED}-1) `touch {PWNED}-2` ';touch {PWNED}-3' \"\n"


class PosingShell(LocalShell):
    """This machine's shell posing as a remote one: not `here`, so what the agent reads is
    copied; every script and what it was given on stdin is recorded."""
    here = False

    def __init__(self):
        self.where = "ssh://posing"
        self.sent: list[tuple[str, bytes | None]] = []

    def run(self, script, stdin=None, timeout_s=60.0):
        self.sent.append((script, stdin))
        return super().run(script, stdin, timeout_s)

    def popen(self, script):
        self.sent.append((script, None))
        return super().popen(script)

    def copies(self) -> list[tuple[list[str], bytes]]:
        """The copies made: (their script arguments, the data on stdin)."""
        return [(shlex.split(s.splitlines()[0])[2:], data or b"") for s, data in self.sent if s.endswith(COPY_SCRIPT)]


@pytest.fixture
def remote(tmp_path, monkeypatch):
    """The posing machine's directory for kernellab, with shell text in its name."""
    where = tmp_path / f"remote {HOSTILE.strip()}"
    monkeypatch.setattr(running, "AGENT_DIR", str(where))
    monkeypatch.chdir(tmp_path)
    return where


def bundle(tmp_path: Path, workloads: bytes, programs: dict[str, bytes]) -> Path:
    """A workloads file as guest.workloads.local_file leaves it: bin/ beside it."""
    root = tmp_path / "cache"
    (root / "bin").mkdir(parents=True, exist_ok=True)
    for name, data in programs.items():
        (root / "bin" / name).write_bytes(data)
        (root / "bin" / name).chmod(0o755)
    (root / "workloads").write_bytes(workloads)
    return root / "workloads"



def running_values(tmp_path, instances, shell) -> tuple[dict, dict]:
    """compare of the machine's running kernel with these workloads, its remote commands
    answered by `shell` (a machine posing as a remote): the report and each metric's values."""
    report = running_kernel_report(tmp_path, instances, shell)
    return report, {m["name"]: m["values"]["running"] for m in report["metrics"]}

def test_shells_say_whether_the_machine_is_this_one(tmp_path):
    """The decision to copy is the shell's declared one, not its name for messages."""
    assert LocalShell().here is True and SshShell(parse_ssh_url("ssh://nas")).here is False
    agent = agent_binary()
    assert RunningTarget(LocalShell(), "local").install(agent) == str(agent)   # used where it is
    options = AgentOptions({"KL_WORKLOADS": str(tmp_path / "workloads")}, 32, [])
    assert RunningTarget(LocalShell(), "local").place_workloads(options) is options


def test_the_workloads_and_programs_reach_the_remote_as_data(tmp_path, remote):
    content = f"kernellab-workloads 2\0{HOSTILE}\0\xff".encode("latin-1")
    program = f"#!/bin/sh\necho {HOSTILE}\n".encode()
    name = f"prog {HOSTILE.strip()}"
    local = bundle(tmp_path, content, {name: program})
    shell = PosingShell()
    target = RunningTarget(shell, "ssh://posing")
    options = AgentOptions({"KL_WORKLOADS": str(local), "KL_ONLY": "syscall.null"}, 32, [])

    placed = target.place_workloads(options)
    there = Path(placed.env["KL_WORKLOADS"])
    assert there.parent.parent == remote and there.name == "workloads" and there.parent.name.startswith("workloads-")
    assert placed.env["KL_ONLY"] == "syscall.null" and options.env["KL_WORKLOADS"] == str(local)
    assert there.read_bytes() == content
    assert (there.parent / "bin" / name).read_bytes() == program
    assert (there.parent / "bin" / name).stat().st_mode & stat.S_IXUSR
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(PWNED)) == []
    # The content went on stdin only, the paths as script arguments; the file last.
    copies = shell.copies()
    assert [args for args, _ in copies] == [[str(there.parent / "bin" / name), str(there.parent / "bin")],
                                            [str(there), str(there.parent)]]
    assert [data for _, data in copies] == [program, content]

    # Again: found by its content, nothing sent.
    shell.sent.clear()
    assert target.place_workloads(options).env["KL_WORKLOADS"] == str(there)
    assert [s.endswith(EXISTS_SCRIPT) for s, _ in shell.sent] == [True] and shell.copies() == []
    # Another program: another directory.
    (local.parent / "bin" / name).write_bytes(program + b"# changed\n")
    assert target.place_workloads(options).env["KL_WORKLOADS"] != str(there)


def test_over_ssh_the_copy_is_one_quoted_argument_and_the_content_stdin(tmp_path):
    """The argv the ssh target runs a copy with: the remote's shell gets `sh -c SCRIPT`, one
    word, and the script's parameters are the path and its directory, whatever they hold."""
    path = f"/tmp/kernellab/workloads-0123/bin/a {HOSTILE}"
    shell = SshShell(parse_ssh_url("ssh://root@nas:2222"))
    argv = shell.argv(script(COPY_SCRIPT, path, path.rpartition("/")[0]))
    assert argv[-3:-1] == ["--", "nas"]
    sh, dash_c, body = shlex.split(argv[-1])
    assert (sh, dash_c) == ("sh", "-c") and body.endswith(COPY_SCRIPT)
    assert shlex.split(body.removesuffix(f"\n{COPY_SCRIPT}")) == ["set", "--", path, path.rpartition("/")[0]]


def own_workload(tmp_path: Path, name: str, command: str, binaries: str = "") -> Path:
    """A script adding the user's own program's figure to its parameter."""
    return workload_file(tmp_path, name, 'echo "value: $(($1 + $(own-program)))"', command=command, extra=binaries)


def test_compare_with_a_workload_on_a_remote_machine(tmp_path, remote):
    """End to end with the real agent: the user's script ([files]) and program (bin/) run
    from the copy, the metric arrives with its provenance, a missing program names its
    package and the machine."""
    (tmp_path / "own-program").write_text("#!/bin/sh\necho 40\n")
    own = own_workload(tmp_path, "own", '["sh", "{workdir}/run.sh", "{n}"]', 'binaries = ["own-program"]')
    absent = own_workload(tmp_path, "absent", '["kl-not-installed"]')
    instances = compare.resolve_workloads([f"{own}:n=2", str(absent)])
    shell = PosingShell()
    report, values = running_values(tmp_path, instances, shell)
    assert values["own.value"]["median"] == 42
    assert values["absent.value"]["not_available"] == "kl-not-installed is not installed on ssh://posing: " \
                                                      "install Debian's dash"
    [run] = report["variants"][0]["runs"]
    by_label = {w["label"]: w for w in run["workloads"]}
    assert by_label["own:n=2"]["status"] == "ok"
    assert by_label["own:n=2"]["provenance"]["argv"] == ["sh", "{workdir}/run.sh", "2"]
    # The agent read the copy, not this machine's cache.
    [(agent_script, _)] = [(s, d) for s, d in shell.sent if "KL_WORKLOADS=" in s]
    [word] = [w for w in shlex.split(agent_script.splitlines()[0]) if w.startswith("KL_WORKLOADS=")]
    assert Path(word.removeprefix("KL_WORKLOADS=")).parent.parent == remote


@pytest.mark.parametrize("values,debian", [
    ({"os_id": "debian"}, True), ({"os_id": "ubuntu", "os_like": "debian"}, True),
    ({"os_id": "linuxmint", "os_like": "ubuntu debian"}, True), ({"os_id": "fedora"}, False),
    ({"os_id": "alpine"}, False), ({}, False)])
def test_whether_a_machine_takes_debians_packages_comes_from_its_os_release(values, debian):
    assert Facts(values).debian is debian


def test_a_machines_facts_name_its_distribution(tmp_path):
    """As os-release says (quotes removed), in the run's target details."""
    release = next((p for p in (Path("/etc/os-release"), Path("/usr/lib/os-release")) if p.exists()), None)
    if release is None:
        pytest.skip("this machine has no os-release")
    fields = dict(line.split("=", 1) for line in release.read_text().splitlines() if "=" in line)
    facts = RunningTarget(LocalShell(), "local").facts
    assert facts["os_id"] == fields["ID"].strip('"')
    assert facts.details()["os"] == fields["PRETTY_NAME"].strip('"')


def test_a_command_removes_older_copies_of_what_it_uses_and_nothing_else(tmp_path, remote):
    """Copies do not pile up on the user's machine: a second command with a new agent and
    new workloads leaves only its own copies; files whose names kernellab never writes stay,
    whatever they hold, and a name is never shell text."""
    remote.mkdir()
    others = ["agent-notours", "notes.txt", "agent-0123456789abcdeg", "agent-0123456789abcdef0",
              "Agent-0123456789abcdef", "agent-0123456789ABCDEF", f"agent-{HOSTILE.strip()}",
              "kernels-0123456789abcdef"]
    for name in others:
        (remote / name).write_text("the user's\n")
    (remote / "workloads-notours").mkdir()

    def command(agent: bytes, workloads: bytes) -> tuple[str, str]:
        """One command's copies (a RunningTarget lives for one command): the agent's path there, its
        workloads file's. Each then ages by a minute, as a command run earlier."""
        (tmp_path / "agent").write_bytes(agent)
        target = RunningTarget(PosingShell(), "ssh://posing")
        options = AgentOptions({"KL_WORKLOADS": str(bundle(tmp_path, workloads, {"prog": b"#!/bin/sh\n"}))}, 32, [])
        paths = target.copy(tmp_path / "agent", "agent"), target.place_workloads(options).env["KL_WORKLOADS"]
        for entry in remote.iterdir():
            os.utime(entry, (entry.stat().st_mtime - 60,) * 2)
        return paths

    first = command(b"agent one", b"kernellab-workloads 2\0one")
    second = command(b"agent two", b"kernellab-workloads 2\0two")
    assert Path(first[0]).exists() is False and Path(first[1]).parent.exists() is False
    assert Path(second[0]).read_bytes() == b"agent two" and Path(second[1]).read_bytes().endswith(b"two")
    assert sorted(p.name for p in remote.iterdir()) == sorted(
        [*others, "workloads-notours", Path(second[0]).name, Path(second[1]).parent.name])
    assert all((remote / name).read_text() == "the user's\n" for name in others)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(PWNED)) == []

    # Within one command, a copy it used is never removed: a third agent keeps the second's.
    target = RunningTarget(PosingShell(), "ssh://posing")
    (tmp_path / "agent").write_bytes(b"agent two")
    assert target.copy(tmp_path / "agent", "agent") == second[0]
    (tmp_path / "agent").write_bytes(b"agent three")
    third = target.copy(tmp_path / "agent", "agent")
    assert Path(second[0]).exists() and Path(third).exists()


# -- which package each program came from, asked of the remote's dpkg ---------------------

def hostile_program(tmp_path: Path) -> tuple[Path, str]:
    """A directory for PATH and a program in it, both named with shell text."""
    where = tmp_path / f"bin {HOSTILE.strip()}"
    where.mkdir()
    name = f"prog {HOSTILE.strip()}"
    (where / name).write_text("#!/bin/sh\necho 'value: 1'\n")
    (where / name).chmod(0o755)
    return where, name


def program_workloads(tmp_path: Path, *programs: str) -> list:
    """One workload a program, each running it with no argument."""
    return compare.resolve_workloads([str(workload_file(tmp_path, f"w{i}", "", command=json.dumps([p])))
                                      for i, p in enumerate(programs)])


def test_a_remotes_dpkg_is_asked_with_the_programs_as_script_arguments(tmp_path, monkeypatch):
    """Through ssh's own argv (an `ssh` on PATH that runs the remote's command line with sh,
    as the remote user's shell does): each program reaches the remote as one quoted
    parameter of a constant script, whatever it holds; it is found in the remote's PATH as
    the agent would find it, and said to be in no package; a name that is shell text stays
    inert. Asked once per program in a command."""
    fake = tmp_path / "fake-ssh"
    fake.mkdir()
    (fake / "ssh").write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\nfor last do :; done\n'
                              'exec sh -c "$last"\n')
    (fake / "ssh").chmod(0o755)
    where, name = hostile_program(tmp_path)
    monkeypatch.setenv("PATH", f"{fake}:{where}:{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    target = RunningTarget(SshShell(parse_ssh_url("ssh://nas")), "ssh://nas")
    target.__dict__["facts"] = Facts({"os_id": "debian"})
    absent = HOSTILE.strip()
    instances = program_workloads(tmp_path, name, absent)

    packages = target.installed(instances)
    assert packages.programs == {}
    assert packages.unknown == {name: f"{where}/{name} on ssh://nas is in no Debian package",
                                absent: f"{absent} is not found in PATH on ssh://nas"}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(PWNED)) == []
    assert len((fake / "calls").read_text().splitlines()) > 0
    (fake / "calls").unlink()
    assert target.installed(instances) == packages and not (fake / "calls").exists()   # asked once


def test_over_ssh_the_programs_asked_of_dpkg_are_quoted_arguments_of_a_constant_script():
    program = f"/opt/x {HOSTILE}"
    shell = SshShell(parse_ssh_url("ssh://root@nas:2222"))
    argv = shell.argv(script(OWNER_SCRIPT, program, "fio"))
    sh, dash_c, body = shlex.split(argv[-1])
    assert (sh, dash_c) == ("sh", "-c") and body.endswith(OWNER_SCRIPT)
    assert shlex.split(body.removesuffix(f"\n{OWNER_SCRIPT}")) == ["set", "--", program, "fio"]


def test_a_remote_program_from_a_debian_package_has_its_version(tmp_path):
    """The posing machine (this one) runs dash as sh: the package and version its dpkg gives."""
    if not shutil.which("dpkg-query") or Path("/bin/sh").resolve().name != "dash":
        pytest.skip("this machine's sh is not Debian's dash")
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dash"], capture_output=True,
                             text=True).stdout
    shell = PosingShell()
    target = RunningTarget(shell, "ssh://posing")
    target.__dict__["facts"] = Facts({"os_id": "debian"})
    [inst] = program_workloads(tmp_path, "sh")
    packages = target.installed([inst])
    assert (packages.programs, packages.versions, packages.unknown) == ({"sh": "dash"}, {"dash": version}, {})
    assert Provenance.of(inst, "ssh://posing", packages).line() == \
        f"workload w0: sh {version} from Debian's dash on ssh://posing: sh"
    assert [s.endswith(OWNER_SCRIPT) for s, _ in shell.sent] == [True]


# -- the room under the agent's workdir: df -Pk --------------------------------------------

HEADING = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n"


@pytest.mark.parametrize("line, kib", [
    ("/dev/sda1         30830592  12345678  17000000      43% /", 17000000),      # coreutils
    ("tmpfs                   102400         0    102400   0% /tmp", 102400),     # busybox
    ("/dev/mapper/vg-a b 100 50 50 50% /mnt/my disk", 50),                         # spaces in both names
    ("none 0 0 0 - /tmp", 0),                                                      # a size of 0: no capacity
])
def test_df_says_the_kib_available(line, kib):
    assert df_free_kib(HEADING + line + "\n", "/tmp", "ssh://nas") == kib


@pytest.mark.parametrize("said", [
    "",
    HEADING,
    HEADING + "/dev/sda1 100 50 50 50% /\n/dev/sdb1 100 50 50 50% /tmp\n",           # two lines
    HEADING + f"$(touch {PWNED}) 100 50 50 50% /\nrm -rf /\n",
    HEADING + "/dev/sda1 \u0661\u0660\u0660 50 \u0665\u0660 50% /\n",                   # digits, not ASCII
    HEADING + "/dev/sda1 100 50 -50 50% /\n",
    HEADING + "/dev/sda1 100 50 " + "9" * 21 + " 50% /\n",
    HEADING + "/dev/sda1 100 50 50 50% relative\n",
    HEADING + "/dev/sda1 100 50 50\x1b[2J 50% /\n",
    "df: /tmp: No such file or directory\n",
])
def test_df_output_that_is_not_posixs_is_refused_in_one_line(said):
    with pytest.raises(LabError, match=r"cannot read the free space under /tmp on ssh://nas: `df -Pk /tmp` "
                                       r"printed .*: check that df there is coreutils' or busybox's") as err:
        df_free_kib(said, "/tmp", "ssh://nas")
    assert "\n" not in str(err.value)


def test_a_remotes_free_space_is_asked_of_df_as_a_constant_script_with_the_directory_its_argument(tmp_path):
    """Over ssh: `df -Pk -- "$1"`, the directory a quoted parameter; run by the posing
    machine's shell, it agrees with this machine's statvfs."""
    argv = SshShell(parse_ssh_url("ssh://root@nas")).argv(script(DF_SCRIPT, "/tmp"))
    sh, dash_c, body = shlex.split(argv[-1])
    assert (sh, dash_c) == ("sh", "-c") and body.endswith(DF_SCRIPT)
    assert shlex.split(body.removesuffix(f"\n{DF_SCRIPT}")) == ["set", "--", "/tmp"]
    shell = PosingShell()
    workdir, free = RunningTarget(shell, "ssh://posing").workdir_free_mib()
    fs = os.statvfs("/tmp")
    assert workdir == "/tmp" and abs(free - (fs.f_bavail * fs.f_frsize >> 20)) < 64
    assert [s.endswith(DF_SCRIPT) for s, _ in shell.sent] == [True]


class AnsweringShell(PosingShell):
    """A posing machine whose answer to each of `answers`' scripts (df's, nproc's) is its text."""

    def __init__(self, answers: dict[str, str]):
        super().__init__()
        self.answers = answers

    def run(self, script, stdin=None, timeout_s=60.0):
        said = next((text for body, text in self.answers.items() if script.endswith(body)), None)
        if said is not None:
            self.sent.append((script, stdin))
            return Result(0, said.encode(), "")
        return super().run(script, stdin, timeout_s)


def test_on_a_remote_a_workload_without_room_is_not_available_and_the_next_runs(tmp_path, remote):
    big = workload_file(tmp_path, "big", 'echo "value: 1"', extra="[needs]\ndisk_mib = 20\n")
    after = workload_file(tmp_path, "after", 'echo "value: 2"')
    instances = compare.resolve_workloads([str(big), str(after)])
    ten_mib_free = AnsweringShell({DF_SCRIPT: HEADING + "tmpfs 102400 92160 10240 90% /tmp\n"})
    _, values = running_values(tmp_path, instances, ten_mib_free)
    assert values["big.value"] == {"not_available": "needs 20 MiB free under /tmp, the machine has 10 MiB"}
    assert values["after.value"]["median"] == 2


# -- the CPUs and memory the workloads get: nproc and MemTotal -------------------------------

@pytest.mark.parametrize("said, vcpus, mib", [
    ("2\nMemTotal:        8123456 kB\n", 2, 7933),
    ("64\nMemTotal:\t262144 kB", 64, 256),
])
def test_nproc_and_memtotal_say_the_machines_cpus_and_memory(said, vcpus, mib):
    assert capacity_of(said, "ssh://nas") == Capacity("the machine", vcpus, mib)


@pytest.mark.parametrize("said", [
    "",
    "2\n",
    "0\nMemTotal: 1024 kB\n",                                        # no CPU
    "2\nMemTotal: 1024 kB\nMemTotal: 2048 kB\n",                      # two lines of it
    "2\nMemTotal: 1024 MB\n",
    f"$(touch {PWNED})\nMemTotal: 1024 kB\n",
    "\u0662\nMemTotal: 1024 kB\n",                                     # a digit, not ASCII
    "2\nMemTotal: " + "9" * 21 + " kB\n",
    "2\nMemTotal: 1024 kB\x1b[2J\n",
    "nproc: not found\n",
])
def test_a_remotes_cpus_and_memory_that_are_not_nprocs_and_memtotals_are_refused_in_one_line(said):
    with pytest.raises(LabError, match=r"cannot read the CPUs and memory of ssh://nas: `nproc` and /proc/meminfo's "
                                       r"MemTotal printed .*: check that nproc there is") as err:
        capacity_of(said, "ssh://nas")
    assert "\n" not in str(err.value)


def test_a_remotes_cpus_and_memory_are_asked_of_a_constant_script_and_agree_with_this_machine(monkeypatch):
    """No value of kernellab's goes into the script; run by the posing machine's shell, it
    says what this machine's affinity and /proc/meminfo say, also where OpenMP's thread
    limit is in the environment (Dask's nanny leaves OMP_NUM_THREADS=1 in the process that
    starts a local cluster; nproc would print it)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OMP_THREAD_LIMIT", "1")
    assert script(CAPACITY_SCRIPT) == CAPACITY_SCRIPT   # no arguments, no `set --`
    shell = PosingShell()
    has = RunningTarget(shell, "ssh://posing").capacity()
    total = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))
    assert has == Capacity("the machine", len(os.sched_getaffinity(0)), total >> 10)
    assert [s for s, _ in shell.sent] == [CAPACITY_SCRIPT]


def test_a_remote_that_cannot_run_nproc_is_one_line():
    class NoNproc(PosingShell):
        def run(self, script, stdin=None, timeout_s=60.0):
            return Result(127, b"", "sh: 1: nproc: not found\n")

    with pytest.raises(LabError, match=r"`nproc` and /proc/meminfo could not be read on ssh://posing "
                                       r"\('sh: 1: nproc: not found'\)") as err:
        RunningTarget(NoNproc(), "ssh://posing").capacity()
    assert "\n" not in str(err.value)


def test_on_a_remote_a_workload_needing_more_cpus_or_memory_is_not_available_and_the_next_runs(tmp_path, remote):
    two = workload_file(tmp_path, "two", 'echo "value: 1"', extra="[needs]\nvcpus = 2\n")
    big = workload_file(tmp_path, "big", 'echo "value: 1"', extra="[needs]\nmemory_mib = 512\n")
    after = workload_file(tmp_path, "after", 'echo "value: 2"', extra="[needs]\nmemory_mib = 256\n")
    small = AnsweringShell({CAPACITY_SCRIPT: "1\nMemTotal:         262144 kB\n"})
    _, values = running_values(tmp_path, compare.resolve_workloads([str(two), str(big), str(after)]), small)
    assert values["two.value"] == {"not_available": "needs 2 vCPUs, the machine has 1"}
    assert values["big.value"] == {"not_available": "needs 512 MiB of memory, the machine has 256 MiB"}
    assert values["after.value"]["median"] == 2
    assert [s for s, _ in small.sent].count(CAPACITY_SCRIPT) == 1   # asked once, before the run


def test_on_a_remote_whose_cpus_answer_is_hostile_the_compare_is_one_line(tmp_path, remote):
    two = workload_file(tmp_path, "two", 'echo "value: 1"', extra="[needs]\nvcpus = 2\n")
    hostile = AnsweringShell({CAPACITY_SCRIPT: f"2; $(touch {PWNED})\nMemTotal: 1 kB\n"})
    with pytest.raises(LabError, match="cannot read the CPUs and memory of ssh://posing") as err:
        running_values(tmp_path, compare.resolve_workloads([str(two)]), hostile)
    assert "\n" not in str(err.value) and not list(tmp_path.glob(f"{PWNED}*"))
