"""Board labs: `kernellab lava-job` writes a LAVA job, `kernellab import-lava` stores what a
job's log says the agent measured, once per job. The unit tests run on the fake lab
(tests/fakes) and on the scripted target pieces (tests/labfakes); the integration test
wraps a real QEMU run of lab-minimal in LAVA's log format and imports it."""

import datetime
import json
import re
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

import labfakes
from conftest import kernellab
from kernellab.errors import LabError
from kernellab.experiments import lab, lava
from kernellab.experiments.spec import parse_short
from kernellab.guest.records import frame
from kernellab.guest.session import Session
from kernellab.store import Store
from kernellab.targets.lava import LavaLogTarget, read_log

T0 = datetime.datetime(2024, 5, 2, 10, 0, 0, tzinfo=datetime.UTC)
URL = "http://files.example/kl"
SAMPLES = {"syscall.null": [95.0, 96.0, 97.0], "proc.fork_exit": [60000.0, 61000.0]}


def entry(t: float, lvl: str, msg) -> dict:
    return {"dt": (T0 + datetime.timedelta(seconds=t)).isoformat(), "lvl": lvl, "msg": msg}


def lava_log(console: list[tuple[float, str]], job: str | None = "4711", initramfs: str = "agent.cpio",
             image: str = "bzImage") -> list[dict]:
    """A job log as the dispatcher writes it: its own entries around the board's console."""
    entries = [entry(0, "info", "lava-dispatcher, installed at version: 2024.09"),
               entry(0.01, "info", "start: 0 validate"),
               entry(0.02, "results", {"case": "validate", "definition": "lava", "result": "pass"}),
               entry(0.1, "info", f"downloading {URL}/{image}"),
               entry(0.2, "info", f"downloading {URL}/{initramfs}")]
    if job:
        entries.append(entry(0.3, "debug", f"saving as /srv/tftp/{job}/tftp-deploy-x1y2/ramdisk/{initramfs}"))
    entries += [entry(t, "target", text) for t, text in console]
    entries.append(entry(console[-1][0] + 1, "results", {"case": "auto-login-action", "result": "pass"}))
    return entries


def write_log(path, entries: list[dict]):
    """One flow-style line per entry, as lava_common.log.dump writes them."""
    path.write_text("".join("- " + yaml.safe_dump(e, default_flow_style=True, default_style='"', width=10**5)
                            for e in entries))
    return path


def board_console(lines: list[str], start: float = 12.5) -> list[tuple[float, str]]:
    return [(start + 0.01 * i, text) for i, text in enumerate(lines)]


def agent_console(samples=SAMPLES) -> list[str]:
    return [*labfakes.BOOT, *labfakes.agent_lines(samples), "[    1.000000] reboot: Power down"]


def runs_table(store_path) -> list[dict]:
    db = sqlite3.connect(store_path)
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT id, target, mode, status, reason, initramfs,"
                                            " json_extract(target_info, '$.label') AS label,"
                                            " json_extract(target_info, '$.details.job_id') AS job_id FROM runs")]
    finally:
        db.close()


# -- lava-job ------------------------------------------------------------------------

