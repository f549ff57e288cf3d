"""Debian's prebuilt kernels as variants, measured with no build: the base
`debian-image:VERSION[-FLAVOUR]` (`debian-image:6.12-cloud`, `debian-image:6.1`).

The flavour's meta-package names the concrete `linux-image-*` package (`apt-cache depends`),
which is downloaded and unpacked into kernellab's cache, never installed (its hooks write
/boot). The package's name and version are the variant's identity, as a source's content
hash is a built variant's. What kernellab takes from it:
- the bzImage, booted as is;
- its config (/boot/config-*), the variant's config (for the report's "needs CONFIG_X"
  and for `kernellab audit`);
- sizes, from the ELF inside the bzImage (its payload decompressed as the kernel's
  scripts/extract-vmlinux does);
- the modules the agent needs (AF_ALG for the in-kernel AES, the virtio disk for the block
  metrics): the agent's initramfs carries them in an order computed here, dependencies
  first, and the agent loads them with finit_module before it measures.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from elftools.elf.elffile import ELFFile

from . import apt, paths
from .build import FIGURE_FIELDS
from .elfsize import berkeley_size
from .errors import LabError
from .metrics.catalog import catalog
from .proc import require_tool

PREFIX = "debian-image:"
KIND = "debian-image"   # a Source's kind: the package is the variant's source
ARCH = "x86_64"   # the only arch whose images kernellab boots for now
# version -> flavour -> the meta-package that depends on the current image of that flavour.
META_PACKAGES = {
    "6.1": {"generic": "linux-image-amd64", "cloud": "linux-image-cloud-amd64", "rt": "linux-image-rt-amd64"},
    "6.12": {"generic": "linux-image-6.12-amd64", "cloud": "linux-image-6.12-cloud-amd64",
             "rt": "linux-image-6.12-rt-amd64"},
}
EXAMPLE = "debian-image:6.12-cloud"

# The module each option builds when it is =m, for the options the agent's metrics need
# (the catalog's `needs`) and those of MACHINE_NEEDS. An =m option missing here is
# reported, and the metrics that need it say n/a.
MODULE_OF = {
    "CONFIG_CRYPTO_USER_API": "af_alg",
    "CONFIG_CRYPTO_USER_API_SKCIPHER": "algif_skcipher",
    "CONFIG_CRYPTO_AES": "aes_generic",
    "CONFIG_CRYPTO_CBC": "cbc",
    "CONFIG_VIRTIO_BLK": "virtio_blk",
    "CONFIG_VIRTIO_PCI": "virtio_pci",
    "CONFIG_UNIX": "unix",
}
# What QEMU's x86_64 machine needs beyond the catalog: the PCI transport of the scratch
# disk (if=virtio), which the catalog's CONFIG_VIRTIO_BLK alone does not bring in.
MACHINE_NEEDS = ("CONFIG_VIRTIO_PCI",)
MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")


@dataclass(frozen=True)
class ImageSpec:
    version: str
    flavour: str

    @property
    def base(self) -> str:
        return f"{PREFIX}{self.version}-{self.flavour}"

    @property
    def meta_package(self) -> str:
        return META_PACKAGES[self.version][self.flavour]


def is_image(base: str) -> bool:
    return base.startswith(PREFIX)


def _choices() -> str:
    return ", ".join(f"{PREFIX}{v}-{f}" for v, flavours in META_PACKAGES.items() for f in flavours)


def parse(base: str) -> ImageSpec:
    """`debian-image:6.12-cloud`; the flavour may be left out (generic, the plain amd64 one)."""
    version, _, flavour = base.removeprefix(PREFIX).partition("-")
    flavour = flavour or "generic"
    if version not in META_PACKAGES or flavour not in META_PACKAGES[version]:
        raise LabError(f"unknown prebuilt image {base!r}: use one of {_choices()}")
    return ImageSpec(version, flavour)


def check_variant(name: str, base: str, arch: str, changes: Iterable[str]) -> None:
    """A prebuilt image is booted as Debian built it: on x86_64, with no config changes."""
    if arch != ARCH:
        raise LabError(f"variant {name}: {base} is Debian's amd64 kernel; prebuilt images are "
                       f"{ARCH} only for now (drop --arch {arch}, or use base `debian` to build for {arch})")
    asked = list(changes)
    if asked:
        raise LabError(f"variant {name}: prebuilt images cannot be reconfigured ({' '.join(asked)}): use base "
                       f"`debian` with --source debian:{parse(base).version} to build Debian's config with changes")


# --- the package --------------------------------------------------------------------


def resolve_package(spec: ImageSpec) -> str:
    """The concrete `linux-image-*` package the flavour's meta-package depends on now."""
    images = [p for p in apt.depends(spec.meta_package) if p.startswith("linux-image-")]
    if len(images) != 1:
        raise LabError(f"{spec.meta_package} depends on {len(images)} linux-image packages "
                       f"({', '.join(images) or 'none'}), not one: run `apt-get update`, then "
                       f"`apt-cache depends {spec.meta_package}`")
    return images[0]


