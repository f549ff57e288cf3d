"""The agent compiled for this machine and run as an ordinary program (local mode)."""

from __future__ import annotations

import ctypes
import errno
import math
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import zlib

import pytest

from kernellab.agent.compile import agent_binary
from kernellab.agent.version import check_hello
from kernellab.errors import LabError

BLOCK = ("blk.seq_write_direct", "blk.seq_read_direct", "blk.seq_write_cached", "blk.seq_read_cached")
FILE = ("file.seq_write_direct", "file.seq_read_direct", "file.seq_write_cached", "file.seq_read_cached")
SYSFS = ("sysfs.entries", "sysfs.bus_devices")   # counted once, whatever --repeats says
# Every metric the agent runs, with its unit, in the agent's order.
METRICS = {
    **dict.fromkeys(
        ("syscall.null", "syscall.read", "syscall.write", "syscall.open_close", "syscall.stat",
         "syscall.fstat", "signal.install", "signal.catch", "ipc.pipe_rtt", "ipc.unix_rtt",
         "ipc.tcp_rtt", "ipc.udp_rtt", "ipc.tcp_connect", "proc.fork_exit", "proc.fork_exec"),
        "ns"),
    **{f"ctx.ring{n}_{ws}": "ns" for ws in ("0k", "16k") for n in (2, 4, 8, 16)},
    **dict.fromkeys(("bw.pipe", "bw.unix", "bw.tcp"), "MB/s"),
    **dict.fromkeys(("fs.create_0k", "fs.delete_0k", "fs.create_10k", "fs.delete_10k"), "ns"),
    **dict.fromkeys(("mm.mmap_1m", "mm.page_fault", "fs.select_10", "fs.select_100"), "ns"),
    **dict.fromkeys(("bw.mem_read", "bw.mem_write", "bw.mem_copy", "bw.mem_parallel"), "MB/s"),
    **dict.fromkeys(("crypto.aes256cbc_kernel", "crypto.aes256cbc_user"), "MB/s"),
    **dict.fromkeys(("irq.idle_timer", "irq.idle_total"), "irq/s"),
    **dict.fromkeys(("lat.timer_p50", "lat.timer_p99", "lat.timer_max"), "ns"),
    "mem.alloc_max": "MiB",
    **dict.fromkeys(BLOCK, "MB/s"),
    **dict.fromkeys(FILE, "MB/s"),
    **dict.fromkeys(SYSFS, "count"),
}
# These take at most 3 samples whatever --repeats says.
SLOW = {"bw.mem_parallel", "irq.idle_timer", "irq.idle_total", "lat.timer_p50", "lat.timer_p99", "lat.timer_max",
        "mem.alloc_max", *BLOCK, *FILE}
# Interrupt counts may be zero in a short idle window; everything else is a cost or a rate.
MAY_BE_ZERO = {"irq.idle_timer", "irq.idle_total"}
SMALL = ("--repeats", "3", "--target-us", "200", "--idle-ms", "50")
ALLOC_CAP_MB = 16
ADDRESS_SPACE_MB = 128
EINVAL = 22
RECORD = re.compile(r"@KL (?P<payload>[^#]*) #(?P<crc>[0-9a-f]{8})")

# The agent compiled and run as a program, its measurements whole: seconds, the lab lane.
pytestmark = [pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed"), pytest.mark.lab]


def kernel_has_af_alg_aes() -> bool:
    try:
        with socket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET, 0) as alg:
            alg.bind(("skcipher", "cbc(aes)"))
    except (AttributeError, OSError):
        return False
    return True


def expected_na(metric: str) -> str | None:
    """The reason a metric may give instead of samples on this host, as a regex."""
    if metric in BLOCK:
        return "no_scratch_disk"
    if metric in FILE:
        return "no_file_system"
    if metric == "mem.alloc_max":
        return "reached_KL_ALLOC_CAP_MB"  # the full run's small cap
    if metric == "crypto.aes256cbc_kernel" and not kernel_has_af_alg_aes():
        return r"(socket|bind)_failed_errno_\d+"
    return None


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELLAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield agent_binary()