def test_job_definition_has_the_documented_structure(lab, capsys):
    variant = "board=tinyconfig+CONFIG_UNIX=y+boot:mitigations=off"
    out = lab.tmp / "job.yaml"
    assert lab.main("lava-job", variant, "--source", str(lab.tree), "--device-type", "beaglebone-black",
                    "--artifact-url", URL + "/", "--timeout", "300", "-o", str(out)) == 0
    err = capsys.readouterr().err
    text = out.read_text()
    assert text.startswith("# Written by kernellab lava-job")
    assert f"#   kernellab import-lava log.yaml {variant} --device-type beaglebone-black --source {lab.tree} " \
           "--arch x86_64 --job-id JOB\n" in text  # the same variant, source and arch find the same build
    job = yaml.safe_load(text)
    assert list(job) == ["device_type", "job_name", "timeouts", "priority", "visibility", "context", "metadata",
                         "actions"]
    assert job["device_type"] == "beaglebone-black"
    assert job["job_name"] == "kernellab board (Linux 6.1.0-fake, x86_64)"
    assert job["timeouts"]["job"]["minutes"] > job["actions"][1]["boot"]["timeout"]["minutes"] >= 5
    assert job["visibility"] == "public"

    deploy, boot = (next(iter(a.values())) for a in job["actions"])
    assert [next(iter(a)) for a in job["actions"]] == ["deploy", "boot"]
    initramfs = job["metadata"]["kernellab.initramfs"]
    assert re.fullmatch(r"[0-9a-f]{20}\.cpio", initramfs)
    assert deploy["to"] == "tftp"
    assert deploy["kernel"] == {"url": f"{URL}/bzImage"}  # a bzImage has no LAVA kernel type
    assert deploy["ramdisk"] == {"url": f"{URL}/{initramfs}", "install_modules": False, "install_overlay": False}
    assert f"as {URL}/{initramfs}" in err  # what to serve where

    assert boot["method"] == "u-boot" and boot["commands"] == "ramdisk"
    assert "auto_login" not in boot and len(job["actions"]) == 2  # no login, no test shell
    # The only prompt is the agent's end record: LAVA's boot ends when the agent is done.
    [prompt] = boot["prompts"]
    agent = labfakes.agent_lines(SAMPLES)
    assert re.search(prompt, agent[-1]) and not any(re.search(prompt, line) for line in agent[:-1])

    # The command line is the variant's and the run options', on the arch's console.
    assert job["context"]["console_device"] == "ttyS0"
    assert job["context"]["extra_kernel_args"] == "printk.time=1 loglevel=7 mitigations=off"

    assert lab.main("build", variant, "--format", "json") == 0
    build_key = json.loads(capsys.readouterr().out)["key"]
    assert lab.main("resolve", variant, "--format", "json") == 0
    config_hash = json.loads(capsys.readouterr().out)["config_hash"]
    assert job["metadata"] == {"kernellab.variant": "board", "kernellab.build_key": build_key,
                               "kernellab.config_hash": config_hash, "kernellab.initramfs": initramfs,
                               "kernellab.arch": "x86_64", "kernellab.source": "6.1.0-fake"}


def test_job_options_kernel_type_console_boot_method(lab, capsys):
    assert lab.main("lava-job", "tinyconfig", "--source", str(lab.tree), "--device-type", "x", "--artifact-url",
                    URL, "--kernel-type", "zimage", "--console", "ttyAMA0", "--boot-method", "ipxe") == 0
    job = yaml.safe_load(capsys.readouterr().out)
    deploy, boot = (next(iter(a.values())) for a in job["actions"])
    assert deploy["kernel"] == {"url": f"{URL}/bzImage", "type": "zimage"}
    assert job["context"]["console_device"] == "ttyAMA0"
    assert boot["method"] == "ipxe"


QEMU_JOB = ("--device-type", "qemu", "--boot-method", "qemu", "--artifact-url", "file:///srv/kl")


