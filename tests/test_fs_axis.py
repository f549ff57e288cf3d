"""The scratch disk's file system as a variant's axis: `fs:ext4-4k` (`fs = "ext4-64k"` in a
file). An ext4 image made on the host (mke2fs -d) holding one allocated file, made once and
cached, attached with snapshot=on; part of what a run measured (its key, its command line,
its target's details), never of the build; wall mode only."""

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from kernellab import arches
from kernellab.errors import LabError
from kernellab.experiments import lab
from kernellab.experiments.spec import experiment_from_data, parse_short
from kernellab.targets import fsimage
from kernellab.targets.qemu import QemuTarget

needs_mke2fs = pytest.mark.skipif(shutil.which("mke2fs") is None, reason="e2fsprogs not installed")


def test_the_short_syntax_and_files_take_fs():
    assert parse_short("a=lab-minimal+ext4+fs:ext4-64k").fs == "ext4-64k"
    assert parse_short("a=lab-minimal+ext4+fs:ext4-64k").fragments == ["ext4"]
    assert parse_short("lab-minimal").fs is None
    exp = experiment_from_data({"variant": [{"name": "a", "base": "lab-minimal", "fs": "ext4-4k"}]}, "e.toml")
    assert exp.variants[0].fs == "ext4-4k"


@pytest.mark.parametrize("text", ["x=lab-minimal+fs:xfs", "x=lab-minimal+fs:ext4-3k", "x=lab-minimal+fs:"])
def test_an_unknown_file_system_is_one_line(text):
    with pytest.raises(LabError, match=r"unknown file system .*use one of ext4-1k, .*ext4-4k, .*ext4-64k") as exc:
        parse_short(text)
    assert "\n" not in str(exc.value)


