"""Where kernellab keeps its cache (sources, build trees, artifacts, ccache, store)."""

import os
from pathlib import Path

import platformdirs


def cache_root() -> Path:
    env = os.environ.get("KERNELLAB_CACHE")
    root = Path(env) if env else Path(platformdirs.user_cache_dir("kernellab"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_store() -> Path:
    return cache_root() / "kernellab.sqlite"
