"""resolve -> build -> run -> compare -> interrupt and resume, bisect and sweep, end to end
through the real command line, on the fake kernel tree and the fake QEMU (tests/fakes).

What the fakes do is in tests/fakes/kernel/Kconfig (the symbols) and the docstring of
tests/fakes/qemu/qemu-system-x86_64 (the values each config gives): CONFIG_FAKE_SLOW makes
the system calls 25% slower and adds 4 KiB of text; CONFIG_FAKE_BSS_KB sizes vmlinux's bss;
CONFIG_FAKE_PANIC and _HANG fail after CONFIG_FAKE_FAIL_AFTER samples; CONFIG_FAKE_BROKEN
breaks the build; CONFIG_FAKE_REAL_AGENT runs the real agent.
"""

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest


def report(lab, capsys, *variants, extra=(), expect=0):
    out = lab.tmp / "report.json"
    rc = lab.main("compare", *variants, "--format", "json", "-o", str(out), *extra)
    err = capsys.readouterr().err
    assert rc == expect, err
    return json.loads(out.read_text()) if out.exists() else None, err


def metric(rep, name):
    return next(m for m in rep["metrics"] if m["name"] == name)


def median(rep, name, variant):
    return metric(rep, name)["values"][variant]["median"]


# -- resolve -------------------------------------------------------------------------

def test_resolve_reports_what_kconfig_dropped_selected_and_chose(lab, capsys):
    assert lab.main("resolve", "x=tinyconfig+CONFIG_UNIX=y", "--format", "json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source_version"] == "6.1.0-fake"
    assert [(d["option"], d["asked"], d["got"]) for d in out["dropped_options"]] == [("CONFIG_UNIX", "y", "n")]

    # With what UNIX depends on, nothing is dropped; PROVE_LOCKING selects LOCKDEP; the
    # last =y of a choice wins over tinyconfig's (KERNEL_XZ).
    assert lab.main("resolve", "y=tinyconfig+CONFIG_NET=y+CONFIG_UNIX=y+CONFIG_DEBUG_KERNEL=y"
                    "+CONFIG_PROVE_LOCKING=y+CONFIG_KERNEL_GZIP=y", "--print-config") == 0
    config = capsys.readouterr().out.splitlines()
    for line in ("CONFIG_UNIX=y", "CONFIG_LOCKDEP=y", "CONFIG_KERNEL_GZIP=y", "# CONFIG_KERNEL_XZ is not set"):
        assert line in config

    assert lab.main("build", "x=tinyconfig+CONFIG_UNIX=y") == 0
    assert "asked CONFIG_UNIX=y, got n" in capsys.readouterr().err

    assert lab.main("resolve", "z=tinyconfig+CONFIG_UNIXX=y") == 2
    assert "unknown option CONFIG_UNIXX in Linux 6.1.0-fake; did you mean CONFIG_UNIX?" in capsys.readouterr().err


def test_compare_says_what_a_users_base_config_cannot_hold(lab, capsys, tmp_path):
    """A hand-written base: DEBUG_LIST without the DEBUG_KERNEL it depends on. The
    comparison runs on what olddefconfig makes of it, and says so first."""
    base = tmp_path / "mine.config"
    base.write_text("CONFIG_NET=y\nCONFIG_UNIX=y\nCONFIG_DEBUG_LIST=y\n")
    _, err = report(lab, capsys, f"mine={base}", "ref=tinyconfig")
    [line] = [w for w in err.splitlines() if "cannot hold" in w]
    assert line.startswith(f"· mine: warning: {base}: 1 option(s) cannot hold in Linux 6.1.0-fake x86_64")
    assert line.endswith("CONFIG_DEBUG_LIST=y -> n (depends on DEBUG_KERNEL)")

    # A select names the options that select it now, not the whole select list.
    base.write_text("CONFIG_DEBUG_KERNEL=y\nCONFIG_PROVE_LOCKING=y\n# CONFIG_DEBUG_SPINLOCK is not set\n")
    _, err = report(lab, capsys, f"mine={base}", "ref=tinyconfig")
    [line] = [w for w in err.splitlines() if "cannot hold" in w]
    assert line.endswith("CONFIG_DEBUG_SPINLOCK=n -> y (selected by PROVE_LOCKING)")


