"""`kernellab size`'s result (size/view.py: two kernels' symbols and directories side by
side) as a kind of result (report/kinds.py). Its bloat-o-meter format reads the vmlinux
files themselves, so only `kernellab size` writes it, never from a saved file."""

from __future__ import annotations

from ..size import view as size_view
from . import kinds

SIZE = kinds.register(kinds.Kind(
    name="size", tag="kernellab-size", what="a size comparison", version=1, readable=(1,), schema="size-schema.json",
    rewrite="write it again with `kernellab size A B --format json`",
    renderers={"table": lambda size, view: size_view.text(size)}, formats=("table", "json")))
