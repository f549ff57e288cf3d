"""Which CONFIG_ option builds each module of a kernel tree, read from its Makefiles
(`obj-$(CONFIG_VIRTIO_NET) += virtio_net.o`): how kernellab knows that a variant keeps the
drivers a remote machine needs to answer ssh after a kexec."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_OBJ = re.compile(r"^obj-\$\((CONFIG_\w+)\)\s*[+:]?=\s*(.*?)\s*$")
_MODULE = re.compile(r"([\w-]+)\.o\b")


@cache
def module_options(tree: Path) -> dict[str, str]:
    """module name (dashes as underscores, as the kernel names modules) -> its option."""
    out: dict[str, str] = {}
    for makefile in sorted(tree.glob("**/Makefile")):
        try:
            text = makefile.read_text(errors="replace")
        except OSError:
            continue
        for line in text.replace("\\\n", " ").splitlines():
            m = _OBJ.match(line.strip())
            if m:
                for name in _MODULE.findall(m.group(2)):
                    out.setdefault(name.replace("-", "_"), m.group(1))
    return out
