"""kernellab: build, boot, measure and compare Linux kernel variants."""

from importlib import metadata

# The version is pyproject.toml's, as installed: stated once.
try:
    __version__ = metadata.version("kernellab")
except metadata.PackageNotFoundError:
    __version__ = "unknown (not installed: pip install -e .)"
