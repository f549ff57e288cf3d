"""Adding a target is one module: this file registers one (`fakeboard:`, a board that boots
built kernels with the agent as init, here by way of the fake QEMU of tests/fakes) and runs
compare, sweep and bisect on it through the command line, and its refusals come from the
capabilities it declares, not from a test of its name."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from kernellab.targets import Capabilities, TargetInfo, Want, registry
from kernellab.targets.qemu import QemuTarget

CAPS = Capabilities(boots_kernels=True, measures_running=False, deterministic=True)


class FakeBoard:
    """One variant's boot on the board: the fake QEMU boots it, the board's name labels it."""
    name = "fakeboard"
    capabilities = CAPS

    def __init__(self, board: str, want: Want, boots: list[str]):
        self.board, self.boots = board, boots
        self.qemu = QemuTarget(want.profile, want.scratch_mib, "tcg")

    def describe(self, mode: str) -> TargetInfo:
        return TargetInfo(f"fake board {self.board}", {"board": self.board}, "the fake QEMU's icount")

    def start(self, kernel, agent, cmdline, mode, timeout_s):
        self.boots.append(str(kernel))
        return self.qemu.start(kernel, agent, cmdline, mode, timeout_s)


class FakeBoardSite:
    name = "fakeboard"
    machine = None
    capabilities = CAPS
    boots: list[str] = []

    def __init__(self, spec, options):
        self.spec, self.board = spec, spec.removeprefix("fakeboard:")

    def target(self, want, log):
        return FakeBoard(self.board, want, FakeBoardSite.boots)


@pytest.fixture
def board():
    registry.entries()   # kernellab's own first, as in any command
    registry.register("fakeboard:", FakeBoardSite, CAPS, "fakeboard:NAME")
    FakeBoardSite.boots = []
    try:
        yield FakeBoardSite.boots
    finally:
        registry.unregister("fakeboard:")


def targets_of_runs(lab) -> list[tuple[str, str]]:
    with sqlite3.connect(lab.store) as db:
        return [(t, json.loads(info)["label"]) for t, info in db.execute("SELECT target, target_info FROM runs")]


BAD = ("bad=tinyconfig+CONFIG_NET=y+CONFIG_UNIX=y+CONFIG_DEBUG_KERNEL=y+CONFIG_DEBUG_LIST=y"
       "+CONFIG_FAKE_SLOW=y")


def test_compare_sweep_and_bisect_run_on_a_target_the_tests_register(lab, capsys, board):
    out = lab.tmp / "report.json"
    assert lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y", "--target", "fakeboard:one",
                    "--format", "json", "-o", str(out)) == 0, capsys.readouterr().err
    rep = json.loads(out.read_text())
    null = next(m for m in rep["metrics"] if m["name"] == "syscall.null")
    assert null["delta_pct"]["b"] == pytest.approx(25.0)
    assert len(board) == 2
    assert set(targets_of_runs(lab)) == {("fakeboard", "fake board one")}
    capsys.readouterr()

    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "FAKE_SLOW", "--metric", "syscall.null",
                    "--format", "json", "--target", "fakeboard:one") == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert result["flips"][0]["effects"]["syscall.null"]["delta_pct"] == pytest.approx(25.0)
    swept = len(board)
    assert swept == 2 + result["boots"] and result["boots"] >= 2

    assert lab.main("bisect", "good=tinyconfig", BAD, "--metric", "syscall.null", "--format", "json",
                    "--target", "fakeboard:one") == 0, capsys.readouterr().err
    found = json.loads(capsys.readouterr().out)
    assert [(c["option"], c["value"]) for c in found["culprits"]] == [("CONFIG_FAKE_SLOW", "y")]
    assert len(board) == swept + found["boots"] and found["boots"] >= 2
    # Every run of the three commands booted on the board, none under QEMU as such.
    assert {t for t, _ in targets_of_runs(lab)} == {"fakeboard"}

    # A run is reused only on the target it was measured on: the same sweep again on the
    # board boots nothing; under QEMU it boots every probe anew.
    sweep = ("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "FAKE_SLOW", "--metric", "syscall.null",
             "--format", "json")
    assert lab.main(*sweep, "--target", "fakeboard:one") == 0
    assert json.loads(capsys.readouterr().out)["boots"] == 0
    assert lab.main(*sweep) == 0
    assert json.loads(capsys.readouterr().out)["boots"] == result["boots"]
    assert {t for t, _ in targets_of_runs(lab)} == {"fakeboard", "qemu"}


def test_what_the_board_cannot_do_is_refused_in_one_line_from_its_capabilities(lab, capsys, board):
    def refused(*args: str) -> str:
        assert lab.main(*args) == 2
        err = capsys.readouterr().err
        assert err.startswith("kernellab: error: ") and err.count("\n") == 1, err
        return err

    # It has no QEMU machine to give vCPUs to, no Dask workers, and measures no running kernel.
    assert "vcpus:2 is a QEMU machine's setting; --target fakeboard:x" in refused(
        "compare", "a=tinyconfig+vcpus:2", "--target", "fakeboard:x")
    assert "--target fakeboard:x is one machine" in refused(
        "compare", "a=tinyconfig", "--target", "fakeboard:x", "--workers", "2")
    assert "is the kernel a machine runs: measure it with --target local or --target ssh://HOST" in refused(
        "compare", "running", "--target", "fakeboard:x")
    assert "--accel kvm is for the qemu target, not --target fakeboard:x" in refused(
        "sweep", "tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "syscall.null", "--target", "fakeboard:x",
        "--accel", "kvm")
    # kernellab's own targets refuse the same way: a board lab's log is read, not booted; an ssh
    # host's probes are kexec'd from its own config, so a base of another config is refused
    # (nothing here reaches the ssh host: it is refused first).
    assert "--target lava:rpi4 reads what a board lab ran" in refused("compare", "a=tinyconfig",
                                                                      "--target", "lava:rpi4")
    assert ("variant tinyconfig: booting on ssh://nowhere.invalid needs a variant based on `running`"
            in refused("sweep", "tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "syscall.null",
                       "--target", "ssh://nowhere.invalid"))
    assert lab.runs() == [] and board == []


def test_a_workload_that_talks_to_the_host_runs_only_where_a_link_is_and_only_in_wall_mode(lab, capsys, tmp_path):
    """Derived from the capabilities, in one place: QEMU's guest gets a network device in
    wall mode and is refused in icount (the host's clock times the traffic: sweep refuses as
    compare does, before anything is built); a machine reached over the network runs it; a
    board in a lab's rack gives no link."""
    from kernellab import workloads
    from kernellab.targets import lava, qemu, running
    from workloadfiles import host_workload_file
    net = host_workload_file(tmp_path, "net")
    assert lab.main("sweep", "tinyconfig", "--toggle", "FAKE_SLOW", "--metric", "net.sent", "--workload", str(net),
                    "--mode", "icount") == 2
    assert ("workload net talks to the host over the network, which the host's clock times: wall mode only, not "
            "icount (pass --mode wall)") in capsys.readouterr().err
    assert not any(Path(lab.cache).glob("artifacts/*"))
    [inst] = [workloads.resolve(str(net))]
    with pytest.raises(Exception, match="wall mode only, not icount"):
        registry.check_workloads("qemu", qemu.CAPABILITIES, [inst], "icount")
    registry.check_workloads("qemu", qemu.CAPABILITIES, [inst], "wall")
    registry.check_workloads("local", running.CAPABILITIES, [inst], "wall")
    with pytest.raises(Exception, match="which --target lava:bbb does not give: run it in wall mode on --target "
                                        "qemu or --target local or --target ssh://HOST"):
        registry.check_workloads("lava:bbb", lava.CAPABILITIES, [inst], "wall")


