"""kernellab: build, boot, measure and compare Linux kernel variants."""

__version__ = "0.1.0"