def run_agent(agent, *args: str, env: dict[str, str] | None = None,
              preexec_fn=None) -> list[dict[str, str]]:
    # The caller's KL_* variables would change what runs.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KL_")} | (env or {})
    result = subprocess.run([str(agent), *args], capture_output=True, text=True, timeout=30,
                            check=True, env=clean, preexec_fn=preexec_fn)
    records = []
    for line in result.stdout.splitlines():
        match = RECORD.fullmatch(line)
        assert match, f"malformed record line: {line!r}"
        payload = match["payload"]
        assert f"{zlib.crc32(payload.encode()):08x}" == match["crc"], line
        tokens = [token.split("=", 1) for token in payload.split(" ")]
        assert all(len(token) == 2 for token in tokens), line
        assert [key for key, _ in tokens[:2]] == ["seq", "t"], line
        records.append(dict(tokens))
    return records


@pytest.fixture(scope="module")
def full_run(agent):
    return run_agent(agent, *SMALL, env={"KL_ALLOC_CAP_MB": str(ALLOC_CAP_MB)})


def samples(records, metric: str) -> list[dict[str, str]]:
    return [r for r in records if r["t"] == "sample" and r["metric"] == metric]


def nas(records, metric: str) -> list[dict[str, str]]:
    return [r for r in records if r["t"] == "na" and r["metric"] == metric]


def meta(records) -> dict[str, str]:
    return {r["key"]: r["value"] for r in records if r["t"] == "meta"}


def test_framing(full_run):
    assert [int(r["seq"]) for r in full_run] == list(range(len(full_run)))
    hello, end = full_run[0], full_run[-1]
    assert hello["t"] == "hello"
    check_hello(hello)  # the record version this kernellab reads
    assert hello["mode"] == "local"
    assert hello["repeats"] == "3" and hello["target_us"] == "200"
    assert hello["idle_ms"] == "50" and hello["block_dev"] == "none"
    assert end == {"seq": str(len(full_run) - 1), "t": "end", "records": str(len(full_run) - 1)}
    assert all(r["t"] not in ("hello", "end") for r in full_run[1:-1])


def test_every_metric_has_its_samples_or_an_expected_na(full_run):
    reported = [r["metric"] for r in full_run if r["t"] in ("sample", "na")]
    assert [m for m in dict.fromkeys(reported) if not m.startswith("meminfo.")] == list(METRICS)
    for metric, unit in METRICS.items():
        got, na = samples(full_run, metric), nas(full_run, metric)
        if expected_na(metric):
            assert not got and len(na) == 1, metric
            assert re.fullmatch(expected_na(metric), na[0]["reason"]), na
            continue
        assert not na, na
        assert [r["rep"] for r in got] == (["0"] if metric in SYSFS else ["0", "1", "2"]), metric
        for r in got:
            value = float(r["value"])
            assert r["unit"] == unit and int(r["iters"]) >= 1, r
            assert math.isfinite(value), r
            assert value >= 0 if metric in MAY_BE_ZERO else value > 0, r


def test_meta_records(full_run):
    facts = meta(full_run)
    assert int(facts["clock_overhead_ns"]) >= 0
    assert float(facts["loop_overhead_ns"]) >= 0
    # Every x86 kernel has the local APIC timer line.
    if os.uname().machine == "x86_64":
        assert "LOC" in facts["irq_timer_lines"].split(",")



def test_timer_latency_tail_and_maximum_come_from_one_window(full_run):
    """cyclictest's figures: late wakeups of a SCHED_FIFO thread under a pipe-copying load;
    the 99th percentile and the maximum of one window, so never p99 > max."""
    p99, top = samples(full_run, "lat.timer_p99"), samples(full_run, "lat.timer_max")
    assert [r["rep"] for r in p99] == [r["rep"] for r in top] == ["0", "1", "2"]
    assert all(0 <= float(a["value"]) <= float(b["value"]) for a, b in zip(p99, top, strict=True))
    assert all(float(r["value"]) >= 0 for r in samples(full_run, "lat.timer_p50"))


