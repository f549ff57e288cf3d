import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernellab.elfsize import berkeley_size


@pytest.mark.skipif(shutil.which("size") is None, reason="binutils size not installed")
def test_matches_binutils_size():
    # Any ELF will do: the Python interpreter is always there.
    target = Path(sys.executable).resolve()
    out = subprocess.run(["size", "-B", str(target)], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(x) for x in out.splitlines()[1].split()[:3])
    assert berkeley_size(target) == {"text": text, "data": data, "bss": bss}