@pytest.fixture
def small_images(tmp_path, monkeypatch):
    """Images of a 4 MiB file, in this test's cache."""
    monkeypatch.setenv("KERNELLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fsimage, "FILE_MIB", 4)


@needs_mke2fs
def test_the_image_is_made_once_with_its_file_allocated(small_images, monkeypatch):
    spec = fsimage.parse("ext4-64k")
    image = fsimage.image(spec)
    assert image.parent.name == "fs-images" and image.name.startswith("ext4-64k-4m-")
    dumped = subprocess.run(["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=True).stdout
    assert "Block size:               65536" in dumped
    stat = subprocess.run(["debugfs", "-R", f"stat /{fsimage.FILE_NAME}", str(image)],
                          capture_output=True, text=True, check=True).stdout
    assert "Size: 4194304" in stat
    # Every block allocated (a sparse file would read holes, never the disk): 512-byte units.
    assert int(stat.split("Blockcount: ")[1].split()[0]) * 512 >= 4 << 20
    subprocess.run(["e2fsck", "-fn", str(image)], capture_output=True, check=True)
    # Cached: asked again, nothing runs; another block size is another image.
    monkeypatch.setattr(fsimage, "run_checked", lambda *a, **k: pytest.fail("made twice"))
    assert fsimage.image(spec) == image
    assert fsimage.image_key(fsimage.parse("ext4-4k")) != fsimage.image_key(spec)


@needs_mke2fs
@pytest.mark.parametrize("arch", ["ppc44x", "x86_64"])
def test_qemu_attaches_it_beside_the_scratch_disk_with_snapshot_on(arch):
    target = QemuTarget(arches.load(arch), 64, fs=fsimage.parse("ext4-64k"))
    argv = target.command(Path("k"), None, "", "wall", Path("/r/scratch.img"), Path("/c/fs.img"))
    drives = [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]
    assert len(drives) == 2
    assert drives[0].startswith("file=/r/scratch.img,") and "snapshot" not in drives[0]
    assert drives[1].startswith("file=/c/fs.img,") and drives[1].endswith(",snapshot=on")
    if arch == "ppc44x":
        assert "id=fsdisk" in drives[1] and "virtio-blk-pci,drive=fsdisk" in argv
    details = target.describe("wall").details["file_system"]
    assert details.startswith("ext4-64k: ext4, 64 KiB blocks, /tst.dd") and "made by mke2fs 1." in details


def test_icount_mode_refuses_a_file_system_in_one_line(lab, capsys):
    with pytest.raises(LabError, match="fs:ext4-4k needs --mode wall: a disk's I/O completes in host time"):
        QemuTarget(arches.load("x86_64"), 64, fs=fsimage.parse("ext4-4k"))._check_fs("icount")
    assert lab.main("compare", "--mode", "icount", "a=tinyconfig+fs:ext4-4k") == 2
    err = capsys.readouterr().err
    assert "a (fs:ext4-4k): a file system on a disk needs --mode wall" in err and err.count("\n") == 1


def test_the_agent_is_told_and_the_run_key_holds_the_block_size(tmp_path):
    """The QEMU target that attaches the disk tells the agent (KL_FS), and no one else."""
    options, initrd = lab.RunOptions("wall"), tmp_path / "agent.cpio"
    four, sixty_four = parse_short("a=lab-minimal+fs:ext4-4k"), parse_short("a=lab-minimal+fs:ext4-64k")
    target = QemuTarget(arches.load("x86_64"), 64, fs=fsimage.parse("ext4-4k"))
    argv = target.command(Path("k"), None, options.cmdline(four), "wall", None, Path("/c/fs.img"))
    assert "KL_FS=ext4" in argv[argv.index("-append") + 1].split()
    argv = QemuTarget(arches.load("x86_64"), 64).command(Path("k"), None, options.cmdline(four), "wall")
    assert "KL_FS" not in argv[argv.index("-append") + 1]
    assert "KL_FS" not in options.cmdline(four)
    assert options.key(initrd, sixty_four).endswith(" fs=ext4-64k")
    assert options.key(initrd, four) != options.key(initrd, sixty_four)


@needs_mke2fs
def test_a_wall_compare_boots_with_the_image_and_reports_it(lab, small_images, monkeypatch):
    out = lab.tmp / "r.json"
    assert lab.main("compare", "--mode", "wall", "--runs", "1", "--max-runs", "1", "a=tinyconfig",
                    "b=tinyconfig+fs:ext4-4k", "--format", "json", "-o", str(out)) == 0
    a, b = json.loads(out.read_text())["variants"]
    assert "fs" not in a and b["fs"] == "ext4-4k"
    assert "file_system" not in a["runs"][0]["target"]["details"]
    assert b["runs"][0]["target"]["details"]["file_system"].startswith("ext4-4k: ext4, 4 KiB blocks")
    assert a["build"]["key"] == b["build"]["key"]   # one kernel, two disks
    rows = sqlite3.connect(lab.store).execute("SELECT command, options_key FROM runs ORDER BY id").fetchall()
    (command, key), = [r for r in rows if "KL_FS" in r[0]]
    assert "snapshot=on" in command and key.endswith(" fs=ext4-4k")
    assert [p for p in (lab.cache / "fs-images").iterdir() if p.suffix == ".img"]


@needs_mke2fs
def test_an_image_for_the_workloads_has_their_room_free_and_no_file(small_images):
    """Without fs:, the workloads' disk is ext4-4k with no tst.dd and their room free; with
    fs:, the axis's image gains the room (another image, another key)."""
    spec = fsimage.for_workloads(None, 200)
    assert (spec.name, spec.block, spec.file_mib, spec.room_mib) == ("ext4-4k", 4096, 0, 200)
    image = fsimage.image(spec)
    dumped = subprocess.run(["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=True).stdout
    free_blocks = int(dumped.split("Free blocks:")[1].split()[0])
    assert free_blocks * 4096 >= 200 << 20
    listing = subprocess.run(["debugfs", "-R", "ls -l /", str(image)], capture_output=True, text=True).stdout
    assert fsimage.FILE_NAME not in listing
    axis = fsimage.parse("ext4-64k")
    with_room = fsimage.for_workloads(axis, 50)
    assert (with_room.name, with_room.file_mib, with_room.room_mib) == ("ext4-64k", 4, 50)
    assert fsimage.image_key(with_room) != fsimage.image_key(axis)
    assert fsimage.image_mib(with_room) >= fsimage.image_mib(axis) + 50
