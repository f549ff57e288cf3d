"""The metric catalog is consistent data, and it matches what the agent measures."""

import re
import subprocess

from kernellab.agent.compile import agent_binary
from kernellab.measure.catalog import GROUPS, MODES, catalog, describe, sort_key
from kernellab.measure.records import RecordStream


def test_every_entry_is_well_formed():
    for m in catalog().values():
        assert m.better in ("lower", "higher"), m
        assert m.group in GROUPS, m
        assert m.clock in ("build", "host", "guest", "count"), m
        assert m.modes and set(m.modes) <= set(MODES), m
        assert all(re.fullmatch(r"CONFIG_[A-Z0-9_]+", n) for n in m.needs), m


def test_bandwidths_mean_nothing_under_icount():
    for name in ("bw.mem_read", "bw.mem_write", "bw.mem_copy", "blk.seq_read_direct"):
        assert not catalog()[name].valid_in("icount") and catalog()[name].valid_in("wall")
    assert catalog()["syscall.null"].valid_in("icount")


def test_uncatalogued_metrics_get_a_plain_description():
    assert describe("meminfo.Bounce", "KiB").group == "memory"
    assert describe("boot.initcall.pci_init", "us").group == "initcalls"
    assert describe("something.new", "ns").group == "other"
    assert sort_key("build.wall") < sort_key("syscall.null") < sort_key("something.new")


def agent_metrics():
    out = subprocess.run([str(agent_binary()), "--repeats", "1", "--target-us", "100", "--idle-ms", "10"],
                         capture_output=True, text=True, timeout=120, env={"KL_ALLOC_CAP_MB": "8"}).stdout
    stream = RecordStream()
    for line in out.splitlines():
        stream.feed(line)
    assert stream.complete, stream.rejected
    return {r.fields["metric"] for r in stream.records if r.type in ("sample", "na")
            and not r.fields["metric"].startswith("meminfo")}


def test_catalog_and_agent_agree():
    measured = agent_metrics()
    in_guest = {n for n, m in catalog().items()
                if m.clock in ("guest", "count") and not n.startswith(("boot.", "mem.kernel.", "meminfo."))}
    assert measured == in_guest