# -- build ---------------------------------------------------------------------------

def test_build_gives_image_and_sizes_and_a_second_identical_build_is_cached(lab, capsys):
    assert lab.main("build", "tinyconfig", "--format", "json") == 0
    first = json.loads(capsys.readouterr().out)
    image = lab.cache / "artifacts" / first["key"][:20] / "bzImage"
    assert first["cached"] is False and first["image"] == str(image)
    assert first["image_bytes"] == image.stat().st_size > 0
    assert image.read_bytes().startswith(b"FAKE-LINUX-IMAGE 1\n")
    # Berkeley sizes of the ELF vmlinux: bss holds CONFIG_FAKE_BSS_KB (16 KiB by default).
    assert first["text"] > 0 and first["data"] >= 8 << 10 and first["bss"] >= 16 << 10
    log = image.parent / "build.log"
    assert "Kernel: arch/x86/boot/bzImage is ready" in log.read_text()
    stamp = log.stat().st_mtime_ns

    assert lab.main("build", "again=tinyconfig", "--format", "json") == 0
    second = json.loads(capsys.readouterr().out)
    assert second["cached"] is True and second["key"] == first["key"]
    assert {k: second[k] for k in ("text", "data", "bss", "image_bytes")} == \
        {k: first[k] for k in ("text", "data", "bss", "image_bytes")}
    assert log.stat().st_mtime_ns == stamp  # make did not run again

    # A config that differs only in the size of bss: exactly that much more bss.
    assert lab.main("build", "big=tinyconfig+CONFIG_FAKE_BSS_KB=80", "--format", "json") == 0
    big = json.loads(capsys.readouterr().out)
    assert big["cached"] is False
    assert (big["bss"] - first["bss"], big["data"], big["text"]) == (64 << 10, first["data"], first["text"])



def _compiled(build: dict) -> set[str]:
    log = (Path(build["artifacts"]) / "build.log").read_text()
    return set(re.findall(r"^  CC      (\S+)$", log, re.MULTILINE))


def test_cold_builds_compile_everything_without_ccache_and_nothing_boots_meanwhile(lab, capsys):
    """An experiment with cold_builds times builds that compiled from scratch: the cached
    build (made with ccache) is made again, and a variant that shares the build tree with
    the one before compiles every object, not only those its option changes."""
    from kernellab.toolchain import ccache_counts
    # A ccache of its own: the fake labs' shared one counts the compiles of tests that run
    # meanwhile on another pytest-xdist worker.
    (lab.cache / "ccache").unlink()
    (lab.cache / "ccache").mkdir()
    assert lab.main("build", "tinyconfig", "--format", "json") == 0
    warm = json.loads(capsys.readouterr().out)
    exp = lab.tmp / "cold.toml"
    exp.write_text('cold_builds = true\n[[variant]]\nname = "a"\nbase = "tinyconfig"\n'
                   '[[variant]]\nname = "b"\nbase = "tinyconfig"\noptions = ["CONFIG_FAKE_SLOW=y"]\n')
    before = ccache_counts(str(lab.cache / "ccache"))
    rep, err = report(lab, capsys, "--experiment", str(exp))
    assert ccache_counts(str(lab.cache / "ccache")) == before    # no compiler call went through ccache
    assert "a: building again from scratch, to time it: the cached build was not cold" in err
    assert "a: the same image, byte for byte, as the cached build" in err
    assert "while" not in err.split("b: built")[0].split("a: built")[1]   # a did not boot while b built
    a, b = ({v["name"]: v["build"] for v in rep["variants"]}[n] for n in ("a", "b"))
    assert a["cold"] and b["cold"] and a["key"] == warm["key"]
    assert _compiled(a) == _compiled(warm) and _compiled(a) <= _compiled(b)
    with sqlite3.connect(lab.store) as db:   # the store holds the record of the build the cache holds
        (record,) = db.execute("SELECT record FROM builds WHERE key = ?", (warm["key"],)).fetchone()
    assert json.loads(record)["cold"] is True
    assert lab.main("show", str(lab.tmp / "report.json")) == 0
    assert "built -j" in (shown := capsys.readouterr().out) and "from scratch without ccache (timed cold)" in shown
    # Cold builds are in the cache now: asked again, nothing is built.
    _, err = report(lab, capsys, "--experiment", str(exp))
    assert "a: cached" in err and "b: cached" in err
    # One build timed from scratch, from the command line.
    assert lab.main("build", "c=tinyconfig+CONFIG_FAKE_BSS_KB=24", "--cold") == 0
    out = capsys.readouterr().out
    assert out.startswith("c: built in ") and ", from scratch without ccache;" in out