def test_every_measuring_command_refuses_probes_where_the_target_cannot_boot_them(lab, capsys):
    """A target that measures only the kernel its machine runs cannot boot sweep's probes:
    one line, before anything is built."""
    for args in (("sweep", "tinyconfig", "--toggle", "FAKE_SLOW"), ("bisect", "good=tinyconfig", BAD),
                 ("noise-floor", "tinyconfig"), ("profile", "a=tinyconfig", "b=tinyconfig")):
        assert lab.main(*args, "--metric", "syscall.null", "--target", "local", "--mode", "wall") == 2 \
            if args[0] != "noise-floor" else lab.main(*args, "--target", "local") == 2
        err = capsys.readouterr().err
        assert f"{args[0]} boots probes of built kernels, and --target local measures only the kernel its " \
               "machine runs: use --target qemu or --target ssh://HOST" in err, err
    assert not any(Path(lab.cache).glob("artifacts/*"))


def test_an_unknown_target_names_every_scheme_registered(lab, capsys, board):
    assert lab.main("compare", "a=tinyconfig", "--target", "nowhere") == 2
    err = capsys.readouterr().err
    assert "unknown --target 'nowhere': use qemu, local, ssh://[user@]host[:port] or fakeboard:NAME" in err


def test_every_probe_of_a_noise_floor_runs_on_the_target_asked(lab, capsys, board):
    """The baseline and every neutral flip: a floor measured on one machine, never a
    baseline on the board and flips under QEMU."""
    from test_noise_floor import LAYOUT
    assert lab.main("noise-floor", "tinyconfig", "--options", LAYOUT, "--format", "json",
                    "--target", "fakeboard:one") == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert len(result["flips"]) == 8 and result["pct"]["proc.fork_exit"] == pytest.approx(4.0)
    # The base once (the boot that finds what it measures is the sweep's baseline) and the eight flips.
    assert len(board) == len(lab.runs()) == 9
    assert {t for t, _ in targets_of_runs(lab)} == {"fakeboard"}