@dataclass(frozen=True)
class Image:
    base: str       # debian-image:6.12-cloud
    package: str    # linux-image-6.12.117+deb12-cloud-amd64
    version: str    # the package's version: with its name, the variant's identity
    sha256: str     # of the .deb
    root: Path      # the unpacked package

    @cached_property
    def release(self) -> str:
        """`uname -r` of the kernel, from the name of its one /boot/vmlinuz-*."""
        kernels = sorted((self.root / "boot").glob("vmlinuz-*"))
        if len(kernels) != 1:
            raise LabError(f"{self.package}: expected one /boot/vmlinuz-* in the package, found {len(kernels)}")
        return kernels[0].name.removeprefix("vmlinuz-")

    @property
    def kernel(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"

    @property
    def config_path(self) -> Path:
        return self.root / "boot" / f"config-{self.release}"

    @property
    def modules_dir(self) -> Path:
        for lib in ("lib", "usr/lib"):   # usr-merged packages ship them under /usr
            if (self.root / lib / "modules" / self.release).is_dir():
                return self.root / lib / "modules" / self.release
        raise LabError(f"{self.package} has no lib/modules/{self.release}")

    @property
    def identity(self) -> str:
        """apt's own NAME=VERSION syntax: what `apt-get download` takes to fetch it again."""
        return f"{self.package}={self.version}"


def fetch(spec: ImageSpec) -> Image:
    """The package of the flavour's current image: downloaded and unpacked once."""
    package = resolve_package(spec)
    deb = apt.download([package], paths.cache_dir("debian-image", "debs"))[package]
    version = apt.field(deb, "Version")
    root = apt.unpack([deb], paths.cache_root() / "debian-image" / deb.name.removesuffix(".deb"))
    return Image(spec.base, package, version, apt.sha256(deb), root)


# --- sizes: the ELF inside the bzImage ----------------------------------------------------


_PAYLOAD_FORMATS = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
                    (b"\x02\x21\x4c\x18", "lz4"), (b"BZh", "bzip2"), (b"\x5d\x00\x00", "lzma"))
# Formats Python 3.11 cannot decode: the tool that can (6.12 uses zstd, 6.1's cloud image lz4).
_PAYLOAD_TOOLS = {"zstd": ["zstd", "-dcq"], "lz4": ["lz4", "-dcq"]}


