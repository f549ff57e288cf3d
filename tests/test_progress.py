"""The progress display: what moves while kernellab builds, boots and measures, shown on a
terminal only; the build counts kbuild's objects, a run its milestones and metrics."""

import io
import os
import stat
from pathlib import Path

from rich.console import Console

import labfakes
from kernellab import build, progress
from kernellab.experiments import compare, lab
from kernellab.experiments.spec import Experiment, parse_short
from kernellab.guest.session import Session
from kernellab.store import Store
from labfakes import BOOT, FakeConsole, ListSink, agent_lines


class RecordingTask(progress.Task):
    def __init__(self) -> None:
        super().__init__(None, None)
        self.completed: list[float] = []
        self.advanced = 0
        self.totals: list[float | None] = []

    def advance(self, steps: float = 1) -> None:
        self.advanced += int(steps)

    def update(self, *, completed=None, total=None, description=None, note=None) -> None:
        if completed is not None:
            self.completed.append(completed)
        if total is not None:
            self.totals.append(total)


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=140), out


def test_nothing_is_drawn_when_stderr_is_not_a_terminal():
    out = io.StringIO()
    with progress.display(Console(file=out, force_terminal=False)):
        with progress.task("building", 10) as bar:
            bar.advance(3)
            assert bar._progress is None
    assert out.getvalue() == ""


def test_a_terminal_shows_each_task_and_clears_it_at_the_end():
    console, out = terminal()
    with progress.display(console):
        with progress.task("lab-minimal: compiling", 40, "objects") as bar:
            bar.update(completed=12)
            progress._shown.refresh()   # type: ignore[union-attr]
            assert "lab-minimal: compiling" in out.getvalue() and "12/40" in out.getvalue()
    assert progress._shown is None


def test_the_build_counts_the_objects_kbuild_compiles_as_make_runs(tmp_path):
    fake_make = tmp_path / "make"
    fake_make.write_text("#!/bin/sh\n"
                         "for i in 1 2 3; do echo \"  CC      kernel/f$i.o\"; done\n"
                         "echo '  HOSTCC  scripts/basic/fixdep'; sleep 0.7\n"
                         "echo '  AS      arch/x86/entry/entry_64.o'; echo '  LD      vmlinux.o'\n"
                         "echo '  CC [M]  not-a-quiet-line'; sleep 0.7\n")
    fake_make.chmod(fake_make.stat().st_mode | stat.S_IEXEC)
    bar = RecordingTask()
    wall, _user, _sys, rc, compiled = build._timed_make([str(fake_make)], dict(os.environ), tmp_path / "build.log",
                                                         bar)
    assert rc == 0 and compiled == 6   # what the build records: the bar's last count
    # Polled twice a second while make runs: 4 objects by the first sleep's end, 5 at the
    # second (LD links; "CC [M]" is a module, which lab kernels do not build, and counts too).
    assert bar.completed[0] >= 4 and bar.completed[-1] == 6
    assert bar.completed == sorted(bar.completed)


def test_the_expected_count_comes_from_kbuilds_records_of_the_last_build(tmp_path):
    assert build._objects_in(tmp_path) is None   # a new tree: not known
    for rel in ("kernel/.fork.o.cmd", "kernel/sched/.core.o.cmd", "scripts/basic/.fixdep.cmd", ".config"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert build._objects_in(tmp_path) == 2


def test_a_run_shows_its_milestones_then_the_metrics_the_agent_reports():
    bar = RecordingTask()
    watcher = lab._RunProgress("v", expected=2)
    watcher.bar = bar
    script = BOOT + agent_lines({"syscall.null": [200.0, 201.0], "proc.fork_exit": [5.0]})
    result = Session(ListSink(), watcher).read(FakeConsole(script))
    assert result.status == "ok"
    # first output, Linux version, freeing, init: one step each; then the metrics.
    assert bar.advanced == 4
    assert bar.totals == [2] and bar.completed == [0, 1, 2]


def test_the_metric_count_follows_the_runs_options():
    only = lab.RunOptions(cmdline_extra="KL_ONLY=syscall.null,proc.fork_exit")
    assert lab.expected_metrics(only) == 2
    plain, with_net = lab.expected_metrics(lab.RunOptions()), lab.expected_metrics(lab.RunOptions(with_groups=("net",)))
    assert with_net > plain > 20


def test_compare_shows_its_runs_on_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(lab, "prepare", lambda spec, machine=None: labfakes.prepared(spec))
    monkeypatch.setattr(lab, "ensure_built", lambda p, store, log=None, cold=False: labfakes.build(f"k-{p.spec.name}"))
    monkeypatch.setattr(lab, "initramfs_for", lambda p, workloads=(): Path("/nonexistent/initramfs-fake.cpio"))
    seen: list[str] = []

    def script(cmdline):
        seen.append(progress._shown.get_renderable() and _text(progress._shown))   # type: ignore[union-attr]
        return BOOT + agent_lines({"syscall.null": [200.0]})

    exp = Experiment("shown", [parse_short("a=lab-minimal"), parse_short("b=lab-minimal+boot:quiet")], mode="wall")
    how = compare.plan(exp, None, 2, 2, 60.0)
    how = compare.Plan(how.mode, how.min_runs, how.max_runs, how.options,
                       target=lambda p, b: labfakes.FakeTarget(script))
    console, _ = terminal()
    with progress.display(console):
        compare.run_experiment(exp, Store(tmp_path / "s.sqlite"), how, log=lambda m: None)
    assert "shown: runs" in seen[0] and "0/4" in seen[0]
    assert "2/4" in seen[2]


def _text(bars: progress.Progress) -> str:
    console, out = terminal()
    console.print(bars.get_renderable())
    return out.getvalue()