def test_every_boot_of_a_study_run_and_of_its_sweep_is_on_the_target_asked(lab, capsys, board):
    from test_study import SWEPT, run_study, study_file
    report, _ = run_study(lab, capsys, study_file(lab, text=SWEPT), "--target", "fakeboard:one")
    (sweep,) = report["sweeps"].values()
    assert {f["option"] for f in sweep["flips"]} == {"CONFIG_FAKE_SLOW", "CONFIG_FAKE_BSS_KB"}
    assert {t for t, _ in targets_of_runs(lab)} == {"fakeboard"} and len(board) == len(lab.runs())
    # What the store holds of it is what the board measured: the report of a study stopped
    # here finds the sweep's probes there, and under QEMU does not.
    for where, found in ((("--target", "fakeboard:one"), 2), ((), 0)):
        out = lab.tmp / "so-far.json"
        lab.main("study", "run", str(study_file(lab, text=SWEPT)), "--measured-only", "--format", "json",
                 "-o", str(out), *where)
        capsys.readouterr()
        swept = list(json.loads(out.read_text())["sweeps"].values()) if out.exists() else []
        assert sum(len(s["flips"]) for s in swept) == found, where
        out.unlink(missing_ok=True)



PROGRAM_CAPS = Capabilities(boots_kernels=True, measures_running=False, deterministic=True, agent="program")


class ProgramBoard:
    """A machine that boots built kernels and runs the agent as a program there (as a kexec'd
    ssh host does): it records the agent and command line it is asked to boot with; the fake
    QEMU, which takes an initramfs, boots the kernel with an empty one."""
    name = "fakemachine"
    capabilities = PROGRAM_CAPS

    def __init__(self, want: Want, asked: list[tuple[str, str]], empty: Path):
        self.asked, self.empty = asked, empty
        self.qemu = QemuTarget(want.profile, want.scratch_mib, "tcg")

    def describe(self, mode):
        return TargetInfo("fake machine", {}, "the fake QEMU's icount")

    def start(self, kernel, agent, cmdline, mode, timeout_s):
        self.asked.append((str(agent), cmdline))
        return self.qemu.start(kernel, self.empty, cmdline, mode, timeout_s)


class FakeMachineSite:
    """A machine of its own (whose running kernel `running` means), posed by a scripted shell."""
    name = "fakemachine"
    capabilities = PROGRAM_CAPS
    machine = None
    asked: list[tuple[str, str]] = []
    empty = Path()

    def __init__(self, spec, options):
        self.spec = spec

    def target(self, want, log):
        return ProgramBoard(want, FakeMachineSite.asked, FakeMachineSite.empty)


@pytest.fixture
def machine(lab):
    """fakemachine:NAME, whose kernel runs the fake tree's release with a config of
    CONFIG_FAKE_SLOW=y (its system calls 25% slower), in a copy of the fake tree that has
    CONFIG_PROFILING (-> that tree)."""
    from kernellab import initramfs
    from kernellab.experiments import lab as stage
    from kernellab.experiments.spec import parse_short
    from kernellab.targets.running import RunningTarget
    from kernellab.targets.shell import LocalShell, Result
    from test_real_machines import ScriptedShell
    tree = lab.tmp / "profiling-tree"
    shutil.copytree(lab.tree, tree, ignore=shutil.ignore_patterns("__pycache__"))
    kconfig = tree / "Kconfig"
    kconfig.write_text(kconfig.read_text() + '\nconfig PROFILING\n\tbool "Profiling support"\n')
    running = stage.prepare(parse_short("running=tinyconfig+CONFIG_FAKE_SLOW=y", str(tree), "x86_64")).config.text
    facts = RunningTarget(LocalShell(), "local").facts.values | {"release": "6.1.0-fake", "machine": "x86_64"}
    shell = ScriptedShell({'echo "release=': Result(0, "".join(f"{k}={v}\n" for k, v in facts.items()).encode(), ""),
                           "config.gz": Result(0, b"/boot/config-6.1.0-fake\n" + running.encode(), "")})
    FakeMachineSite.machine = RunningTarget(shell, "ssh")
    FakeMachineSite.asked = []
    FakeMachineSite.empty = lab.tmp / "empty.cpio"
    FakeMachineSite.empty.write_bytes(initramfs.build_cpio({}))
    registry.entries()
    registry.register("fakemachine:", FakeMachineSite, PROGRAM_CAPS, "fakemachine:NAME")
    try:
        yield tree
    finally:
        registry.unregister("fakemachine:")