def test_a_builds_cpu_time_is_makes_alone(lab, capsys, monkeypatch):
    """Another child of kernellab that ends while make runs (a QEMU booting an earlier
    variant) spends CPU time that is not the build's."""
    monkeypatch.setenv("KERNELLAB_FAKE_MAKE_SLEEP", "3")
    burner = threading.Thread(target=subprocess.run, args=(
        [sys.executable, "-c", "import time\nwhile time.process_time() < 1.5: pass"],))
    burner.start()
    assert lab.main("build", "tinyconfig+CONFIG_FAKE_BSS_KB=24", "--format", "json") == 0
    burner.join()
    built = json.loads(capsys.readouterr().out)
    assert built["wall_s"] > 3 and built["user_s"] + built["sys_s"] < 1.5

def test_build_error_exits_2_with_one_line_naming_the_error(lab, capsys):
    assert lab.main("build", "tinyconfig+CONFIG_FAKE_BROKEN=y") == 2
    captured = capsys.readouterr()
    # Progress lines ("· building ..."), then the error in one line.
    lines = [line for line in captured.err.splitlines() if not line.startswith("· ")]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("kernellab: error: build failed: ")
    assert "drivers/fake/broken.c:7:16: error: implicit declaration of function" in lines[0]
    assert "(full log: " in lines[0] and captured.out == ""

    # In wall mode compare builds everything before it boots anything: no guest time spent.
    _, err = report(lab, capsys, "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_BROKEN=y", extra=("--mode", "wall"),
                    expect=2)
    assert "build failed" in err and lab.runs() == []
    # In icount, a boots while b builds: its run completes and stays in the store, its
    # table was shown, and the build error is still the one line the command ends with.
    _, err = report(lab, capsys, "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_BROKEN=y", expect=2)
    assert [r["status"] for r in lab.runs()] == ["ok"]
    assert "first look (a measured" in err and err.strip().splitlines()[-1].startswith("kernellab: error: build failed")


# -- compare -------------------------------------------------------------------------

def test_compare_shows_the_slowdown_and_the_size_difference(lab, capsys):
    rep, err = report(lab, capsys, "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y+CONFIG_FAKE_BSS_KB=80")
    assert rep["mode"] == "icount" and rep["runs_per_variant"] == {"a": 1, "b": 1}
    assert [r["status"] for r in lab.runs()] == ["ok", "ok"]

    null = metric(rep, "syscall.null")
    assert (median(rep, "syscall.null", "a"), median(rep, "syscall.null", "b")) == (95.0, 118.75)
    assert null["delta_pct"]["b"] == pytest.approx(25.0)
    assert null["comparison"]["b"]["direction"] == "worse"
    assert metric(rep, "proc.fork_exit")["delta_pct"]["b"] == pytest.approx(25.0)
    assert metric(rep, "crypto.aes256cbc_user")["delta_pct"]["b"] == 0  # not slowed
    assert median(rep, "boot.freeing_unused.printk", "b") > median(rep, "boot.freeing_unused.printk", "a")

    # Sizes (KiB): slowpath.o is 4 KiB of text, FAKE_BSS_KB 16 -> 80 is 64 KiB of bss.
    assert median(rep, "size.text", "b") - median(rep, "size.text", "a") == pytest.approx(4.0)
    assert median(rep, "size.bss", "b") - median(rep, "size.bss", "a") == pytest.approx(64.0)
    assert median(rep, "size.data", "b") == median(rep, "size.data", "a")
    # The kernel's "Memory:" line follows the image it booted.
    assert median(rep, "mem.kernel.bss", "b") - median(rep, "mem.kernel.bss", "a") == 64
    # Without CONFIG_UNIX the agent cannot measure unix sockets, and the report says why.
    assert metric(rep, "ipc.unix_rtt")["values"]["a"] == {"not_available": "needs CONFIG_UNIX"}


