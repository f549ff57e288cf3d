"""Debian's prebuilt kernels (kernellab.prebuilt): the base's syntax, the package found
through a fake apt, the modules' load order, the ELF inside a bzImage, the initramfs."""

from __future__ import annotations

import gzip
import lzma
import struct
import subprocess
from pathlib import Path

import pytest

from kernellab import apt, prebuilt
from kernellab.errors import LabError
from kernellab.experiments import lab
from kernellab.experiments.spec import parse_short
from kernellab.initramfs import MODULES_DIR, agent_initramfs

# --- the base -----------------------------------------------------------------------------


def test_base_names_a_version_and_a_flavour() -> None:
    assert prebuilt.parse("debian-image:6.12-cloud") == prebuilt.ImageSpec("6.12", "cloud")
    assert prebuilt.parse("debian-image:6.1").meta_package == "linux-image-amd64"
    assert prebuilt.parse("debian-image:6.12-rt").meta_package == "linux-image-6.12-rt-amd64"
    assert prebuilt.is_image("debian-image:6.1") and not prebuilt.is_image("debian")


@pytest.mark.parametrize("base", ["debian-image:6.2", "debian-image:6.12-foo", "debian-image:"])
def test_unknown_image_is_a_one_line_error_listing_the_choices(base: str) -> None:
    with pytest.raises(LabError) as exc:
        prebuilt.parse(base)
    assert "debian-image:6.12-cloud" in str(exc.value) and "\n" not in str(exc.value)


def test_prebuilt_images_cannot_be_reconfigured() -> None:
    with pytest.raises(LabError, match="cannot be reconfigured .*use base `debian` with --source debian:6.12"):
        lab.prepare(parse_short("x=debian-image:6.12-cloud+CONFIG_HZ_1000=y"))


def test_prebuilt_images_are_x86_64_only() -> None:
    with pytest.raises(LabError, match="x86_64 only"):
        lab.prepare(parse_short("x=debian-image:6.1", arch="arm64"))


# --- the package, through a fake apt ----------------------------------------------------------


class FakeApt:
    """apt-cache depends, apt-get download and dpkg-deb -f as apt answers them."""

    def __init__(self, depends: dict[str, list[str]]):
        self.depends = depends
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if argv[:2] == ["apt-cache", "depends"]:
            if argv[2] not in self.depends:
                return subprocess.CompletedProcess(argv, 100, "", f"E: No packages found: {argv[2]}")
            lines = [argv[2], *(f"  Depends: {d}" for d in self.depends[argv[2]])]
            return subprocess.CompletedProcess(argv, 0, "\n".join(lines) + "\n", "")
        if argv[:2] == ["apt-get", "download"]:
            assert cwd is not None
            for name in argv[2:]:
                (cwd / f"{name}_6.12.117-1~deb12u1_amd64.deb").write_bytes(b"deb")
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[:2] == ["dpkg-deb", "-f"]:
            return subprocess.CompletedProcess(argv, 0, "6.12.117-1~deb12u1\n", "")
        raise AssertionError(f"unexpected command {argv}")


def test_the_meta_package_names_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApt({"linux-image-6.12-cloud-amd64": ["linux-image-6.12.117+deb12-cloud-amd64"]})
    monkeypatch.setattr(apt, "run", fake)
    assert prebuilt.resolve_package(prebuilt.parse("debian-image:6.12-cloud")) == \
        "linux-image-6.12.117+deb12-cloud-amd64"
    assert fake.calls == [["apt-cache", "depends", "linux-image-6.12-cloud-amd64"]]


def test_an_unknown_meta_package_says_to_update_apt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apt, "run", FakeApt({}))
    with pytest.raises(LabError, match="apt-get update"):
        prebuilt.resolve_package(prebuilt.parse("debian-image:6.1-rt"))


def test_a_meta_package_without_one_image_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apt, "run", FakeApt({"linux-image-amd64": ["kmod"]}))
    with pytest.raises(LabError, match="depends on 0 linux-image packages"):
        prebuilt.resolve_package(prebuilt.parse("debian-image:6.1"))


def test_a_package_is_downloaded_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeApt({})
    monkeypatch.setattr(apt, "run", fake)
    first = apt.download(["linux-image-x"], tmp_path)
    again = apt.download(["linux-image-x"], tmp_path)
    assert first == again == {"linux-image-x": tmp_path / "linux-image-x_6.12.117-1~deb12u1_amd64.deb"}
    assert [c[:2] for c in fake.calls] == [["apt-get", "download"]]
    assert apt.field(first["linux-image-x"], "Version") == "6.12.117-1~deb12u1"


# --- the modules' load order --------------------------------------------------------------


def test_dependencies_load_first_in_a_stable_order() -> None:
    deps = {"virtio_pci": ["virtio_pci_modern_dev", "virtio", "virtio_ring"], "virtio": ["virtio_ring"],
            "virtio_blk": ["virtio", "virtio_ring"], "algif_skcipher": ["af_alg"]}
    order = prebuilt.load_order(["algif_skcipher", "virtio_blk", "virtio_pci"], deps)
    assert order == ["af_alg", "algif_skcipher", "virtio_ring", "virtio", "virtio_blk",
                     "virtio_pci_modern_dev", "virtio_pci"]


def test_a_dependency_cycle_is_an_error() -> None:
    with pytest.raises(LabError, match="a -> b -> a"):
        prebuilt.load_order(["a"], {"a": ["b"], "b": ["a"]})