def payload(bzimage: bytes) -> tuple[str, bytes]:
    """(format, compressed vmlinux) of an x86 bzImage, where its setup header says it is
    (boot protocol 2.08 and later: payload_offset and payload_length)."""
    if bzimage[0x202:0x206] != b"HdrS" or struct.unpack_from("<H", bzimage, 0x206)[0] < 0x208:
        raise LabError("not an x86 bzImage of boot protocol 2.08 or later: cannot find its payload")
    setup_sects = bzimage[0x1F1] or 4
    offset, length = struct.unpack_from("<II", bzimage, 0x248)
    start = (setup_sects + 1) * 512 + offset
    data = bzimage[start:start + length]
    for magic, fmt in _PAYLOAD_FORMATS:
        if data.startswith(magic):
            return fmt, data
    raise LabError(f"unknown compression of the bzImage payload (starts {data[:6].hex()})")


def decompress(fmt: str, data: bytes) -> bytes:
    """The payload's vmlinux. The kernel's build appends the uncompressed size after the
    stream: each decoder here stops at the stream's end."""
    try:
        if fmt == "gzip":
            return zlib.decompressobj(wbits=31).decompress(data)
        if fmt in ("xz", "lzma"):
            return lzma.LZMADecompressor(lzma.FORMAT_XZ if fmt == "xz" else lzma.FORMAT_ALONE).decompress(data)
        if fmt == "bzip2":
            return bz2.BZ2Decompressor().decompress(data)
    except (lzma.LZMAError, zlib.error, OSError) as exc:
        raise LabError(f"cannot decompress the bzImage payload ({fmt}): {exc}") from None
    # The tools would take the 4 bytes of size for a truncated frame or block: cut them.
    tool, *flags = _PAYLOAD_TOOLS[fmt]
    result = subprocess.run([require_tool(tool), *flags], input=data[:-4], capture_output=True)
    if result.returncode != 0:
        raise LabError(f"{tool} could not decompress the bzImage payload: {result.stderr.decode().strip()}")
    return result.stdout


def vmlinux(image: Image) -> Path:
    """The ELF inside the image's bzImage, extracted once beside the package."""
    target = image.root.parent / f"{image.root.name}.vmlinux"
    if not target.exists():
        elf = decompress(*payload(image.kernel.read_bytes()))
        if not elf.startswith(b"\x7fELF"):
            raise LabError(f"{image.kernel}: its payload is not an ELF file")
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(elf)
        tmp.replace(target)
    return target


def sizes(image: Image) -> dict[str, int]:
    """In bytes, under build.Build's names; vmlinux is the ELF the bzImage carries
    (stripped of symbols, unlike a vmlinux kernellab builds)."""
    elf = vmlinux(image)
    return {"image_bytes": image.kernel.stat().st_size, "vmlinux_bytes": elf.stat().st_size, **berkeley_size(elf)}


def figures(image: Image) -> dict[str, tuple[str, float]]:
    """The report's size rows (metric -> unit, value), as build.Build.figures gives them
    for a built kernel."""
    values, units = sizes(image), catalog()
    return {metric: (units[metric].unit, values[name] / scale)
            for metric, (name, scale) in FIGURE_FIELDS.items() if name in values}


# The build rows of a prebuilt kernel: what the report says instead of a figure.
NOT_BUILT = "not built (prebuilt by Debian)"
BUILD_METRICS = tuple(m for m, (name, _) in FIGURE_FIELDS.items() if name.endswith("_s"))


# --- the modules the agent needs --------------------------------------------------------


def module_name(path: Path | str) -> str:
    """The module's name as the kernel knows it: file name without suffix, - as _."""
    name = Path(path).name
    for suffix in MODULE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.replace("-", "_")


def module_index(moddir: Path) -> dict[str, Path]:
    return {module_name(p): p for suffix in MODULE_SUFFIXES for p in moddir.rglob(f"*{suffix}")}


def parse_modules_dep(text: str) -> dict[str, list[str]]:
    """modules.dep ("kernel/a.ko: kernel/b.ko kernel/c.ko") as module name -> dependencies."""
    deps: dict[str, list[str]] = {}
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        if sep:
            deps[module_name(head.strip())] = [module_name(d) for d in rest.split()]
    return deps