def test_default_experiment_runs_on_the_fake_tree(lab, capsys):
    """`compare` without variants: lab-minimal against lab-minimal + debug-kernel, with
    kernellab's own fragments, all of whose options the fake Kconfig has."""
    rep, _ = report(lab, capsys)
    assert [v["name"] for v in rep["variants"]] == ["lab-minimal", "debug"]
    assert all(v["dropped_options"] == [] for v in rep["variants"])
    # lockdep (x1.5) and SLUB red zones (x1.2) and list checks (x1.01) on every fork.
    assert metric(rep, "proc.fork_exit")["delta_pct"]["debug"] == pytest.approx(81.8)
    assert median(rep, "size.bss", "debug") > median(rep, "size.bss", "lab-minimal") + 100  # lockdep's tables
    assert "needs" not in json.dumps(metric(rep, "ipc.unix_rtt")["values"])  # lab-minimal has UNIX


# -- failing guests --------------------------------------------------------------------

def test_a_panicking_variant_is_marked_panic_and_keeps_its_samples(lab, capsys):
    rep, err = report(lab, capsys, "p=tinyconfig+CONFIG_FAKE_PANIC=y+CONFIG_FAKE_FAIL_AFTER=5", expect=1)
    [run] = lab.runs()
    assert run["status"] == "panic"
    assert run["reason"] == "Kernel panic - not syncing: fake panic (CONFIG_FAKE_PANIC=y)"
    # The first metric's first five repeats arrived before the panic, and are kept.
    assert [m for m, _ in lab.samples(run["id"]) if not m.startswith(("boot.", "mem."))] == ["syscall.null"] * 5
    assert metric(rep, "syscall.null")["values"]["p"]["n"] == 5
    assert f"p run {run['id']} panic: Kernel panic" in err


def test_a_hanging_variant_is_stopped_by_the_timeout(lab, capsys):
    start = time.monotonic()
    rep, err = report(lab, capsys, "h=tinyconfig+CONFIG_FAKE_HANG=y", extra=("--timeout", "3"), expect=1)
    assert time.monotonic() - start < 10
    [run] = lab.runs()
    assert (run["status"], run["reason"]) == ("timeout", "no end record after 3 s; killed")
    assert metric(rep, "syscall.null")["values"]["h"]["n"] == 3
    assert "h run 1 timeout" in err


def test_a_sysctl_the_kernel_does_not_know_fails_the_run(lab, capsys):
    rep, err = report(lab, capsys, "good=tinyconfig+CONFIG_PROC_FS=y+CONFIG_PROC_SYSCTL=y+sysctl:vm.swappiness=10",
                      "bad=tinyconfig+CONFIG_PROC_FS=y+CONFIG_PROC_SYSCTL=y+sysctl:vm.swapiness=10", expect=1)
    statuses = {r["name"]: (r["status"], r["reason"]) for r in lab.runs()}
    assert statuses["good"] == ("ok", "")
    assert statuses["bad"][0] == "bad-sysctl"
    assert "the kernel did not set sysctl vm.swapiness=10" in statuses["bad"][1]
    assert [v["sysctls"] for v in rep["variants"]] == [{"vm.swappiness": "10"}, {"vm.swapiness": "10"}]


# -- interrupted and resumed -----------------------------------------------------------