def test_qemu_boot_method_boots_the_images_in_the_dispatchers_qemu(lab, capsys):
    assert lab.main("lava-job", "vm=tinyconfig+boot:mitigations=off", "--source", str(lab.tree), *QEMU_JOB,
                    "--timeout", "300") == 0
    job = yaml.safe_load(capsys.readouterr().out)
    initramfs = job["metadata"]["kernellab.initramfs"]
    # The device type runs qemu-system-ARCH: the arch is all the job's context says.
    assert job["context"] == {"arch": "x86_64"}
    deploy, boot = (next(iter(a.values())) for a in job["actions"])
    cmdline = "console=ttyS0 printk.time=1 loglevel=7 mitigations=off"
    assert deploy == {"to": "tmpfs", "timeout": {"minutes": lava.DEPLOY_MINUTES},
                      "images": {"kernel": {"url": "file:///srv/kl/bzImage",
                                            "image_arg": f'-kernel {{kernel}} -append "{cmdline}"'},
                                 "initrd": {"url": f"file:///srv/kl/{initramfs}", "image_arg": "-initrd {initrd}"}}}
    # The dispatcher splits QEMU's command at spaces outside quotes: the command line stays one argument.
    assert shlex.split(deploy["images"]["kernel"]["image_arg"]) == ["-kernel", "{kernel}", "-append", cmdline]
    assert boot == {"method": "qemu", "media": "tmpfs", "timeout": {"minutes": 7}, "prompts": [lava.END_PROMPT]}
    assert job["timeouts"]["job"]["minutes"] > lava.DEPLOY_MINUTES + 7

    assert lab.main("lava-job", "tinyconfig", "--source", str(lab.tree), *QEMU_JOB, "--console", "ttyS1") == 0
    kernel = yaml.safe_load(capsys.readouterr().out)["actions"][0]["deploy"]["images"]["kernel"]
    assert kernel["image_arg"] == '-kernel {kernel} -append "console=ttyS1 printk.time=1 loglevel=7"'


QEMU_REFUSED = {
    "kernel-type": (("tinyconfig", "--kernel-type", "image"), "the qemu boot method gives QEMU the image itself"),
    "quote": (('tinyconfig+boot:a="b"',), "has a double quote or a brace"),
    "brace": (("tinyconfig+boot:x={initrd}",), "has a double quote or a brace"),
    "no-qemu": (("tinyconfig", "--arch", "mpc885"), "arch mpc885 has no QEMU machine"),
}


@pytest.mark.parametrize("case", sorted(QEMU_REFUSED))
def test_qemu_boot_method_refuses_what_lavas_qemu_cannot_take(lab, capsys, case):
    args, says = QEMU_REFUSED[case]
    assert lab.main("lava-job", *args, "--source", str(lab.tree), *QEMU_JOB) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernellab: error: ") and err.count("\n") == 1 and says in err, err
    assert not lab.store.exists()  # refused before anything was built


LAVA_SCHEMA = Path("/usr/share/lava-common/lava-schema.py")   # lava-common's own checker (packages.txt)


@pytest.mark.skipif(not LAVA_SCHEMA.is_file(), reason="LAVA's job schema is not installed "
                    "(apt-get install lava-common, as src/kernellab/packages.txt lists)")
def test_every_boot_methods_job_is_valid_to_lavas_own_schema(lab, capsys):
    jobs = []
    for method in lava.BOOT_METHODS:
        jobs.append(lab.tmp / f"{method}.yaml")
        assert lab.main("lava-job", "tinyconfig+boot:mitigations=off", "--source", str(lab.tree),
                        "--device-type", "qemu", "--artifact-url", URL, "--boot-method", method,
                        "-o", str(jobs[-1])) == 0
    # What LAVA refuses, to show the check can fail: a QEMU boot given a bootloader's commands.
    bad = yaml.safe_load(jobs[-1].read_text())
    bad["actions"][1]["boot"]["commands"] = "ramdisk"
    jobs.append(lab.tmp / "bad.yaml")
    jobs[-1].write_text(yaml.safe_dump(bad))

    checked = subprocess.run([str(LAVA_SCHEMA), "job", "--strict", *map(str, jobs)], capture_output=True,
                             text=True, timeout=120)
    # It lists each file ("* PATH"), each complaint under its file ("  -> ...").
    said: dict[str, list[str]] = {}
    for line in checked.stdout.splitlines():
        if line.startswith("* "):
            said[line[2:]] = []
        else:
            said[next(reversed(said))].append(line)
    assert set(said) == set(map(str, jobs)), checked.stdout + checked.stderr
    assert {Path(path).stem for path, complaints in said.items() if complaints} == {"bad"}, checked.stdout
    assert "extra keys not allowed" in " ".join(said[str(jobs[-1])])
    assert checked.returncode == 1


