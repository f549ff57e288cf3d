"""`size vmlinux` (Berkeley format) computed with pyelftools, and the one way kernellab opens
an ELF file."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.construct.core import ConstructError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from .errors import LabError


@contextlib.contextmanager
def elf_file(path: Path) -> Iterator[ELFFile]:
    """`path` as an ELFFile for the block. A file that is not ELF, or is damaged or cut short
    (pyelftools finds out while the block reads it), or that cannot be opened, is a one-line
    LabError, not a traceback."""
    try:
        with path.open("rb") as f:
            yield ELFFile(f)
    except (ELFError, ConstructError) as exc:
        raise LabError(f"{path} is not an ELF file kernellab can read ({exc}): give a vmlinux") from None
    except OSError as exc:
        raise LabError(f"cannot read {path}: {exc.strerror or exc}") from None


def berkeley_size(path: Path) -> dict[str, int]:
    """text (code + read-only data), data (writable), bss (zero-filled), as binutils' size."""
    text = data = bss = 0
    with elf_file(path) as elf:
        for section in elf.iter_sections():
            flags = section["sh_flags"]
            if not flags & SH_FLAGS.SHF_ALLOC:
                continue
            size = section["sh_size"]
            if section["sh_type"] == "SHT_NOBITS":
                bss += size
            elif flags & SH_FLAGS.SHF_WRITE:
                data += size
            else:
                text += size
    return {"text": text, "data": data, "bss": bss}