def test_an_interrupted_run_keeps_its_samples_and_the_rerun_reuses_the_build(lab, capsys, monkeypatch):
    # The fake guest has kernellab killed (SIGTERM, as `kill PID` does) after its 4th
    # sample (and half a second, for kernellab to store it).
    monkeypatch.setenv("FAKE_QEMU_SIGNAL_PARENT", "TERM:4")
    assert lab.main("compare", "s=tinyconfig") == 130
    err = capsys.readouterr().err
    assert "interrupted (SIGTERM); every sample measured so far is in the store" in err
    [run] = lab.runs()
    assert (run["status"], run["reason"]) == ("interrupted", "interrupted (SIGTERM)")
    kept = [m for m, _ in lab.samples(run["id"])]
    assert [m for m in kept if not m.startswith(("boot.", "mem."))] == ["syscall.null"] * 4
    # The milestones the boot reached and its console log are kept too.
    assert "boot.agent_ready.printk" in kept and "mem.kernel.bss" in kept
    assert lab.main("log", str(run["id"])) == 0
    assert "Run /init as init process" in capsys.readouterr().out

    monkeypatch.delenv("FAKE_QEMU_SIGNAL_PARENT")
    assert lab.main("compare", "s=tinyconfig") == 0
    err = capsys.readouterr().err
    assert "s: cached" in err and "building" not in err
    first, second = lab.runs()
    assert first["id"] == run["id"] and first["status"] == "interrupted"
    assert second["status"] == "ok" and second["build_key"] == first["build_key"]

    assert lab.main("runs", "--format", "json") == 0
    listing = json.loads(capsys.readouterr().out)
    assert [(r["run"], r["status"]) for r in listing] == [(second["id"], "ok"), (first["id"], "interrupted")]


def test_in_icount_a_built_variant_boots_while_the_next_one_builds(lab, capsys, monkeypatch):
    # Each link held 3 s: b's build outlasts the start of a's boot however loaded the
    # machine is (a cold run of the whole suite once started a's boot 34 ms after a fake
    # build of b that took well under a second had ended).
    monkeypatch.setenv("KERNELLAB_FAKE_MAKE_SLEEP", "3")
    rc = lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_DATA_KB=16", "--format", "json")
    err = capsys.readouterr().err
    assert rc == 0, err
    db = sqlite3.connect(lab.store)
    started = dict(db.execute("SELECT v.name, r.started FROM runs r JOIN variants v ON v.id = r.variant_id"))
    db.close()
    b_built = max((lab.cache / "artifacts").glob("*/build.json"), key=lambda f: f.stat().st_mtime).stat().st_mtime
    assert started["a"] < b_built < started["b"]
    # a's table is shown on stderr as soon as a is measured; the report has both.
    assert "first look (a measured; the full table follows)" in err


def _join_compare_threads(timeout_s=30):
    for t in threading.enumerate():
        if t.name.startswith("ThreadPoolExecutor"):
            t.join(timeout_s)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="on one core the variants boot one after the other")
def test_a_kill_during_parallel_runs_stops_them_and_marks_them_interrupted(lab, capsys, monkeypatch):
    # Two variants boot side by side (icount, 2 cores; built already, so neither boots
    # while the other builds); one guest has kernellab killed.
    assert lab.main("build", "tinyconfig") == 0 and lab.main("build", "tinyconfig+CONFIG_FAKE_SLOW=y") == 0
    marker = lab.tmp / "killed-once"
    monkeypatch.setenv("FAKE_QEMU_SIGNAL_PARENT", f"TERM:4:{marker}")
    try:
        rc = lab.main("compare", "a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y")
        returned = time.time()
    finally:
        _join_compare_threads()
    capsys.readouterr()
    assert rc == 130
    assert [r["status"] for r in lab.runs()] == ["interrupted", "interrupted"]
    assert returned - (marker.stat().st_mtime + 0.5) < 1.0  # stopped at once, not when the guests ended


# -- attribution -----------------------------------------------------------------------