def module_bytes(path: Path) -> bytes:
    """The module as finit_module takes it: decompressed on the host (6.12 ships .ko.xz),
    since a kernel decompresses modules only with MODULE_DECOMPRESS, and then only for a
    flag the agent would have to know to pass."""
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zst"):
        zstd = require_tool("zstd")
        return subprocess.run([zstd, "-dcq"], input=data, capture_output=True, check=True).stdout
    return data


def modinfo_depends(data: bytes) -> list[str]:
    """The `depends=` of a module's .modinfo (modpost writes it: what depmod would derive)."""
    section = ELFFile(io.BytesIO(data)).get_section_by_name(".modinfo")
    raw = section.data() if section is not None else b""
    for entry in raw.split(b"\0"):
        if entry.startswith(b"depends="):
            return [d.replace("-", "_") for d in entry.decode().removeprefix("depends=").split(",") if d]
    return []


def dependencies(moddir: Path, wanted: Iterable[str]) -> dict[str, list[str]]:
    """Module name -> the modules it depends on, for `wanted` and what they need: from
    modules.dep when the package has one, else from each module's .modinfo (Debian's
    packages leave modules.dep to depmod at install time, which kernellab never runs)."""
    dep_file = moddir / "modules.dep"
    if dep_file.exists():
        return parse_modules_dep(dep_file.read_text())
    index = module_index(moddir)
    deps: dict[str, list[str]] = {}
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in deps or name not in index:
            continue
        deps[name] = modinfo_depends(module_bytes(index[name]))
        todo += deps[name]
    return deps


def load_order(wanted: Iterable[str], deps: Mapping[str, list[str]]) -> list[str]:
    """Every module of `wanted` and its dependencies, each after what it depends on, in a
    stable order (depth first, in the order given)."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in visiting:
            raise LabError(f"modules depend on each other in a cycle: {' -> '.join((*path, name))}")
        visiting.add(name)
        for dep in deps.get(name, []):
            visit(dep, (*path, name))
        visiting.discard(name)
        order.append(name)

    for name in wanted:
        visit(name, ())
    return order


def wanted_modules(config: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(modules to load, notices): the =m options of the catalog's needs and the machine's."""
    options = sorted({o for m in catalog().values() for o in m.needs} | set(MACHINE_NEEDS))
    modules, notices = [], []
    for option in options:
        if config.get(option) != "m":
            continue
        if option in MODULE_OF:
            modules.append(MODULE_OF[option])
        else:
            notices.append(f"{option}=m: kernellab does not know its module; the metrics needing it say n/a")
    return modules, notices


def agent_modules(image: Image, config: Mapping[str, str]) -> tuple[list[tuple[str, bytes]], list[str]]:
    """(modules in load order as (name, decompressed .ko), notices) for the agent's initramfs."""
    wanted, notices = wanted_modules(config)
    moddir = image.modules_dir
    index = module_index(moddir)
    out = []
    for name in load_order(wanted, dependencies(moddir, wanted)):
        if name in index:
            out.append((name, module_bytes(index[name])))
        else:
            notices.append(f"module {name} is not in {image.package}")
    return out, notices


# --- its config, for `kernellab audit` -------------------------------------------------------


def config_argument(config: str, source: str | None) -> tuple[str, str | None]:
    """`audit`'s config argument and --source: an image's base (debian-image:6.12-cloud)
    becomes the path of its config, read in the Kconfig tree of its version (debian:6.12)
    unless --source says otherwise; anything else is left as it is."""
    if not is_image(config):
        return config, source
    spec = parse(config)
    return str(fetch(spec).config_path), source or f"debian:{spec.version}"


# `python -m kernellab.prebuilt config BASE`: where an image's config is.


_USAGE = f"usage: python -m kernellab.prebuilt config {EXAMPLE}"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "config" or not is_image(argv[1]):
        print(_USAGE, file=sys.stderr)
        return 2
    try:
        print(fetch(parse(argv[1])).config_path)
    except LabError as exc:
        print(f"kernellab: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