def test_idle_timer_and_total_come_from_the_same_windows(full_run):
    timer, total = samples(full_run, "irq.idle_timer"), samples(full_run, "irq.idle_total")
    assert [r["rep"] for r in timer] == [r["rep"] for r in total]
    # Timer lines are a subset of all lines, counted over the same interval.
    assert all(float(t["value"]) <= float(a["value"]) for t, a in zip(timer, total, strict=True))


def test_either_irq_metric_can_be_selected_alone(agent):
    records = run_agent(agent, "--repeats", "5", "--idle-ms", "20", "--only", "irq.idle_timer")
    assert {r["metric"] for r in records if r["t"] in ("sample", "na")} == {"irq.idle_timer"}
    assert len(samples(records, "irq.idle_timer")) == 3
    assert "irq_timer_lines" in meta(records)


def test_user_aes_passes_its_selftest_and_kernel_aes_agrees(full_run):
    assert not nas(full_run, "crypto.aes256cbc_user")
    if kernel_has_af_alg_aes():
        assert len(samples(full_run, "crypto.aes256cbc_kernel")) == 3
        assert not nas(full_run, "crypto.aes256cbc_kernel")


def test_alloc_max_that_reaches_the_cap_is_no_measurement(full_run):
    """The cap is a lower bound: never reported as what the process could get."""
    assert not samples(full_run, "mem.alloc_max")
    assert [r["reason"] for r in nas(full_run, "mem.alloc_max")] == ["reached_KL_ALLOC_CAP_MB"]