BAD = ("bad=tinyconfig+CONFIG_NET=y+CONFIG_UNIX=y+CONFIG_DEBUG_KERNEL=y+CONFIG_DEBUG_LIST=y"
       "+CONFIG_FAKE_SLOW=y+CONFIG_FAKE_DATA_KB=16")


def test_bisect_names_the_slow_option_resumes_and_a_rerun_reuses_every_probe(lab, capsys, monkeypatch):
    args = ("good=tinyconfig", BAD, "--metric", "syscall.null", "--format", "json")
    # Killed during its first probe's boot: that probe's build is kept, its run is not used.
    monkeypatch.setenv("FAKE_QEMU_SIGNAL_PARENT", f"TERM:1:{lab.tmp / 'killed-once'}")
    assert lab.main("bisect", *args) == 130
    capsys.readouterr()
    assert [r["status"] for r in lab.runs()] == ["interrupted"]

    monkeypatch.delenv("FAKE_QEMU_SIGNAL_PARENT")
    assert lab.main("bisect", *args) == 0
    first = json.loads(capsys.readouterr().out)
    assert [(c["option"], c["value"]) for c in first["culprits"]] == [("CONFIG_FAKE_SLOW", "y")]
    culprit = first["culprits"][0]
    # (The agent prints three decimals.)
    assert culprit["alone_on_good"] == pytest.approx(95 * 0.25, abs=0.002)
    assert culprit["removed_from_bad"] == pytest.approx(95 * 1.01 * 0.25, abs=0.002)
    # DEBUG_LIST's 1% is below the 2% threshold: found as such, not as a culprit.
    assert first["below_threshold"] == pytest.approx(95 * 0.01, abs=0.002)
    assert (first["good"], first["bad"]) == (95.0, pytest.approx(95 * 1.25 * 1.01, abs=0.002))
    probes = len(first["probes"])
    assert probes >= 5 and first["probes"][0]["built"] is False  # the interrupted bisect built it
    # A probe asking what an earlier one asked (the last halving and the culprit alone)
    # reuses its kernel and runs: one build and boot per distinct request.
    distinct = {p["label"].rsplit("@", 1)[1] for p in first["probes"]}
    assert first["builds"] == sum(p["built"] for p in first["probes"]) == len(distinct) - 1
    # Each probe built now says where (kernellab.treepool) and what a tree copy cost.
    assert all(p["tree"] and p["copy_s"] >= 0 for p in first["probes"] if p["built"])
    assert first["boots"] == len(distinct)

    assert lab.main("bisect", *args) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["builds"], again["boots"]) == (0, 0)
    assert again["culprits"] == first["culprits"]
    assert [p["label"] for p in again["probes"]] == [p["label"] for p in first["probes"]]


def test_sweep_runs_the_cheapest_flips_first(lab, capsys):
    """The order comes from the .cmd files of the shared build tree: FAKE_SLOW is named by
    no object of the baseline, DEBUG_ATOMIC_SLEEP by kernel/sched.o, DEBUG_LIST by every
    object that includes <linux/list.h>."""
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y",
                    "--toggle", "DEBUG_LIST,DEBUG_ATOMIC_SLEEP,FAKE_SLOW",
                    "--metric", "syscall.null", "--format", "json") == 0
    result = json.loads(capsys.readouterr().out)
    flips = [(f["option"], f["rebuild_objects"]) for f in result["flips"]]
    assert [o for o, _ in flips] == ["CONFIG_FAKE_SLOW", "CONFIG_DEBUG_ATOMIC_SLEEP", "CONFIG_DEBUG_LIST"]
    assert [n for _, n in flips][:2] == [0, 1] and flips[2][1] >= 5
    effects = {f["option"]: f["effects"]["syscall.null"]["delta_pct"] for f in result["flips"]}
    assert effects == {"CONFIG_FAKE_SLOW": pytest.approx(25.0), "CONFIG_DEBUG_ATOMIC_SLEEP": 0,
                       "CONFIG_DEBUG_LIST": pytest.approx(1.0)}


