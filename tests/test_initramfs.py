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


def test_archive_is_deterministic():
    files = {"init": (0o100755, b"abc")}
    assert build_cpio(files) == build_cpio(dict(files))
