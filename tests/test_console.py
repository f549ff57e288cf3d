from kernellab.guest.console import ConsoleLine, is_panic, memory_line, milestones

BOOT = """\
early console in setup code
[    0.000000] Linux version 6.1.192 (kernellab@kernellab) (gcc (Debian 12.2.0-14) 12.2.0) \
#1 Thu Jan  1 00:00:00 UTC 1970
[    0.000000] Command line: console=ttyS0
[    0.012000] Memory: 243104K/261624K available (4096K kernel code, 758K rwdata, 312K rodata, 488K init, \
2340K bss, 18264K reserved, 0K cma-reserved)
[    0.287472] Freeing unused kernel image (initmem) memory: 488K
[    0.290000] Freeing unused kernel image (rodata/data gap) memory: 2000K
[    0.293729] Run /init as init process
[    0.294063] kernellab-agent: ready
"""


def lines(text):
    return [ConsoleLine(0.1 * i, t) for i, t in enumerate(text.splitlines())]


def test_milestones_in_order_on_both_clocks():
    ms = milestones(lines(BOOT))
    assert [m.name for m in ms] == ["first_output", "linux_version", "freeing_unused", "init_start", "agent_ready"]
    assert [m.printk_s for m in ms] == [0.0, 0.0, 0.287472, 0.293729, 0.294063]
    assert ms[0].host_s == 0.0 and ms[1].host_s == 0.1
    assert ms[2].host_s == 0.4  # the first "Freeing unused kernel" line, not the second


def test_missing_milestones_are_absent_not_invented():
    ms = milestones(lines("[    0.0] Linux version 6.1\nKernel panic - not syncing: VFS"))
    assert [m.name for m in ms] == ["first_output", "linux_version"]


def test_memory_line_fields():
    assert memory_line(BOOT.splitlines()[3]) == {
        "available": 243104, "total": 261624, "kernel_code": 4096, "rwdata": 758, "rodata": 312,
        "init": 488, "bss": 2340, "reserved": 18264, "cma_reserved": 0}


def test_memory_line_with_highmem():
    text = ("[ 0.0] Memory: 100K/200K available (1K kernel code, 2K rwdata, 3K rodata, 4K init, 5K bss, "
            "6K reserved, 0K cma-reserved, 7K highmem)")
    assert memory_line(text)["highmem"] == 7


def test_other_lines_are_not_memory_lines():
    assert memory_line("[ 0.0] Memory: garbage") is None
    assert memory_line("Freeing unused kernel memory") is None


def test_panic_detection():
    assert is_panic("[    1.2] Kernel panic - not syncing: No working init found.")
    assert not is_panic("[    1.2] panic=-1 on command line")


def test_initcall_debug_lines():
    from kernellab.guest.console import initcalls
    text = """\
[    0.101] calling  pci_subsys_init+0x0/0x6d @ 1
[    0.102] initcall pci_subsys_init+0x0/0x6d returned 0 after 1171 usecs
[    0.103] initcall virtio_blk_init+0x0/0x80 [virtio_blk] returned -19 after 12 usecs
[    0.104] initcall init_per_zone_wmark_min returned 0 after 3 usecs
[    0.104] initcall garbage returned 0 after usecs
"""
    assert initcalls(lines(text)) == {"pci_subsys_init": 1171, "virtio_blk_init": 12, "init_per_zone_wmark_min": 3}
