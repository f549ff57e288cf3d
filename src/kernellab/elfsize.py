"""`size vmlinux` (Berkeley format) computed with pyelftools."""

from __future__ import annotations

from pathlib import Path

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile


def berkeley_size(path: Path) -> dict[str, int]:
    """text (code + read-only data), data (writable), bss (zero-filled), as binutils' size."""
    text = data = bss = 0
    with path.open("rb") as f:
        for section in ELFFile(f).iter_sections():
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