def limit_address_space() -> None:
    """A process limit below the cap: malloc fails first, as it would on a small machine."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_MB << 20, ADDRESS_SPACE_MB << 20))


def test_slow_metrics_take_at_most_three_samples(agent):
    records = run_agent(agent, "--repeats", "5", "--target-us", "200", "--idle-ms", "20",
                        "--only", "syscall.null,irq.idle_total,mem.alloc_max",
                        env={"KL_ALLOC_CAP_MB": "4096"}, preexec_fn=limit_address_space)
    assert len(samples(records, "syscall.null")) == 5
    assert len(samples(records, "irq.idle_total")) == 3
    assert not samples(records, "irq.idle_timer")
    got = [float(r["value"]) for r in samples(records, "mem.alloc_max")]
    assert len(got) == 3 and all(0 < v < ADDRESS_SPACE_MB for v in got)


def test_block_metrics_on_a_scratch_file(agent, tmp_path):
    disk = tmp_path / "disk"
    disk.write_bytes(bytes(16 << 20))
    records = run_agent(agent, *SMALL, "--only", ",".join(BLOCK), "--block-dev", str(disk),
                        env={"KL_BLOCK_MB": "16"})
    for metric in BLOCK:
        got, na = samples(records, metric), nas(records, metric)
        if "direct" in metric and na:
            # O_DIRECT is not supported by every file system (tmpfs before Linux 6.6).
            assert na[0]["reason"] == f"open_failed_errno_{EINVAL}", na
            continue
        assert not na, na
        assert len(got) == 3 and all(r["unit"] == "MB/s" and float(r["value"]) > 0 for r in got), got
    assert 0 not in disk.read_bytes(), "the writes never reached the scratch file"


def without_fadvise() -> None:
    """Run in the child before exec: fadvise64 fails with ENOSYS from then on, as on a
    kernel without CONFIG_ADVISE_SYSCALLS.  A seccomp filter, in x86_64 numbering."""
    audit_arch_x86_64, nr_fadvise64 = 0xC000003E, 221
    ld_abs, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    seccomp_ret_errno, seccomp_ret_allow = 0x00050000, 0x7FFF0000
    program = [(ld_abs, 0, 0, 4),  # seccomp_data.arch
               (jeq, 0, 3, audit_arch_x86_64),
               (ld_abs, 0, 0, 0),  # seccomp_data.nr
               (jeq, 0, 1, nr_fadvise64),
               (ret, 0, 0, seccomp_ret_errno | errno.ENOSYS),
               (ret, 0, 0, seccomp_ret_allow)]
    filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *insn) for insn in program))
    fprog = ctypes.create_string_buffer(struct.pack("HP", len(program), ctypes.addressof(filters)))
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) or libc.prctl(pr_set_seccomp, seccomp_mode_filter, fprog, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl")


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the seccomp filter uses x86_64 numbers")
def test_cold_cached_reads_need_a_way_to_drop_the_page_cache(agent, tmp_path):
    disk = tmp_path / "disk"
    disk.write_bytes(bytes(16 << 20))
    records = run_agent(agent, *SMALL, "--only", "blk.seq_write_cached,blk.seq_read_cached",
                        "--block-dev", str(disk), env={"KL_BLOCK_MB": "16"}, preexec_fn=without_fadvise)
    assert len(samples(records, "blk.seq_write_cached")) == 3
    # Local mode never writes drop_caches, so without fadvise nothing can drop the pages.
    assert [r["reason"] for r in nas(records, "blk.seq_read_cached")] == ["cannot_drop_page_cache"]


def test_block_metrics_refuse_a_disk_smaller_than_the_region(agent, tmp_path):
    disk = tmp_path / "disk"
    disk.write_bytes(bytes(1 << 20))
    records = run_agent(agent, *SMALL, "--only", "blk.seq_write_cached", "--block-dev", str(disk),
                        env={"KL_BLOCK_MB": "2"})
    assert [r["reason"] for r in nas(records, "blk.seq_write_cached")] == ["scratch_disk_smaller_than_block_mb"]
    assert disk.read_bytes() == bytes(1 << 20)


def test_meminfo(full_run):
    (total,) = samples(full_run, "meminfo.MemTotal")
    assert total["unit"] == "KiB" and int(total["value"]) > 0
    assert all("(" not in r["metric"] for r in full_run if r["t"] == "sample")


def first_index(records, metric_prefix: str) -> int:
    return next(i for i, r in enumerate(records) if r.get("metric", "").startswith(metric_prefix))


def test_meminfo_describes_a_guest_at_rest(agent):
    """/proc/meminfo is read before mem.alloc_max (malloc until refused: reclaim), the disk and
    the file groups (page cache filled and written back) and the opt-in server load, so its rows
    do not move with what those leave behind.  Here mem.alloc_max really runs out of memory."""
    loaded = ["mem.alloc_max", *BLOCK, *FILE, *NET]
    records = run_agent(agent, "--repeats", "3", "--with", "net",
                        "--only", ",".join(["meminfo", *loaded]),
                        env={"KL_ALLOC_CAP_MB": "4096", "KL_NET_MS": "50"}, preexec_fn=limit_address_space)
    assert len(samples(records, "mem.alloc_max")) == 3   # the storm happened
    available = first_index(records, "meminfo.MemAvailable")
    assert all(available < first_index(records, metric) for metric in loaded)


def test_every_loaded_group_comes_after_meminfo_in_the_full_suite(full_run):
    metrics = [r["metric"] for r in full_run if r["t"] in ("sample", "na")]
    last_meminfo = max(i for i, m in enumerate(metrics) if m.startswith("meminfo."))
    assert last_meminfo < metrics.index("mem.alloc_max")
    assert all(m in METRICS for m in metrics[last_meminfo + 1:])
    assert metrics[last_meminfo + 1:] == [m for m in metrics if m in ("mem.alloc_max", *BLOCK, *FILE, *SYSFS)]


def test_only_runs_the_chosen_metric(agent):
    records = run_agent(agent, "--repeats", "2", "--target-us", "200", "--only", "syscall.null")
    assert {r["metric"] for r in records if r["t"] == "sample"} == {"syscall.null"}
    assert len(samples(records, "syscall.null")) == 2
    assert records[-1]["records"] == str(len(records) - 1)


def test_unknown_metric_is_reported(agent):
    records = run_agent(agent, "--only", "syscall.nul")
    assert nas(records, "syscall.nul") == [{"seq": "1", "t": "na", "metric": "syscall.nul", "reason": "unknown_metric"}]


def test_recompile_is_a_cache_hit(agent, monkeypatch):
    """The binary is taken, not made again: a new one would be a new file renamed into place
    (its modification time is the last use's: kernellab.cache dates entries by it)."""
    monkeypatch.setenv("KERNELLAB_CACHE", str(agent.parent.parent))
    inode = agent.stat().st_ino
    assert agent_binary() == agent
    assert agent.stat().st_ino == inode


def test_missing_compiler_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabError, match=r"apt-get install -y gcc-aarch64-linux-gnu"):
        agent_binary("aarch64-linux-gnu-gcc", "arm64")