def test_a_sweep_judges_its_flips_by_the_noise_floor_as_compare_judges_a_cell(lab, capsys):
    """--noise-floor: DEBUG_LIST's +1% syscall.null is no difference within a 2% floor, as a
    compare cell of the same figures would be; FAKE_SLOW's +25% still is one."""
    floor = lab.tmp / "floor.toml"
    floor.write_text('[floor]\n"syscall.null" = 2.0\n')
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "DEBUG_LIST,FAKE_SLOW",
                    "--metric", "syscall.null", "--noise-floor", str(floor), "--format", "json") == 0
    flips = json.loads(capsys.readouterr().out)["flips"]
    verdicts = {f["option"]: f["effects"]["syscall.null"]["verdict"] for f in flips}
    assert verdicts["CONFIG_DEBUG_LIST"]["reason"] == "within the metric's noise floor (2.0%)"
    assert verdicts["CONFIG_DEBUG_LIST"]["kind"] != verdicts["CONFIG_FAKE_SLOW"]["kind"]


def test_a_flip_is_as_wide_as_what_it_brings_along(lab, capsys):
    """No object of the build names PROVE_LOCKING, but it selects DEBUG_SPINLOCK, which
    every object that includes <linux/spinlock.h> depends on: it goes after
    DEBUG_ATOMIC_SLEEP (kernel/sched.o alone), not first as its own radius of 0 said."""
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "PROVE_LOCKING,DEBUG_ATOMIC_SLEEP",
                    "--metric", "syscall.null", "--format", "json") == 0
    flips = [(f["option"], f["rebuild_objects"]) for f in json.loads(capsys.readouterr().out)["flips"]]
    assert [o for o, _ in flips] == ["CONFIG_DEBUG_ATOMIC_SLEEP", "CONFIG_PROVE_LOCKING"]
    assert flips[0][1] == 1 and flips[1][1] > 1   # the objects that include <linux/spinlock.h>


def test_a_sweep_marks_a_mitigation_the_cpu_never_needed(lab, capsys, monkeypatch):
    """The fake QEMU's CPU is not affected by Meltdown and is by Spectre v2."""
    from kernellab.experiments import sweep
    monkeypatch.setattr(sweep, "flaws_by_option", lambda: {"CONFIG_FAKE_SLOW": ("meltdown",),
                                                           "CONFIG_DEBUG_LIST": ("spectre_v2",)})
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "DEBUG_LIST,FAKE_SLOW",
                    "--metric", "syscall.null") == 0
    lines = capsys.readouterr().out.splitlines()
    [slow] = [line for line in lines if line.strip().startswith("CONFIG_FAKE_SLOW=y") and "%" in line]
    [listed] = [line for line in lines if line.strip().startswith("CONFIG_DEBUG_LIST=y") and "%" in line]
    assert slow.endswith("inactive on the emulated CPU") and "inactive" not in listed
    assert sum("not affected by meltdown" in line for line in lines) == 1
    # Booted with pti=on, the kernel isolates page tables on a CPU it still calls not
    # affected by Meltdown (guest/flaws.toml): the measured change is the mitigation's cost.
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y+boot:pti=on", "--toggle", "FAKE_SLOW",
                    "--metric", "syscall.null") == 0
    out = capsys.readouterr().out
    [slow] = [line for line in out.splitlines() if line.strip().startswith("CONFIG_FAKE_SLOW=y") and "%" in line]
    assert "inactive" not in out and "+25.0%" in slow


def test_a_flip_changes_the_mitigations_of_what_it_brings_along(lab, capsys, monkeypatch):
    """PROVE_LOCKING selects DEBUG_SPINLOCK: a mitigation built by the option it brought along
    counts, so a flip whose own flaw the CPU lacks is only partly inactive, not free."""
    from kernellab.experiments import sweep
    monkeypatch.setattr(sweep, "flaws_by_option", lambda: {"CONFIG_PROVE_LOCKING": ("meltdown",),
                                                           "CONFIG_DEBUG_SPINLOCK": ("spectre_v2",)})
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y", "--toggle", "PROVE_LOCKING",
                    "--metric", "syscall.null", "--format", "json") == 0
    [flip] = json.loads(capsys.readouterr().out)["flips"]
    assert flip["flaws"] == ["meltdown", "spectre_v2"] and flip["not_affected"] == ["meltdown"]


