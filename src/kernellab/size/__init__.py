"""Where a kernel image's bytes go: per symbol (the kernel's bloat-o-meter view of two
vmlinux files) and per object and directory (recorded when a variant is built, since the
shared build tree keeps only the last build's objects)."""