def test_a_profile_boots_on_the_target_with_its_agent_and_its_running_kernels_config(lab, capsys, machine,
                                                                                       monkeypatch):
    """profile --target: `running` is the target machine's kernel (not this machine's), the
    agent is the program that target runs, every boot is there; and a profile of the same
    kernels again is taken from the store, measured there."""
    from types import SimpleNamespace

    from kernellab import profiler
    # The fake QEMU's kernel has no tick profiler: its profile, and the symbols it is read by, faked.
    monkeypatch.setattr(profiler.Profile, "from_console", classmethod(lambda cls, console, origin: cls(4, {0: 5}, 5)))
    monkeypatch.setattr(profiler, "TextSymbols", lambda vmlinux: SimpleNamespace(start=0, function=lambda a: "f"))
    args = ("profile", "a=running", "b=running+CONFIG_DEBUG_KERNEL=y", "--metric", "syscall.null", "--repeats", "3",
            "--source", str(machine), "--format", "json", "--target", "fakemachine:x")
    assert lab.main(*args) == 0, capsys.readouterr().err
    kernels = json.loads(capsys.readouterr().out)["kernels"]
    # The machine's config (CONFIG_FAKE_SLOW=y: syscall.null 95 ns * 1.25) is what was built and measured.
    assert [k["metric_value"] for k in kernels] == [pytest.approx(118.75)] * 2
    asked = FakeMachineSite.asked
    assert len(asked) == 2 and {t for t, _ in targets_of_runs(lab)} == {"fakemachine"}
    for agent, cmdline in asked:
        assert Path(agent).read_bytes()[:4] == b"\x7fELF"   # the agent program, not an initramfs
        assert "profile=2 KL_PROFILE=1 KL_ONLY=syscall.null" in cmdline
    assert lab.main(*args) == 0
    assert [k["run"] for k in json.loads(capsys.readouterr().out)["kernels"]] == [k["run"] for k in kernels]
    assert len(asked) == 2


def test_a_sweep_and_a_compare_judge_by_the_floor_of_the_target_machines_running_kernel(lab, capsys, machine,
                                                                                       monkeypatch):
    """`running` is the target machine's kernel everywhere a command prepares it, the noise
    floor it looks up included: this machine's kernel (another release, another config) is
    never read. The floor measured for the machine's kernels (30% for syscall.null) makes the
    flip's 25% no difference."""
    from kernellab import targets
    from kernellab.experiments import floor
    from kernellab.experiments import placement as placing
    from kernellab.experiments.spec import parse_short
    from kernellab.targets import TargetOptions
    opened = targets.open

    def no_local(spec, *args, **kwargs):
        if spec == "local":
            raise AssertionError("this machine's kernel was read for a command on --target fakemachine:x")
        return opened(spec, *args, **kwargs)
    monkeypatch.setattr(targets, "open", no_local)
    base = parse_short("running+CONFIG_DEBUG_KERNEL=y", str(machine), "x86_64")
    prepared = placing.Placement(TargetOptions("fakemachine:x"), lambda line: None).prepare(base)
    floor.save(prepared, floor.Floor("running", "icount", {"syscall.null": 30.0}, {"syscall.null": "CONFIG_X"},
                                     ["CONFIG_X"], "by the test"))
    assert lab.main("sweep", "running+CONFIG_DEBUG_KERNEL=y", "--toggle", "FAKE_SLOW", "--metric", "syscall.null",
                    "--source", str(machine), "--format", "json", "--target", "fakemachine:x") == 0, \
        capsys.readouterr().err
    (flip,) = json.loads(capsys.readouterr().out)["flips"]
    effect = flip["effects"]["syscall.null"]
    assert (flip["option"], flip["value"]) == ("CONFIG_FAKE_SLOW", "n")
    assert effect["delta_pct"] == pytest.approx(-20.0)
    assert effect["verdict"]["kind"] == "no difference" and effect["verdict"]["floor_pct"] == 30.0, effect
    out = lab.tmp / "compare.json"
    assert lab.main("compare", "a=running+CONFIG_DEBUG_KERNEL=y", "b=running+CONFIG_FAKE_SLOW=n",
                    "--metric", "syscall.null", "--source", str(machine), "--format", "json", "-o", str(out),
                    "--target", "fakemachine:x") == 0, capsys.readouterr().err
    null = next(m for m in json.loads(out.read_text())["metrics"] if m["name"] == "syscall.null")
    assert null["verdict"]["b"]["kind"] == "no difference" and null["verdict"]["b"]["floor_pct"] == 30.0, null