def test_modules_dep_is_read_as_names() -> None:
    text = ("kernel/crypto/algif_skcipher.ko.xz: kernel/crypto/af_alg.ko.xz\n"
            "kernel/crypto/af_alg.ko.xz:\n"
            "kernel/drivers/block/virtio-blk.ko:\n")
    assert prebuilt.parse_modules_dep(text) == {"algif_skcipher": ["af_alg"], "af_alg": [], "virtio_blk": []}


def test_only_modules_the_agent_needs_are_loaded() -> None:
    config = {"CONFIG_CRYPTO_USER_API_SKCIPHER": "m", "CONFIG_CRYPTO_AES": "y", "CONFIG_CRYPTO_CBC": "m",
              "CONFIG_VIRTIO_BLK": "m", "CONFIG_VIRTIO_PCI": "y", "CONFIG_UNIX": "y", "CONFIG_TMPFS": "m"}
    modules, notices = prebuilt.wanted_modules(config)
    assert sorted(modules) == ["algif_skcipher", "cbc", "virtio_blk"]
    assert notices == ["CONFIG_TMPFS=m: kernellab does not know its module; the metrics needing it say n/a"]


def _elf_module(depends: str) -> bytes:
    """The smallest ELF with a .modinfo section, as pyelftools reads it."""
    modinfo = f"license=GPL\0depends={depends}\0name=x\0".encode()
    shstrtab = b"\0.modinfo\0.shstrtab\0"
    data_off = 64
    shstr_off = data_off + len(modinfo)
    sh_off = (shstr_off + len(shstrtab) + 7) & ~7
    header = struct.pack("<4sBBBBB7xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, 1, 62, 1, 0, 0, sh_off,
                         0, 64, 0, 0, 64, 3, 2)
    null = bytes(64)
    info = struct.pack("<IIQQQQIIQQ", 1, 1, 2, 0, data_off, len(modinfo), 0, 0, 1, 0)
    strtab = struct.pack("<IIQQQQIIQQ", 10, 3, 0, 0, shstr_off, len(shstrtab), 0, 0, 1, 0)
    body = header + modinfo + shstrtab
    return body + bytes(sh_off - len(body)) + null + info + strtab


def test_without_modules_dep_the_modules_own_depends_give_the_order(tmp_path: Path) -> None:
    crypto = tmp_path / "kernel" / "crypto"
    crypto.mkdir(parents=True)
    (crypto / "af_alg.ko.xz").write_bytes(lzma.compress(_elf_module("")))
    (crypto / "algif_skcipher.ko.xz").write_bytes(lzma.compress(_elf_module("af_alg")))
    (crypto / "cbc.ko.gz").write_bytes(gzip.compress(_elf_module("")))
    deps = prebuilt.dependencies(tmp_path, ["algif_skcipher", "cbc"])
    assert deps == {"algif_skcipher": ["af_alg"], "af_alg": [], "cbc": []}
    assert prebuilt.load_order(["algif_skcipher", "cbc"], deps) == ["af_alg", "algif_skcipher", "cbc"]
    assert prebuilt.module_bytes(crypto / "af_alg.ko.xz").startswith(b"\x7fELF")  # decompressed on the host


def test_the_initramfs_carries_the_modules_in_load_order(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.write_bytes(b"\x7fELF agent")
    plain = agent_initramfs(agent)
    with_modules = agent_initramfs(agent, [("af_alg", b"ko1"), ("algif_skcipher", b"ko2")])
    assert plain != with_modules
    cpio = with_modules.read_bytes()
    first, second = (f"{MODULES_DIR}/{name}.ko".encode() for name in ("01-af_alg", "02-algif_skcipher"))
    assert cpio.index(first) < cpio.index(second)
    assert agent_initramfs(agent) == plain   # a built kernel's initramfs is what it was


# --- sizes: the ELF inside a bzImage -------------------------------------------------------


def _bzimage(payload: bytes) -> bytes:
    setup_sects = 4
    image = bytearray((setup_sects + 1) * 512)
    image[0x1F1] = setup_sects
    image[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", image, 0x206, 0x20F)
    struct.pack_into("<II", image, 0x248, 16, len(payload))
    return bytes(image) + bytes(16) + payload + bytes(100)


@pytest.mark.parametrize("fmt, compress", [("gzip", gzip.compress), ("xz", lzma.compress)])
def test_the_payload_of_a_bzimage_is_found_and_decompressed(fmt: str, compress: object) -> None:
    elf = b"\x7fELF" + bytes(1000)
    found, data = prebuilt.payload(_bzimage(compress(elf)))  # type: ignore[operator]
    assert found == fmt
    # The kernel's build appends the uncompressed size: the decoders stop at the stream's end.
    assert prebuilt.decompress(found, data + struct.pack("<I", len(elf))) == elf


def test_a_file_that_is_no_bzimage_is_an_error() -> None:
    with pytest.raises(LabError, match="not an x86 bzImage"):
        prebuilt.payload(bytes(4096))


def test_audit_takes_an_image_as_its_config_in_the_tree_of_its_version(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    image = prebuilt.Image("debian-image:6.12-cloud", "linux-image-x", "1", "0" * 64, tmp_path)
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "vmlinuz-6.12.117+deb12-cloud-amd64").write_bytes(b"")
    monkeypatch.setattr(prebuilt, "fetch", lambda spec: image)
    assert prebuilt.config_argument("debian-image:6.12-cloud", None) == \
        (str(tmp_path / "boot" / "config-6.12.117+deb12-cloud-amd64"), "debian:6.12")
    assert prebuilt.config_argument("debian-image:6.12-cloud", "/src/linux")[1] == "/src/linux"
    assert prebuilt.config_argument("my.config", None) == ("my.config", None)
