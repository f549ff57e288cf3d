import shutil
import subprocess

import pytest

from kernellab.initramfs import build_cpio


def test_newc_archive_lists_with_cpio(tmp_path):
    blob = build_cpio({"init": (0o100755, b"\x7fELF" + b"x" * 13), "dev": (0o040755, b"")})
    assert blob.startswith(b"070701") and b"TRAILER!!!" in blob
    assert len(blob) % 4 == 0
    if shutil.which("cpio") is None:
        pytest.skip("cpio not installed")
    out = subprocess.run(["cpio", "-it", "--quiet"], input=blob, capture_output=True, check=True)
    assert out.stdout.decode().split() == ["dev", "init"]
    subprocess.run(["cpio", "-id", "--quiet"], input=blob, cwd=tmp_path, check=True)
    assert (tmp_path / "init").read_bytes() == b"\x7fELF" + b"x" * 13
    assert (tmp_path / "init").stat().st_mode & 0o777 == 0o755


def test_archive_carries_no_time_owner_or_host_inode():
    """The same agent gives the same bytes on any machine, any day: every header's mtime,
    uid and gid are zero and inodes are numbered in name order."""
    blob = build_cpio({"b": (0o100755, b"abc"), "a": (0o100644, b"de")})
    offset, inodes = 0, []
    while True:
        header = blob[offset:offset + 110]
        fields = [int(header[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        ino, _mode, uid, gid, _nlink, mtime, size, *_rest, namesize, _check = fields
        name = blob[offset + 110:offset + 110 + namesize - 1].decode()
        if name == "TRAILER!!!":
            break
        assert (uid, gid, mtime) == (0, 0, 0), name
        inodes.append((name, ino))
        offset += 110 + namesize
        offset += -offset % 4
        offset += size + (-size % 4)
    assert inodes == [("a", 1), ("b", 2)]