NET = ("net.stream_bw", "net.softirq_pct", "net.ksoftirqd_pct", "net.req_p50", "net.req_p99", "net.ctxsw_rate")


def test_the_data_server_load_runs_only_when_asked(agent, full_run):
    """net.* (seed 002's situation: a server streaming to clients while CPU hogs compete)
    costs seconds of load per window: the default suite leaves it out, --with net runs it."""
    assert not [r for r in full_run if r.get("metric", "").startswith("net.")]
    records = run_agent(agent, "--repeats", "3", "--with", "net", "--only", "syscall.null," + ",".join(NET),
                        env={"KL_NET_MS": "100"})
    got = {m: [float(r["value"]) for r in samples(records, m)] for m in NET}
    assert all(len(v) == 3 for v in got.values()), got
    assert min(got["net.stream_bw"]) > 0 and min(got["net.ctxsw_rate"]) > 0
    assert all(0 <= v <= 100 for v in got["net.softirq_pct"])
    assert all(0 < a <= b for a, b in zip(got["net.req_p50"], got["net.req_p99"], strict=True))
    assert len(samples(records, "syscall.null")) == 3
    with_only = run_agent(agent, "--repeats", "3", "--with", "net", "--only", "syscall.null")
    assert {r["metric"] for r in with_only if r["t"] == "sample"} == {"syscall.null"}


FINE_TIMER_VALUE = re.compile(r"res_(?P<res>-?\d+)ns_after_(?P<ms>\d+)ms")


@pytest.mark.parametrize("only", ["lat.timer_p99," + ",".join(NET), "net.req_p50", "lat.timer_max"])
def test_groups_that_sleep_to_deadlines_wait_for_fine_timers_first(agent, only):
    """An x86 guest starts on tick-based timers: lat.* and net.* (windows of sleeps, requests
    2 ms apart) both wait for high resolution in the first seconds of uptime, before their
    first window, once per group, and say what they got, even when a probe boots only them."""
    records = run_agent(agent, "--repeats", "2", "--only", only, env={"KL_NET_MS": "50"})
    groups = sorted({m.split(".")[0] for m in only.split(",")})
    waits = [(i, r) for i, r in enumerate(records) if r["t"] == "meta" and r["key"].startswith("fine_timers.")]
    assert sorted(r["key"] for _, r in waits) == [f"fine_timers.{g}" for g in groups]
    for i, r in waits:
        group = r["key"].removeprefix("fine_timers.")
        assert i < first_index(records, group + "."), (group, records)
        value = FINE_TIMER_VALUE.fullmatch(r["value"])
        assert value, r
        # This host is long past the first seconds: no wait, whatever its timers are.
        assert int(value["ms"]) == 0 and int(value["res"]) > 0, r
    assert not [r for r in run_agent(agent, "--only", "syscall.null") if r.get("key", "").startswith("fine_")]


