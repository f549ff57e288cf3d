"""The metric catalog is consistent data, and it matches what the agent measures."""

import re
import subprocess

from kernellab import modes
from kernellab.agent.compile import agent_binary
from kernellab.build import FIGURE_FIELDS, FIGURE_METRICS
from kernellab.guest.records import RecordStream
from kernellab.metrics.catalog import catalog, describe, from_source, groups, opt_in_groups, sort_key


def test_every_entry_is_well_formed():
    for m in catalog().values():
        assert m.better in ("lower", "higher"), m
        assert m.group in groups(), m
        assert m.clock in ("build", "host", "guest", "count"), m
        assert m.modes and set(m.modes) <= set(modes.NAMES), m
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
    # Every opt-in group too (--with), in short windows: the catalog lists them all.
    groups = ",".join(sorted(opt_in_groups()))
    out = subprocess.run([str(agent_binary()), "--repeats", "1", "--target-us", "100", "--idle-ms", "10",
                          "--with", groups], capture_output=True, text=True, timeout=120,
                         env={"KL_ALLOC_CAP_MB": "8", "KL_NET_MS": "20"}).stdout
    stream = RecordStream()
    for line in out.splitlines():
        stream.feed(line)
    assert stream.complete, stream.rejected
    return {r.fields["metric"] for r in stream.records if r.type in ("sample", "na")
            and not r.fields["metric"].startswith("meminfo")}


def test_catalog_and_agent_agree():
    measured = agent_metrics()
    in_guest = {n for n in from_source("agent") if not n.startswith("meminfo.")}
    assert measured == in_guest


def test_the_build_reads_exactly_the_catalogs_build_metrics():
    assert set(FIGURE_FIELDS) == set(FIGURE_METRICS) == from_source("build")


def test_a_bad_catalog_entry_is_one_line_naming_the_key():
    import pytest

    from kernellab import datafile
    from kernellab.errors import LabError
    from kernellab.metrics.catalog import _File
    good = {"name": "x.y", "label": "x", "unit": "ns", "better": "lower", "group": "syscalls",
            "clock": "guest", "source": "agent"}
    groups = ["syscalls", "initcalls", "memory", "other"]
    assert datafile.load(_File, {"groups": groups, "metric": [good]}, "m.toml").metric[0].source == "agent"
    with pytest.raises(LabError, match=r"^m.toml: metric #1: better: 'faster' is not one of 'lower', 'higher'$"):
        datafile.load(_File, {"groups": groups, "metric": [{**good, "better": "faster"}]}, "m.toml")
    with pytest.raises(LabError, match=r"^m.toml: metric #1: unknown key 'units' \(allowed: better, clock, "):
        datafile.load(_File, {"groups": groups, "metric": [{**good, "units": "ns"}]}, "m.toml")
    with pytest.raises(LabError, match=r"^m.toml: metric #1: metric x.y: unknown mode 'cycles'"):
        datafile.load(_File, {"groups": groups, "metric": [{**good, "modes": ["cycles"]}]}, "m.toml")
    with pytest.raises(LabError, match=r"^m.toml: metric x.y: group 'syscall' is not one of syscalls, initcalls, "):
        datafile.load(_File, {"groups": groups, "metric": [{**good, "group": "syscall"}]}, "m.toml")
    with pytest.raises(LabError, match=r"^m.toml: groups: 'other' is missing \(describe\(\) gives it"):
        datafile.load(_File, {"groups": groups[:3], "metric": [good]}, "m.toml")
    with pytest.raises(LabError, match=r"^m.toml: missing key 'groups'$"):
        datafile.load(_File, {"metric": [good]}, "m.toml")