def test_only_the_boot_words_of_flaws_toml_count_as_forcing_a_mitigation():
    from kernellab.guest import vulnerabilities
    cpu = [{"meltdown": "Not_affected", "spectre_v2": "Vulnerable"}]
    assert vulnerabilities.inactive(cpu, ["meltdown"]) == ["meltdown"]
    assert vulnerabilities.inactive(cpu, ["meltdown"], ["pti=on"]) == []
    assert vulnerabilities.inactive(cpu, ["meltdown"], ["pti=auto", "nopti"]) == ["meltdown"]
    assert vulnerabilities.forced(["indirect_target_selection=force", "quiet"]) == {"indirect_target_selection"}
    assert vulnerabilities.built_by(["CONFIG_SRSO", "CONFIG_MITIGATION_ITS"]) == ["indirect_target_selection"]


# -- the real agent ----------------------------------------------------------------------

def test_the_real_agent_runs_through_the_whole_pipeline(lab, capsys):
    """The agent kernellab compiled, taken out of the initramfs kernellab wrote, measuring
    the host in local mode (the fake QEMU asks it for three fast metrics, three repeats)."""
    rep, _ = report(lab, capsys, "r=tinyconfig+CONFIG_FAKE_REAL_AGENT=y")
    [run] = lab.runs()
    assert run["status"] == "ok"
    assert lab.main("log", str(run["id"])) == 0
    assert " mode=local " in capsys.readouterr().out  # the agent's hello, not the fake's (pid1)
    for name in ("syscall.null", "syscall.read", "proc.fork_exit"):
        values = metric(rep, name)["values"]["r"]
        assert values["n"] == 3 and values["median"] > 0
    assert metric(rep, "syscall.null")["values"]["r"]["median"] < metric(rep, "proc.fork_exit")["values"]["r"]["median"]


def test_a_probe_of_a_meminfo_metric_asks_the_agent_for_meminfo(lab, capsys):
    """KL_ONLY knows /proc/meminfo as one word: a probe of meminfo.Slab must not ask for a
    metric the agent has no name for."""
    assert lab.main("sweep", "tinyconfig+CONFIG_DEBUG_KERNEL=y+CONFIG_SLUB=y+CONFIG_SYSFS=y",
                    "--toggle", "SLUB_DEBUG_ON", "--metric", "meminfo.Slab", "--format", "json") == 0
    [flip] = json.loads(capsys.readouterr().out)["flips"]
    assert flip["effects"]["meminfo.Slab"]["delta_pct"] == pytest.approx(200 / 900 * 100)


def test_every_run_says_when_it_started_and_the_report_when_it_was_measured(lab, capsys, tmp_path):
    import datetime
    from pathlib import Path

    import jsonschema
    out = tmp_path / "report.json"
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    variants = ["a=tinyconfig", "b=tinyconfig+CONFIG_FAKE_SLOW=y"]
    assert lab.main("compare", *variants, "--format", "json", "-o", str(out)) == 0
    after = datetime.datetime.now(datetime.UTC)
    report = json.loads(out.read_text())
    schema = json.loads((Path(__file__).parent.parent / "src/kernellab/report/schema.json").read_text())
    jsonschema.validate(report, schema)
    started = [datetime.datetime.strptime(run["started"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
               for v in report["variants"] for run in v["runs"]]
    assert len(started) == 2 and all(before <= t <= after for t in started)
    capsys.readouterr()
    assert lab.main("show", str(out)) == 0
    first, last = min(started), max(started)
    assert (f"measured: {first:%Y-%m-%d}, runs started {first:%H:%M} to {last:%H:%M} UTC"
            in capsys.readouterr().out)