def test_sysfs_is_counted_once_after_meminfo(agent, full_run):
    """sysfs.entries: every entry under /sys (links counted, not followed), one walk; its
    twin sysfs.bus_devices: the entries of /sys/bus/*/devices. Both after meminfo, whose
    Slab must not see the dentries the walk brings in."""
    metrics = [r["metric"] for r in full_run if r["t"] == "sample"]
    assert metrics[-2:] == list(SYSFS)
    assert max(i for i, m in enumerate(metrics) if m.startswith("meminfo.")) < metrics.index("sysfs.entries")
    (entries,), (devices,) = samples(full_run, "sysfs.entries"), samples(full_run, "sysfs.bus_devices")
    on_buses = sum(len(os.listdir(d.path + "/devices")) for d in os.scandir("/sys/bus")
                   if os.path.isdir(d.path + "/devices"))
    assert float(devices["value"]) == on_buses   # the host's devices do not come and go in a test
    assert float(entries["value"]) > on_buses
    alone = run_agent(agent, "--repeats", "5", "--only", "sysfs.bus_devices")
    assert [(r["t"], r["metric"]) for r in alone[1:-1] if r["t"] != "meta"] == [("sample", "sysfs.bus_devices")]


def test_file_metrics_on_a_file_in_a_directory(agent, tmp_path):
    """file.* (the fs: axis's dd): in PID-1 mode on the file system the host made; in local
    mode on tst.dd in KL_FILE_DIR, written over in place, read back cold."""
    data = tmp_path / "tst.dd"
    data.write_bytes(b"\x01" * (8 << 20))
    records = run_agent(agent, *SMALL, "--only", ",".join(FILE),
                        env={"KL_FILE_DIR": str(tmp_path), "KL_FILE_MB": "4"})
    for metric in FILE:
        got, na = samples(records, metric), nas(records, metric)
        if "direct" in metric and na:
            assert na[0]["reason"] == f"open_failed_errno_{EINVAL}", na   # tmpfs before 6.6: no O_DIRECT
            continue
        assert not na, na
        assert len(got) == 3 and all(r["unit"] == "MB/s" and float(r["value"]) > 0 for r in got), got
    written = data.read_bytes()
    assert len(written) == 8 << 20, "the file was truncated or grown"
    assert written[:4 << 20] == b"\x5a" * (4 << 20) and written[4 << 20:] == b"\x01" * (4 << 20)
    too_big = run_agent(agent, *SMALL, "--only", "file.seq_read_cached",
                        env={"KL_FILE_DIR": str(tmp_path), "KL_FILE_MB": "9"})
    assert [r["reason"] for r in nas(too_big, "file.seq_read_cached")] == ["file_smaller_than_KL_FILE_MB"]


# -- workloads that need a disk (workload.c, file.c: workload_disk_dir) -------------------------

def workloads_file(tmp_path, *workloads: tuple[str, str, list[str]], needs: tuple[str, str] = ("1", "0")) -> str:
    """The file the host writes (guest.workloads.encode), by hand: each workload's label, its
    disk word (as given: tests send hostile ones too), and argv; its client not the host's,
    needing `needs` (vCPUs, MiB of memory), no files, no server."""
    words = ["kernellab-workloads 5", str(len(workloads))]
    for label, disk, argv in workloads:
        words += [label, "10000", disk, "0", *needs, "stdout", "0", str(len(argv)), *argv, "0"]
    path = tmp_path / "workloads"
    path.write_bytes(b"".join(w.encode() + b"\0" for w in words))
    return str(path)


def workload_runs(agent, path: str, env: dict[str, str] | None = None) -> list[dict[str, str]]:
    records = run_agent(agent, "--only", "syscall.null", "--repeats", "1", env={"KL_WORKLOADS": path, **(env or {})})
    return [r for r in records if r["t"].startswith("wl_") or r.get("key") == "workloads"]


