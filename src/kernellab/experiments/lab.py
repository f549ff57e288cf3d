"""One variant through the lab: resolve its config, build it, boot it, store what it says."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import arches, build as builder, sources, toolchain as toolchains
from ..agent.compile import agent_binary, cross_targets
from ..build import Build
from ..config.resolve import ResolvedConfig, resolve
from ..errors import LabError
from ..initramfs import agent_initramfs
from ..measure.catalog import describe
from ..measure.console import initcalls, memory_line, milestones
from ..sources import Source
from ..store import Store
from ..targets import qemu
from .spec import VariantSpec

DEFAULT_TIMEOUT_S = 600.0
COARSE_CLOCKSOURCES = ("jiffies", "refined-jiffies")
SCRATCH_MIB = 64  # the agent's block metrics use the first 32 MiB by default


@dataclass
class Prepared:
    spec: VariantSpec
    source: Source
    profile: arches.ArchProfile
    toolchain: toolchains.Toolchain
    config: ResolvedConfig
    variant_id: int


@dataclass
class RunOutcome:
    run_id: int
    status: str
    reason: str
    samples: int


def prepare(spec: VariantSpec, store: Store) -> Prepared:
    profile = arches.load(spec.arch)
    source = sources.resolve(spec.source)
    toolchain = toolchains.detect(profile)
    settings = spec.settings()
    config = resolve(source, profile, toolchain, spec.base, settings)
    variant_id = store.add_variant(spec.name, source, profile.name, spec.base, spec.to_dict(),
                                   config.hash, config.dropped)
    return Prepared(spec, source, profile, toolchain, config, variant_id)


def ensure_built(p: Prepared, store: Store, log=None) -> Build:
    result = builder.build(p.source, p.profile, p.toolchain, p.config, log=log)
    store.add_build(result.key, p.variant_id, result.to_dict())
    return result


@dataclass(frozen=True)
class RunOptions:
    mode: str = "icount"
    timeout_s: float = DEFAULT_TIMEOUT_S
    initcalls: bool = False        # boot with initcall_debug and record every initcall's time
    repeats: int | None = None     # the agent's repeats per metric (None: its default)
    cmdline_extra: str = ""        # more kernel command line, e.g. KL_ONLY=syscall.null
    scratch_mib: int = SCRATCH_MIB  # wall mode only

    def key(self, initrd: Path) -> str:
        """What, besides the kernel, decides a run's numbers: to find an equal earlier run."""
        return f"{self.mode} {initrd.name} {self.cmdline()}"

    def cmdline(self) -> str:
        words = [self.cmdline_extra]
        if self.initcalls:
            # initcall_debug reports at KERN_DEBUG: raise the console level to show it.
            words.append("initcall_debug loglevel=8")
        if self.repeats:
            words.append(f"KL_REPEATS={self.repeats}")
        return " ".join(w for w in words if w)


def initramfs_for(p: Prepared) -> Path:
    """The agent's initramfs for this variant's arch. An experiment takes it once, so
    every variant is measured by the same agent binary. The agent build is the profile's
    (agent/cross.toml), not the kernel's compiler: several profiles share one user-space
    ABI (ppc44x and ppc32 run the ppc32 agent), and the agent needs a C library the
    kernel's compiler may lack."""
    p.profile.require_machine()  # a build-only arch has no guest to run the agent in
    target = cross_targets().get(p.profile.agent_arch)
    if target is None:
        raise LabError(f"arch profile {p.profile.name}: no agent build {p.profile.agent_arch!r} "
                       f"in agent/cross.toml (one of {', '.join(sorted(cross_targets()))})")
    return agent_initramfs(agent_binary(target["cc"], p.profile.agent_arch))


def run(p: Prepared, build: Build, store: Store, options: RunOptions = RunOptions(),
        initrd: Path | None = None) -> RunOutcome:
    """Boot once; every agent sample is committed to the store as its line arrives."""
    initrd = initrd or initramfs_for(p)
    with tempfile.TemporaryDirectory(prefix="kernellab-run-") as tmp:
        # No disk in icount mode: its I/O completes in host time, so its interrupts would
        # land at instruction counts that differ run to run and end the determinism.
        # The block metrics mean nothing under icount anyway.
        with_disk = options.scratch_mib and options.mode == "wall"
        scratch = qemu.scratch_disk(Path(tmp), options.scratch_mib) if with_disk else None
        argv = qemu.command(p.profile, build.image, initrd, options.mode, options.cmdline(), scratch)
        run_id = store.start_run(p.variant_id, build.key, "qemu", options.mode, argv)
        store.add_log("initramfs", initrd.name, run_id=run_id)  # names the agent binary's hash
        store.add_log("options", options.key(initrd), run_id=run_id)
        count = 0

        coarse_clock = None

        def on_record(record):
            nonlocal count, coarse_clock
            f = record.fields
            if record.type == "meta" and f.get("key") == "clocksource":
                store.add_log("clocksource", f.get("value", ""), run_id=run_id)
                if f.get("value") in COARSE_CLOCKSOURCES:
                    coarse_clock = f["value"]
            elif record.type == "sample":
                if coarse_clock and describe(f["metric"], f["unit"]).clock == "guest":
                    return  # a tick-resolution timing is not a measurement
                store.add_sample(run_id, f["metric"], f["unit"], int(f["rep"]), int(f["iters"]),
                                 float(f["value"]))
                count += 1
            elif record.type == "na":
                store.add_log("not-available", f"{f.get('metric')}: {f.get('reason')}", run_id=run_id)

        try:
            result = qemu.boot(p.profile, build.image, initrd, options.mode, options.timeout_s,
                               options.cmdline(), on_record=on_record, scratch=scratch)
        except KeyboardInterrupt as exc:
            store.finish_run(run_id, "interrupted", f"interrupted ({exc.args[0] if exc.args else 'Ctrl-C'})")
            raise
    _store_console_metrics(store, run_id, result.lines)
    store.add_log("console", result.console_log, run_id=run_id)
    if result.rejected:
        store.add_log("rejected-records", "\n".join(result.rejected), run_id=run_id)
    if coarse_clock and result.status == "ok":
        result.status = "coarse-clock"
        result.reason = (f"the guest kernel timed with the {coarse_clock} clocksource (tick resolution): "
                         "its timings were discarded; give it a reference clock (e.g. CONFIG_ACPI for "
                         "the HPET and PM timer on x86) or use --mode icount")
    store.finish_run(run_id, result.status, result.reason)
    return RunOutcome(run_id, result.status, result.reason, count)


def _store_console_metrics(store: Store, run_id: int, lines) -> None:
    """Boot milestones, the "Memory:" line and initcall times, read off the console."""
    for m in milestones(lines):
        store.add_sample(run_id, f"boot.{m.name}.host", "s", 0, 1, m.host_s)
        if m.printk_s is not None:
            store.add_sample(run_id, f"boot.{m.name}.printk", "s", 0, 1, m.printk_s)
    for line in lines:
        fields = memory_line(line.text)
        if fields:
            for key, kib in fields.items():
                store.add_sample(run_id, f"mem.kernel.{key}", "KiB", 0, 1, kib)
            break
    for function, usecs in initcalls(lines).items():
        store.add_sample(run_id, f"boot.initcall.{function}", "us", 0, 1, usecs)
