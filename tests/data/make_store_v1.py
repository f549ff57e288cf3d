"""Writes a store with the schema-1 kernellab (commit 511d4e3), one log of each kind."""
import sqlite3
import sys
import types

sys.path.insert(0, "/tmp/baseline/src")
from kernellab.measure.records import frame
from kernellab.store import Store

src = types.SimpleNamespace(id="6.1.192-4d415b3d3648", to_dict=lambda: {
    "spec": "debian:6.1", "kind": "debian", "version": "6.1.192", "content_hash": "4d415b3d3648aa",
    "tree": "/cache/sources/linux-source-6.1"})
s = Store("/tmp/v1.sqlite")
vid = s.add_variant("lab-minimal", src, "x86_64", "lab-minimal",
                    {"name": "lab-minimal", "base": "lab-minimal", "fragments": [], "options": [],
                     "source": "debian:6.1", "arch": "x86_64"}, "c0ffee" * 10, [])
vid2 = s.add_variant("nounix", src, "x86_64", "lab-minimal",
                     {"name": "nounix", "base": "lab-minimal", "fragments": [], "options": ["CONFIG_UNIX=n"],
                      "source": "debian:6.1", "arch": "x86_64"}, "beef" * 16,
                     [{"option": "CONFIG_E1000", "asked": "y", "got": "n", "origin": "inline"}])
s.add_build("k1" * 32, vid, {"wall_s": 400.0, "image_bytes": 2368512})
s.add_build("k2" * 32, vid2, {"wall_s": 30.0, "image_bytes": 2360000})
console = "\n".join(["[host  0.100000] [    0.000000] Linux version 6.1.192 (kernellab@kernellab)",
                     "[host  4.000000] " + frame("seq=0 t=hello v=1 agent=kernellab-agent mode=pid1"),
                     "[host  4.100000] " + frame("seq=1 t=meta key=clocksource value=tsc")]) + "\n"
for variant, key, status, reason in ((vid, "k1" * 32, "ok", ""),
                                     (vid2, "k2" * 32, "panic", "Kernel panic - not syncing: x")):
    run = s.start_run(variant, key, "qemu", "icount", ["qemu-system-x86_64", "-kernel", "bzImage"])
    s.add_log("initramfs", "initramfs-0123456789abcdef.cpio", run_id=run)
    s.add_log("options", "icount initramfs-0123456789abcdef.cpio KL_ONLY=syscall.null noapictimer", run_id=run)
    s.add_log("clocksource", "tsc", run_id=run)
    for rep, value in enumerate((202.1, 202.1, 202.2)):
        s.add_sample(run, "syscall.null", "ns", rep, 4096, value)
    s.add_sample(run, "boot.agent_ready.printk", "s", 0, 1, 0.311)
    if variant == vid2:
        s.add_log("not-available", "ipc.unix_rtt: socket(AF_UNIX): Address family not supported", run_id=run)
        s.add_log("rejected-records", "checksum mismatch: '@KL seq=5 t=sample'", run_id=run)
    s.add_log("console", console, run_id=run)
    s.finish_run(run, status, reason)
s.close()
db = sqlite3.connect("/tmp/v1.sqlite")
with open("/work/main/tests/data/store-v1.sql", "w") as out:
    out.write("-- A store written by kernellab's schema 1 (commit 511d4e3, before PRAGMA user_version),\n"
              "-- by tests/data/make_store_v1.py: two variants, two runs, one log of each kind.\n")
    for line in db.iterdump():
        out.write(line + "\n")