# -- import-lava ---------------------------------------------------------------------

def test_import_stores_the_agents_records_once_per_job(lab, capsys):
    assert lab.main("lava-job", "tinyconfig", "--source", str(lab.tree), "--device-type", "bbb",
                    "--artifact-url", URL) == 0
    initramfs = yaml.safe_load(capsys.readouterr().out)["metadata"]["kernellab.initramfs"]
    log = write_log(lab.tmp / "log.yaml", lava_log(board_console(agent_console()), initramfs=initramfs))
    args = ("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree))

    assert lab.main(*args) == 0  # the job's number comes from the dispatcher's paths
    # Every sample stored (the agent's five, the console's milestones, memory, initcalls):
    # the count `runs` shows.
    (run,) = lab.runs()
    assert run["samples"] > 5
    assert capsys.readouterr().out == f"job 4711: run 1, ok, {run['samples']} samples\n"
    assert lab.main(*args, "--job-id", "4711") == 0
    assert capsys.readouterr().out == "job 4711 already imported as run 1\n"

    [run] = runs_table(lab.store)
    assert run == {"id": 1, "target": "lava", "mode": "wall", "status": "ok", "reason": "", "initramfs": initramfs,
                   "label": "LAVA device bbb", "job_id": "4711"}
    samples = lab.samples(1)
    assert [(m, v) for m, v in samples if not m.startswith(("boot.", "mem."))] == \
        [(m, v) for m, values in SAMPLES.items() for v in values]
    # Host time is seconds since the log's first entry: the console started 12.5 s in.
    assert dict(samples)["boot.first_output.host"] == pytest.approx(12.5)
    assert dict(samples)["boot.linux_version.printk"] == 0.0


def test_a_damaged_record_keeps_the_intact_ones_and_marks_the_run(tmp_path):
    lines = agent_console()
    i = next(i for i, line in enumerate(lines) if "value=96.0" in line)
    lines[i] = lines[i].replace("value=96.0", "value=69.0")  # line noise: the CRC no longer fits
    store = Store(tmp_path / "s.sqlite")
    outcome = import_scripted(store, lines, tmp_path)
    assert outcome.status == "damaged" and "checksum mismatch" in outcome.reason
    assert store.run_metrics(outcome.run_id)["syscall.null"] == [95.0, 97.0]
    assert store.run_metrics(outcome.run_id)["proc.fork_exit"] == [60000.0, 61000.0]


def test_a_log_that_ends_before_the_agent_says_what_lava_said(tmp_path):
    lines = agent_console()[:-4]  # the job timed out before the end record
    entries = lava_log(board_console(lines))
    entries.append(entry(99, "error", "auto-login-action timed out after 600 seconds"))
    outcome = lava.import_log(labfakes.prepared(parse_short("x=lab-minimal")), labfakes.build("k"),
                              Store(tmp_path / "s.sqlite"), read_log(write_log(tmp_path / "log.yaml", entries)),
                              "bbb", "7", tmp_path / "agent.cpio")
    assert outcome.status == "incomplete"
    assert outcome.reason == ("the LAVA job's console log ended before the agent finished "
                              "(auto-login-action timed out after 600 seconds)")


def test_replay_stops_where_a_live_console_would(tmp_path):
    # After the end record the session waits a grace period for the kernel's last words;
    # what the log shows later (the next job's bootloader, say) is not this run's.
    console = board_console(agent_console()[:-1]) + [(60.0, "[    0.000000] Linux version 6.1.0-other")]
    target = LavaLogTarget(read_log(write_log(tmp_path / "log.yaml", lava_log(console))), "bbb", "1")
    with target.start(None, None, "", "wall", 600) as con:
        result = Session(labfakes.ListSink()).read(con)
    assert result.status == "ok"
    assert not any("6.1.0-other" in line.text for line in result.lines)


def import_scripted(store: Store, lines: list[str], tmp_path, job: str = "7") -> lab.RunOutcome:
    log = read_log(write_log(tmp_path / "log.yaml", lava_log(board_console(lines), job=job)))
    return lava.import_log(labfakes.prepared(parse_short("x=lab-minimal")), labfakes.build("k"), store, log,
                           "bbb", job, tmp_path / "agent.cpio")


def test_a_job_that_deployed_another_initramfs_is_refused(tmp_path):
    log = read_log(write_log(tmp_path / "log.yaml", lava_log(board_console(agent_console()), initramfs="old.cpio")))
    with pytest.raises(LabError, match=r"job 7 deployed bzImage, old.cpio, not agent.cpio"):
        lava.import_log(labfakes.prepared(parse_short("x=lab-minimal")), labfakes.build("k"),
                        Store(tmp_path / "s.sqlite"), log, "bbb", "7", tmp_path / "agent.cpio")


MALFORMED = {
    "not-yaml": ("- {dt: [unclosed\n", "is not YAML at line"),
    "a-mapping": ("dt: 1\nlvl: target\n", "is not a LAVA job log"),
    "strings": ("- one line\n- another\n", "entry 1 is not a {dt, lvl, msg} mapping"),
    "no-msg": ('- {"dt": "2024-05-02T10:00:00", "lvl": "target"}\n', "entry 1 is not a {dt, lvl, msg}"),
    "bad-dt": ('- {"dt": "yesterday", "lvl": "target", "msg": "x"}\n', "no ISO 8601 time in dt ('yesterday')"),
    "no-console": ('- {"dt": "2024-05-02T10:00:00", "lvl": "info", "msg": "start: 0 validate"}\n',
                   "no console output"),
    "empty": ("", "is not a LAVA job log"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_log_is_one_clear_line(lab, capsys, case):
    text, says = MALFORMED[case]
    path = lab.tmp / f"{case}.yaml"
    path.write_text(text)
    assert lab.main("import-lava", str(path), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree)) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernellab: error: ") and err.count("\n") == 1 and says in err, err
    assert not lab.store.exists()  # read and refused before anything was built or stored


def test_a_dispatchers_own_stream_reads_as_the_servers_log(tmp_path):
    # lava-run alone prints each entry on its own line; the server stores them as a list.
    server = write_log(tmp_path / "output.yaml", lava_log(board_console(agent_console())))
    stream = tmp_path / "lava-run.log"
    stream.write_text("".join(line.removeprefix("- ") + "\n" for line in server.read_text().splitlines()))
    assert not stream.read_text().startswith("- ")
    assert read_log(stream).entries == read_log(server).entries
    assert len(read_log(stream).console()) == len(agent_console())
    # A damaged line is named by its line in the file, as in a server's log.
    stream.write_text("\n" + stream.read_text().replace('"lvl"', '"lvl" [', 1))
    with pytest.raises(LabError, match="is not YAML at line 2;"):
        read_log(stream)


def test_a_firmwares_terminal_reset_before_the_kernels_first_line_leaves_its_printk_time(tmp_path):
    """LAVA's QEMU device: SeaBIOS's reset (ESC c, ESC [?7l, ESC [2J) is left stuck to the
    kernel's first line with its ESC bytes dropped; the line's printk time is still read, and
    a line that only looks alike keeps its text."""
    from kernellab.guest.console import milestones
    first = "[    0.000000] Linux version 6.1.0 (gcc 12.2.0)"
    for before in ("c[?7l[2J", "Booting from ROM..c[?7l[2J"):
        log = write_log(tmp_path / "output.yaml",
                        lava_log(board_console([f"{before}{first}", "c[?7l[2J the BIOS"])))
        lines = {line.text for line in read_log(log).console()}
        assert first in lines and "c[?7l[2J the BIOS" in lines
        found = {m.name: m.printk_s for m in milestones(read_log(log).console())}
        assert found["linux_version"] == 0.0


def test_job_number_from_the_option_or_the_log(lab, capsys, tmp_path):
    unnamed = write_log(tmp_path / "unnamed.yaml", lava_log(board_console(agent_console()), job=None))
    args = (str(unnamed), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree))
    assert lab.main("import-lava", *args) == 2
    assert "does not say which job it is: give its number with --job-id N" in capsys.readouterr().err
    assert lab.main("import-lava", *args, "--job-id", "12x") == 2
    assert "a LAVA job number is like 1234" in capsys.readouterr().err

    named = read_log(write_log(tmp_path / "named.yaml", lava_log(board_console(agent_console()), job="lava-1234.1")))
    assert lava.job_id(named, None) == "1234.1"  # a multinode part, under a dispatcher prefix
    with pytest.raises(LabError, match="is the log of job 1234.1 .* not of job 99"):
        lava.job_id(named, "99")
    # Python 2 dispatchers tagged their strings.
    old = tmp_path / "old.yaml"
    old.write_text('- {"dt": "2018-03-29T14:52:20.376787", "lvl": "target", "msg": !!python/unicode "' +
                   frame("seq=0 t=hello v=1 agent=kernellab-agent mode=pid1") + '"}\n')
    assert read_log(old).console()[0].text.startswith("@KL seq=0 t=hello")


# -- integration: a real agent run, as a LAVA lab would have logged it -----------------

HOST_LINE = re.compile(r"^\[host\s+(\d+\.\d+)\] (.*)$")


@pytest.mark.integration
def test_import_of_a_real_qemu_run_wrapped_as_a_lava_log(minimal, store, tmp_path):
    prepared, build = minimal
    options = lab.RunOptions(mode="wall", timeout_s=300,
                             cmdline_extra="KL_ONLY=syscall.null,proc.fork_exit KL_REPEATS=3")
    original = lab.run(prepared, build, store, options)
    assert original.status == "ok", original.reason
    console = [(20.0 + float(m.group(1)), m.group(2))
               for m in map(HOST_LINE.match, store.run_log(original.run_id).splitlines())]
    assert any(re.search(lava.END_PROMPT, text) for _, text in console)  # where the job's boot action ends
    initramfs = lab.initramfs_for(prepared).name
    log = write_log(tmp_path / "log.yaml", lava_log(console, job="991", initramfs=initramfs))

    done = kernellab("import-lava", str(log), "lab-minimal=lab-minimal", "--device-type", "qemu-x86_64",
                     store_path=store.path)
    assert done.returncode == 0, done.stderr
    imported = int(re.fullmatch(r"job 991: run (\d+), ok, \d+ samples\n", done.stdout).group(1))

    before, after = store.run_metrics(original.run_id), store.run_metrics(imported)
    assert {"syscall.null", "proc.fork_exit", "boot.agent_ready.host"} <= set(before)
    assert set(after) == set(before)
    assert {m: v for m, v in after.items() if not m.endswith(".host")} == \
        {m: v for m, v in before.items() if not m.endswith(".host")}
    # Host time restarts at the log's first entry, 20 s before the console's.
    for m in (m for m in before if m.endswith(".host")):
        assert after[m] == pytest.approx([v + 20.0 for v in before[m]], abs=1e-5)
    run = store.run(imported)
    assert (run["target"], run["status"], run["mode"]) == ("lava", "ok", "wall")
    assert json.loads(run["target_info"])["label"] == "LAVA device qemu-x86_64"

    again = kernellab("import-lava", str(log), "lab-minimal=lab-minimal", "--device-type", "qemu-x86_64",
                      store_path=store.path)
    assert (again.returncode, again.stdout) == (0, f"job 991 already imported as run {imported}\n")
