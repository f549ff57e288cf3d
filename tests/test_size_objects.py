"""Where the size goes by directory: the objects recorded at build time (the fake kernel
tree links them from a thin vmlinux.a, as Linux >= 6.1), and `kernellab size`."""

import json
import subprocess

from kernellab.size import objects, view


def _compile(tree, rel, text):
    src = tree / rel.replace(".o", ".c")
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text)
    subprocess.run(["gcc", "-O2", "-fno-common", "-fno-pie", "-c", str(src), "-o", str(tree / rel)], check=True)


def small_tree(tmp_path, big=64):
    """kernel/, fs/ext4/, arch/x86/kernel/ in vmlinux.a; lib/lib.a with one member vmlinux
    uses and one it does not."""
    tree = tmp_path
    _compile(tree, "kernel/core.o", f"int core_table[{big}] = {{1}}; int core_bss[32]; int start(void) {{ return 0; }}")
    _compile(tree, "fs/ext4/inode.o", "int ext4_data[8] = {1}; int ext4_fn(int x) { return x * 3; }")
    _compile(tree, "arch/x86/kernel/setup.o", "int helper(int); int setup(void) { return helper(2); }")
    _compile(tree, "lib/helper.o", "int helper(int x) { return x + 1; }")
    _compile(tree, "lib/unused.o", "int unused_table[1000] = {1}; int unused(void) { return 0; }")
    whole = ["kernel/core.o", "fs/ext4/inode.o", "arch/x86/kernel/setup.o"]
    subprocess.run(["ar", "cruPT", "vmlinux.a", *whole], cwd=tree, check=True)
    subprocess.run(["ar", "cruPT", "lib/lib.a", "lib/helper.o", "lib/unused.o"], cwd=tree, check=True)
    subprocess.run(["gcc", "-nostdlib", "-static", "-no-pie", "-Wl,-e,start", "-o", "vmlinux",
                    "-Wl,--whole-archive", "vmlinux.a", "-Wl,--no-whole-archive", "lib/lib.a"], cwd=tree, check=True)
    return tree


def test_the_record_holds_the_linked_objects_and_adds_up_to_vmlinux(tmp_path):
    tree = small_tree(tmp_path)
    assert objects.record(tree, tree / "vmlinux", tmp_path / "objects.json")
    recorded = json.loads((tmp_path / "objects.json").read_text())
    # lib.a's members count only where vmlinux uses them, as the linker takes them.
    assert set(recorded["objects"]) == {"kernel/core.o", "fs/ext4/inode.o", "arch/x86/kernel/setup.o", "lib/helper.o"}
    assert recorded["objects"]["kernel/core.o"][1] >= 64 * 4 and recorded["objects"]["kernel/core.o"][2] >= 32 * 4
    top = objects.by_directory(recorded, 1)
    assert set(top) == {"kernel", "fs", "arch/x86", "lib", objects.LINK}
    assert set(objects.by_directory(recorded, 2)) == {"kernel", "fs/ext4", "arch/x86/kernel", "lib", objects.LINK}
    for i, part in enumerate(("text", "data", "bss")):
        # The link's share is what the objects do not explain, so the rows add up to vmlinux.
        assert sum(v[i] for v in top.values()) == recorded["vmlinux"][part]


def test_a_tree_without_vmlinux_a_records_nothing(tmp_path):
    (tmp_path / "vmlinux").write_bytes(b"")
    assert objects.record(tmp_path, tmp_path / "vmlinux", tmp_path / "objects.json") is False
    assert not (tmp_path / "objects.json").exists()


def test_directories_change_only_where_both_kernels_recorded_them(tmp_path):
    small, large = small_tree(tmp_path / "a"), small_tree(tmp_path / "b", big=1064)
    for tree in (small, large):
        objects.record(tree, tree / "vmlinux", tree / objects.RECORD)
    result = view.compare([view.kernel("small", small), view.kernel("large", large)])
    change = result["changes"]["large"]
    assert change["dirs"][0]["dir"] == "kernel" and change["dirs"][0]["delta"] == 1000 * 4
    assert change["symbols"][0] == {"name": "core_table", "old": 256, "new": 4256, "delta": 4000,
                                    "change": "grown", "section": "data"}
    (large / objects.RECORD).unlink()
    unknown = view.compare([view.kernel("small", small), view.kernel("large", large)])
    assert unknown["changes"]["large"]["dirs"] == [] and unknown["variants"]["large"]["objects_recorded"] is False
    assert "objects not recorded" in view.text(unknown)


def test_size_of_two_built_variants_and_of_one_not_built(lab, capsys):
    assert lab.main("build", "tinyconfig") == 0
    assert lab.main("build", "slow=tinyconfig+CONFIG_FAKE_SLOW=y") == 0
    capsys.readouterr()
    assert lab.main("size", "tinyconfig", "slow=tinyconfig+CONFIG_FAKE_SLOW=y", "--format", "json") == 0
    result = json.loads(capsys.readouterr().out)
    change = result["changes"]["slow"]
    # The slow path is one object in kernel/ holding a 4 KiB read-only table.
    assert [(r["dir"], r["delta"]) for r in change["dirs"] if r["delta"]][:1] == [("kernel", 4096)]
    assert {"name": "slowpath_detours", "old": None, "new": 4096, "delta": 4096, "change": "added",
            "section": "rodata"} in change["symbols"]
    assert lab.main("size", "tinyconfig", "new=tinyconfig+CONFIG_PRINTK=y") == 2
    err = capsys.readouterr().err
    assert err.startswith("kernellab: error: new is not built yet: "
                          "run `kernellab build new=tinyconfig+CONFIG_PRINTK=y`")


def test_size_of_vmlinux_files_matches_bloat_o_meters_format(tmp_path, capsys):
    from kernellab.cli import main
    small, large = small_tree(tmp_path / "a"), small_tree(tmp_path / "b", big=1064)
    assert main(["size", str(small / "vmlinux"), str(large / "vmlinux"), "--format", "bloat-o-meter"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("add/remove: 0/0 grow/shrink: 0/0 up/down: 0/0")   # code
    assert "core_table                                   256    4256   +4000" in out


def test_size_needs_two_kernels(tmp_path, capsys):
    from kernellab.cli import main
    tree = small_tree(tmp_path)
    assert main(["size", str(tree / "vmlinux")]) == 2
    assert capsys.readouterr().err == ("kernellab: error: size compares kernels: give at least two "
                                       "(built variants or vmlinux paths)\n")
