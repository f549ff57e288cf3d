"""fio's cross-check pair in its band's setting (docs/crosschecks.md, "Under QEMU, wall
clock"): lab-minimal+workloads on an ext4 disk, wall mode under QEMU. Its kernel turns on
System V IPC, which rebuilds most objects, so it is built ahead in a tree of its own
(tests/prefetch.py) rather than in the shared tree between the x86_64 chain's builds."""

import pytest

from kernellab.experiments import crosscheck as run_crosscheck
from kernellab.experiments.spec import parse_short
from kernellab.report import crosscheck
from kernellab.store import Store

pytestmark = pytest.mark.integration


def test_fio_and_the_agent_read_the_disk_within_the_docs_wall_band_in_a_real_guest(tmp_path, prefetched):
    """fio's pair alone (--pair), one boot; both read in 1 MiB O_DIRECT requests in the same
    boot, the agent first."""
    [pair] = [p for p in crosscheck.load().pair if p.band_mode == "wall"]
    result, failures = run_crosscheck.run(Store(tmp_path / "store.db"), parse_short(pair.band_variant), "wall", 1,
                                          600, None, log=lambda line: None, only=[pair.name])
    assert failures == []
    [row] = result["pairs"]
    assert row["verdict"] == crosscheck.IN_BAND, row