def output(records, index: int) -> str:
    from urllib.parse import unquote
    return "".join(unquote(r["data"]) for r in records if r["t"] == "wl_out" and r["w"] == str(index))


def test_a_workload_that_needs_a_disk_works_on_its_file_system(agent, tmp_path):
    """Local mode: KL_FILE_DIR stands for the file system (PID-1 mode: the one mounted on
    /mnt/fs); a workload that needs no disk keeps the agent's own directory."""
    disk = tmp_path / "fs"
    disk.mkdir()
    path = workloads_file(tmp_path, ("on-disk", "1", ["pwd"]), ("on-tmp", "0", ["pwd"]))
    records = workload_runs(agent, path, {"KL_FILE_DIR": str(disk)})
    ends = [(r["w"], r["status"]) for r in records if r["t"] == "wl_end"]
    assert ends == [("0", "ok"), ("1", "ok")], records
    assert output(records, 0) == f"{disk}/wl-0\n"
    assert output(records, 1).startswith("/tmp/kl-agent-") and output(records, 1).endswith("/wl-1\n")
    assert list(disk.iterdir()) == []   # its directory removed after it, as on the tmpfs


def test_a_workload_whose_disk_is_missing_is_not_run_and_says_why(agent, tmp_path):
    path = workloads_file(tmp_path, ("on-disk", "1", ["pwd"]), ("on-tmp", "0", ["pwd"]))
    records = workload_runs(agent, path, {"KL_FILE_DIR": str(tmp_path / "not-there")})
    [missing] = [r for r in records if r["t"] == "wl_end" and r["w"] == "0"]
    assert missing == {**missing, "status": "no_disk", "code": "0", "elapsed_ns": "0",
                       "reason": "KL_FILE_DIR_is_not_a_directory"}
    assert output(records, 0) == ""   # never run on the agent's own directory instead
    assert [r["status"] for r in records if r["t"] == "wl_end" and r["w"] == "1"] == ["ok"]


@pytest.mark.parametrize("disk", ["2", "-1", "yes", "", "1 ", "99999999999999999999"])
def test_a_hostile_disk_word_is_a_damaged_file(agent, tmp_path, disk):
    records = workload_runs(agent, workloads_file(tmp_path, ("w", disk, ["pwd"])))
    assert [(r["t"], r.get("value")) for r in records] == [("meta", "damaged")]


@pytest.mark.parametrize("word", ["-1", "x", "", "9999999999999"])
def test_a_hostile_needs_word_is_a_damaged_file(agent, tmp_path, word):
    for needs in ((word, "0"), ("1", word)):
        records = workload_runs(agent, workloads_file(tmp_path, ("w", "0", ["pwd"]), needs=needs))
        assert [(r["t"], r.get("value")) for r in records] == [("meta", "damaged")]


# -- what a workload needs of the machine (workload.c: too_small) --------------------------------

def machine_mib() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20


def test_a_workload_needing_more_cpus_or_memory_than_the_machine_has_is_not_run_and_says_what_it_has(agent, tmp_path):
    cpus = len(os.sched_getaffinity(0))
    mib = machine_mib()
    for needs, reason in (((str(cpus + 1), "0"), f"vcpus_{cpus}"), (("1", str(mib + 1)), f"memory_mib_{mib}")):
        path = workloads_file(tmp_path, ("big", "0", ["echo", "ran"]), needs=needs)
        [end] = [r for r in workload_runs(agent, path) if r["t"] == "wl_end"]
        assert end == {**end, "status": "too_small", "code": "0", "elapsed_ns": "0", "reason": reason}
    # What the machine has is enough: it runs.
    fits = workloads_file(tmp_path, ("fits", "0", ["echo", "ran"]), needs=(str(cpus), str(mib)))
    records = workload_runs(agent, fits)
    assert [r["status"] for r in records if r["t"] == "wl_end"] == ["ok"] and output(records, 0) == "ran\n"


