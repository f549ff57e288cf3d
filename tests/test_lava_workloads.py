"""Workloads on LAVA boards (issue 31): `lava-job --workload SPEC` writes a job whose ramdisk is
the initramfs a QEMU guest of the arch boots with the workloads (the agent's archive with the
workloads' file, then their Debian userland appended), and `import-lava --workload SPEC` reads
the agent's workload records from the job's log into WORKLOAD.METRIC samples with their
provenance, in the run's report as on every other target. A workload that needs what a board
does not give is refused in one line, from the lava target's capabilities (targets.registry)."""

import json

import yaml

import labfakes
from kernellab import initramfs, userland
from kernellab.guest.records import frame
from kernellab.guest.workloads import INITRAMFS_FILE, Packages
from test_lava import URL, board_console, lava_log, write_log
from workloadfiles import host_workload_file, workload_file


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("kernellab: error: ") and err.count("\n") == 1, err
    return err


def userland_segment(lab) -> bytes:
    """The fake lab's userland segment (userland.segment returns it), made recognisable."""
    segment = initramfs.build_cpio({"usr/bin/kl-userland-marker": (0o100755, b"from Debian's packages\n")})
    (lab.tmp / "userland.cpio").write_bytes(segment)
    return segment


def write_job(lab, capsys, *args: str) -> tuple[dict, str, str]:
    """`lava-job tinyconfig ARGS`: the job, its text and what it said on stderr."""
    out = lab.tmp / "job.yaml"
    assert lab.main("lava-job", "tinyconfig", "--source", str(lab.tree), "--device-type", "bbb",
                    "--artifact-url", URL, "--timeout", "120", "-o", str(out), *args) == 0
    text = out.read_text()
    return yaml.safe_load(text), text, capsys.readouterr().err


def test_the_job_carries_the_workloads_userland_and_words(lab, capsys, tmp_path):
    segment = userland_segment(lab)
    plain, _, _ = write_job(lab, capsys)
    spec = str(workload_file(tmp_path, "own", 'echo "value: $((40 + $1))"', command='["sh", "{workdir}/run.sh", "{n}"]',
                             timeout_s=600))
    job, text, err = write_job(lab, capsys, "--workload", f"{spec}:n=2")

    # The ramdisk is the QEMU guest's initramfs with the workloads: another file than the agent's alone.
    initramfs_name = job["metadata"]["kernellab.initramfs"]
    assert initramfs_name != plain["metadata"]["kernellab.initramfs"]
    [deploy] = [a["deploy"] for a in job["actions"] if "deploy" in a]
    assert deploy["ramdisk"]["url"] == f"{URL}/{initramfs_name}"
    served = lab.cache / "initramfs" / initramfs_name
    assert f"{served} as {URL}/{initramfs_name}" in err   # what to serve where
    data = served.read_bytes()
    assert INITRAMFS_FILE.encode() in data               # the workloads' file, for the agent
    assert data.endswith(segment)                        # the userland, the second segment
    assert b"{workdir}/run.sh\0" in data and b"\x002\x00" in data   # the argv with its parameter

    # The workload words: in the job's metadata, and in the import its header tells to run.
    assert job["metadata"]["kernellab.workloads"] == "own:n=2"
    assert f"--arch x86_64 --workload {spec}:n=2 --job-id JOB\n" in text
    # The board's boot waits for the workload's own timeout too (600 s), as a QEMU run does.
    [boot] = [a["boot"] for a in job["actions"] if "boot" in a]
    [plain_boot] = [a["boot"] for a in plain["actions"] if "boot" in a]
    assert boot["timeout"]["minutes"] == plain_boot["timeout"]["minutes"] + 10


def workload_console(label: str, output: str, end: str = "status=ok code=0 elapsed_ns=1500000000") -> list[str]:
    """The agent's console on the board: its samples, then one workload's records (its
    output, unless it did not run, and its end), then the agent's end."""
    lines = labfakes.agent_lines({"syscall.null": [95.0, 96.0, 97.0]}, end=False)
    data = "".join(c if "!" <= c <= "~" and c not in "%#" else f"%{ord(c):02X}" for c in output)
    payloads = [f"t=wl_begin w=0 name={label}", *([f"t=wl_out w=0 data={data}"] if output else []),
                f"t=wl_end w=0 {end}"]
    records = [frame(f"seq={len(lines) + i} {p}") for i, p in enumerate(payloads)]
    end = frame(f"seq={len(lines) + len(records)} t=end records={len(lines) + len(records)}")
    return [*labfakes.BOOT, *lines, *records, end, "[    1.000000] reboot: Power down"]