# -- workloads whose client is the host's (workload.c: wl_ready, await_server, link_missing) ----

def host_workloads_file(tmp_path, *servers: tuple[str, list[str]], argv: tuple[str, ...] = ()) -> str:
    """The file the host writes, by hand, for workloads whose client runs on the host: each
    one's label and its server's argv, ready at a line "ready", a timeout of 1 s; `argv`:
    client words, which the host never sends (a damaged file)."""
    words = ["kernellab-workloads 5", str(len(servers))]
    for label, server in servers:
        words += [label, "1000", "0", "1", "0", "0", "stdout", "0", str(len(argv)), *argv]
        words += [str(len(server)), *server, "line", "^ready", "1000", "TERM", "200"] if server else ["0"]
    path = tmp_path / "workloads"
    path.write_bytes(b"".join(w.encode() + b"\0" for w in words))
    return str(path)


def test_a_server_whose_client_is_the_hosts_is_ready_then_waited_for_until_it_ends(agent, tmp_path):
    """No client here: t=wl_ready once the server is, then its own end is the workload's
    (iperf3 --one-off leaves after the host's test): ok, a failure's status, or killed at
    the timeout."""
    path = host_workloads_file(tmp_path, ("done", ["sh", "-c", "echo ready; sleep 0.3; echo bye"]),
                               # (it outlives its ready line: one that exits at once may end
                               # before the agent reads the line, which is server_failed)
                               ("fails", ["sh", "-c", "echo ready; sleep 0.5; exit 3"]),
                               ("stays", ["sh", "-c", "echo ready; exec sleep 30"]))
    records = workload_runs(agent, path)
    kinds = [(r["t"], r["w"]) for r in records if r["t"] in ("wl_begin", "wl_ready", "wl_end") and r["w"] == "0"]
    assert kinds == [("wl_begin", "0"), ("wl_ready", "0"), ("wl_end", "0")]
    ends = {r["w"]: r for r in records if r["t"] == "wl_end"}
    assert (ends["0"]["status"], ends["1"]["status"], ends["2"]["status"]) == ("ok", "server_died", "timeout")
    assert ends["1"]["code"] == "3" and ends["2"]["code"] == "1000"
    assert 0.3e9 <= int(ends["0"]["elapsed_ns"]) < 1e9   # from ready to its end
    from urllib.parse import unquote
    assert "".join(unquote(r["data"]) for r in records if r["t"] == "wl_srv" and r["w"] == "0") == "ready\nbye\n"
    assert not [r for r in records if r["t"] == "wl_out"]


def test_as_a_program_the_agent_runs_them_where_the_interface_named_is(agent, tmp_path):
    """KL_NET_IF names the interface the host's link comes in on: missing, the workload is
    not run (as in a guest with no network device); unset, nothing is checked."""
    path = host_workloads_file(tmp_path, ("net", ["sh", "-c", "echo ready; sleep 0.1"]))
    [missing] = [r for r in workload_runs(agent, path, {"KL_NET_IF": "kl-no-nic0"}) if r["t"] == "wl_end"]
    assert missing == {**missing, "status": "no_link", "code": "0", "elapsed_ns": "0", "reason": "no_network_device"}
    for env in ({"KL_NET_IF": "lo"}, {}):
        assert [r["status"] for r in workload_runs(agent, path, env) if r["t"] == "wl_end"] == ["ok"]


@pytest.mark.parametrize("why, servers, argv", [
    ("client words", [("net", ["sh", "-c", "echo ready"])], ("sh",)),
    ("no server", [("net", [])], ()),
])
def test_a_host_workload_with_client_words_or_no_server_is_a_damaged_file(agent, tmp_path, why, servers, argv):
    records = workload_runs(agent, host_workloads_file(tmp_path, *servers, argv=argv))
    assert [(r["t"], r.get("value")) for r in records] == [("meta", "damaged")], why