def test_a_boards_workload_records_are_its_metrics_with_their_provenance_in_the_report(lab, capsys, tmp_path,
                                                                                      monkeypatch):
    userland_segment(lab)
    # The userland kernellab assembled says where the guest's programs came from (Debian's dash).
    monkeypatch.setattr(userland, "installed",
                        lambda instances, profile, compression="gzip": Packages({"dash": "0.5.12-2"}, {"sh": "dash"}))
    spec = str(workload_file(tmp_path, "own", 'echo "value: $((40 + $1))"',
                             command='["sh", "{workdir}/run.sh", "{n}"]'))
    job, _, _ = write_job(lab, capsys, "--workload", f"{spec}:n=2")
    log = write_log(lab.tmp / "log.yaml", lava_log(board_console(workload_console("own:n=2", "value: 42\n")),
                                                   initramfs=job["metadata"]["kernellab.initramfs"]))
    report_file = lab.tmp / "run.json"
    assert lab.main("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree),
                    "--workload", f"{spec}:n=2", "-o", str(report_file)) == 0
    assert capsys.readouterr().out.startswith("job 4711: run 1, ok, ")

    report = json.loads(report_file.read_text())
    own = next(m for m in report["metrics"] if m["name"] == "own.value")
    assert own["values"]["tinyconfig"]["median"] == 42 and own["source"] == "workload"
    assert next(m for m in report["metrics"] if m["name"] == "syscall.null")["values"]["tinyconfig"]["n"] == 3
    [run] = report["variants"][0]["runs"]
    assert run["target"]["label"] == "LAVA device bbb"
    [wl] = run["workloads"]
    assert wl["status"] == "ok" and wl["elapsed_s"] == 1.5
    provenance = wl["provenance"]
    assert (provenance["program"], provenance["version"], provenance["package"], provenance["argv"]) == \
        ("sh", "0.5.12-2", "dash", ["sh", "{workdir}/run.sh", "2"])
    assert provenance["target"] == "lava"

    # Imported once: again, the same run's report, the same figures; on stdout, the line on stderr.
    assert lab.main("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree),
                    "--workload", f"{spec}:n=2", "--format", "json") == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["metrics"] == report["metrics"] and "job 4711 already imported as run 1\n" in err
    assert lab.main("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree),
                    "--workload", f"{spec}:n=2", "--format", "table") == 0
    table = capsys.readouterr().out
    assert "LAVA job of tinyconfig" in table and "own: value" in table


def test_a_job_with_workloads_imported_without_them_says_what_to_give(lab, capsys, tmp_path):
    userland_segment(lab)
    spec = str(workload_file(tmp_path, "own", 'echo "value: 1"'))
    job, _, _ = write_job(lab, capsys, "--workload", spec)
    log = write_log(lab.tmp / "log.yaml", lava_log(board_console(workload_console("own", "value: 1\n")),
                                                   initramfs=job["metadata"]["kernellab.initramfs"]))
    assert lab.main("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree)) == 2
    err = one_line_error(capsys)
    assert f"job 4711 deployed bzImage, {job['metadata']['kernellab.initramfs']}, not " in err
    assert "import it with the kernellab that wrote the job and the job's --workload options" in err


def test_a_workload_a_board_cannot_give_what_it_needs_is_refused_in_one_line(lab, capsys, tmp_path):
    host = host_workload_file(tmp_path, "to-host")
    assert lab.main("lava-job", "tinyconfig", "--source", str(lab.tree), "--device-type", "bbb",
                    "--artifact-url", URL, "--workload", str(host)) == 2
    err = one_line_error(capsys)
    assert "workload to-host talks to the host over a network link, which --target lava:bbb does not give" in err
    assert "--target local" in err

    # fio writes its file on a disk's file system (needs.disk_mib): a board booted from a ramdisk has none.
    assert lab.main("lava-job", "tinyconfig", "--source", str(lab.tree), "--device-type", "bbb",
                    "--artifact-url", URL, "--workload", "fio") == 2
    err = one_line_error(capsys)
    assert ("workload fio needs a disk with a file system for its files (128 MiB), and --target lava:bbb gives "
            "none (a board booted from a ramdisk)") in err
    assert not lab.store.exists()   # refused before anything was built or stored


def test_a_workload_the_board_is_too_small_for_is_not_available_saying_what_it_has(lab, capsys, tmp_path):
    """A board's log says nothing of its CPUs and memory before the run: the agent checks the
    workload's needs on the board (agent/workload.c: too_small) and says what it has."""
    userland_segment(lab)
    spec = str(workload_file(tmp_path, "wide", 'echo "value: 1"', extra="[needs]\nvcpus = 4\n"))
    job, _, _ = write_job(lab, capsys, "--workload", spec)
    console = workload_console("wide", "", end="status=too_small code=0 elapsed_ns=0 reason=vcpus_1")
    log = write_log(lab.tmp / "log.yaml",
                    lava_log(board_console(console), initramfs=job["metadata"]["kernellab.initramfs"]))
    report_file = lab.tmp / "run.json"
    assert lab.main("import-lava", str(log), "tinyconfig", "--device-type", "bbb", "--source", str(lab.tree),
                    "--workload", spec, "-o", str(report_file)) == 0
    report = json.loads(report_file.read_text())
    why = "needs 4 vCPUs, the board has 1: not run"
    assert next(m for m in report["metrics"] if m["name"] == "wide.value")["values"]["tinyconfig"] == \
        {"not_available": why}
    [wl] = report["variants"][0]["runs"][0]["workloads"]
    assert (wl["status"], wl["reason"]) == ("too_small", why)
    assert next(m for m in report["metrics"] if m["name"] == "syscall.null")["values"]["tinyconfig"]["n"] == 3
