"""The registry of targets, in the manner of labgrid's drivers: each kind of target is one
module that registers a factory under its scheme (`qemu`, `local`, `ssh://`, `lava:`), and
`open(spec, options)` is the one place a target is made from what the user typed. A target
declares its Capabilities; `refusal` derives from them every constraint a command, a
variant or an option puts on it, so that each refusal is written once, here.

A scheme ending in `:` or `://` is a prefix (`ssh://root@nas`); any other is the whole
spec (`qemu`). The tests register targets of their own the same way (`register`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import LabError
from ..workloads import Instance
from . import Capabilities, Site, TargetOptions

Factory = Callable[[str, TargetOptions], Site]


@dataclass(frozen=True)
class Entry:
    scheme: str
    factory: Factory
    syntax: str        # how it is written, for help and errors: "ssh://[user@]host[:port]"
    example: str       # short, for "use --target ...": "ssh://HOST"
    capabilities: Capabilities   # what it can do, before it is opened (for suggestions)


_REGISTRY: dict[str, Entry] = {}


def register(scheme: str, factory: Factory, capabilities: Capabilities, syntax: str | None = None,
             example: str | None = None) -> None:
    """Make `--target SCHEME...` open with `factory(spec, options)`. Registering a scheme
    again replaces it."""
    _REGISTRY[scheme] = Entry(scheme, factory, syntax or scheme, example or syntax or scheme, capabilities)


def unregister(scheme: str) -> None:
    _REGISTRY.pop(scheme, None)


def entries() -> list[Entry]:
    _builtin()
    return list(_REGISTRY.values())


def syntaxes() -> str:
    """Every spec --target takes, for its help."""
    return ", ".join(e.syntax for e in entries())


def entry_for(spec: str) -> Entry | None:
    for e in entries():
        prefix = e.scheme.endswith(":") or e.scheme.endswith("://")
        if spec == e.scheme or (prefix and spec.startswith(e.scheme)):
            return e
    return None


def open(spec: str, options: TargetOptions | None = None) -> Site:  # noqa: A001 - targets.open
    e = entry_for(spec)
    if e is None:
        names = [x.syntax for x in entries() if x.capabilities.live]
        raise LabError(f"unknown --target {spec!r}: use {', '.join(names[:-1])} or {names[-1]}")
    site = e.factory(spec, options or TargetOptions(target=spec))
    # --accel tcg or auto is every target's default way to run: only kvm asks for something.
    check(site.spec, site.capabilities, Ask(accel=(options.accel if options and options.accel == "kvm" else None),
                                            block_dir=bool(options and options.block_dir),
                                            power_cycle=bool(options and options.power_cycle)))
    return site


def _suggest(want: Callable[[Capabilities], bool]) -> str:
    """The targets that can, as `--target local or --target ssh://HOST`."""
    return " or ".join(f"--target {e.example}" for e in entries() if e.capabilities.live and want(e.capabilities))


@dataclass(frozen=True)
class Ask:
    """What a command, a variant or an option asks of a target; empty fields ask nothing."""
    mode: str | None = None       # a timing mode
    variant: str = ""             # the variant asking, for messages
    built: bool = False           # it boots a kernel kernellab built
    running: bool = False         # it measures the kernel the machine runs
    vcpus: int | None = None
    fs: str | None = None
    devices: int | None = None
    accel: str | None = None      # --accel as given ("auto" asks nothing)
    block_dir: bool = False
    power_cycle: bool = False
    cluster: bool = False         # --workers or --cluster
    probes: str = ""              # the command that boots probes with the agent as init (sweep, ...)
    live: bool = False            # it needs the target to start kernels now
    workload: str = ""            # the workload asking (its label), for messages
    host_link: bool = False       # it talks to the host over a network link (needs.network = "host")
    disk_mib: int = 0             # the MiB its files need on a disk's file system, its {workdir} (needs.disk_mib)


def _workload_asks(instances: Sequence[Instance], mode: str | None) -> list[Ask]:
    """What each workload asks of the target it runs on, in `mode`, beyond what any run asks."""
    return [Ask(workload=i.label, host_link=i.workload.needs.network == "host", disk_mib=i.workload.needs.disk_mib,
                mode=mode) for i in instances]


def _gives_workload_disk(caps: Capabilities) -> bool:
    """A disk with a file system for a workload's files: one QEMU attaches (wall mode), or a
    real machine's own file systems (the agent runs there as a program). A board booted
    from a ramdisk has neither."""
    return caps.disks or caps.agent == "program"


def refusal(spec: str, caps: Capabilities, ask: Ask) -> str | None:
    """Why `--target spec`, with these capabilities, cannot do what is asked: one line, or
    None when it can. Every refusal of a target is written here."""
    v = f"variant {ask.variant}: " if ask.variant else ""
    if ask.live and not caps.live:
        return (f"--target {spec} reads what a board lab ran: write the job with `kernellab lava-job` and read "
                "its log with `kernellab import-lava`")
    if ask.probes and not caps.boots_kernels:
        return (f"{ask.probes} boots probes of built kernels, and --target {spec} measures only the kernel its "
                f"machine runs: use {_suggest(lambda c: c.boots_kernels)}")
    if ask.mode is not None and ask.mode not in caps.modes:
        return (f"the {spec} target cannot run {ask.mode} mode ({ask.mode} needs deterministic time, and "
                f"--target {spec} has none: its clock is the host's); a real machine or a KVM guest measures in "
                "wall mode: use --mode wall")
    if ask.accel not in (None, "auto") and not caps.accel:
        return f"--accel {ask.accel} is for the qemu target, not --target {spec}"
    if ask.block_dir and not caps.scratch_dir:
        return (f"--block-dir is for {_suggest(lambda c: c.scratch_dir)} (QEMU guests get a scratch disk of "
                "their own)")
    if ask.power_cycle and not caps.kexec:
        return f"--power-cycle is for ssh targets, which kernellab boots with kexec (not --target {spec})"
    if ask.cluster and not caps.cluster:
        return ("--workers/--cluster boot QEMU guests on the cluster's machines; "
                f"--target {spec} is one machine")
    if ask.vcpus is not None and not caps.vcpus:
        return (f"{v}vcpus:{ask.vcpus} is a QEMU machine's setting; --target {spec} runs with the CPUs it has "
                "(use the kernel's maxcpus=N, boot:maxcpus=N, on a kexec'd variant)")
    if ask.fs and not caps.disks:
        return (f"{v}fs:{ask.fs} is a disk image QEMU attaches; --target {spec} has the disks it has "
                "(leave fs: out)")
    if ask.devices and not caps.disks:
        return (f"{v}devices:{ask.devices} adds devices to a QEMU machine; --target {spec} has the devices it "
                "has (leave devices: out)")
    if ask.running and not caps.measures_running:
        return (f"{'variant ' + ask.variant if ask.variant else 'this'} is the kernel a machine runs: measure it "
                f"with {_suggest(lambda c: c.measures_running)}, not --target {spec}")
    if ask.built and not caps.boots_kernels:
        return (f"{v}--target {spec} measures only the kernel its machine runs; boot built variants with "
                f"{_suggest(lambda c: c.boots_kernels)}")
    if ask.host_link and not caps.host_link:
        return (f"workload {ask.workload} talks to the host over a network link, which --target {spec} does not "
                f"give: run it in wall mode on {_suggest(lambda c: c.host_link)}")
    if ask.host_link and ask.mode is not None and ask.mode != "wall":
        return (f"workload {ask.workload} talks to the host over the network, which the host's clock times: "
                f"wall mode only, not {ask.mode} (pass --mode wall)")
    if ask.disk_mib and not _gives_workload_disk(caps):
        return (f"workload {ask.workload} needs a disk with a file system for its files ({ask.disk_mib} MiB), "
                f"and --target {spec} gives none (a board booted from a ramdisk): run it on "
                f"{_suggest(_gives_workload_disk)}")
    return None


def check(spec: str, caps: Capabilities, ask: Ask) -> None:
    """Refuse, in one line, what the target cannot do (refusal)."""
    why = refusal(spec, caps, ask)
    if why is not None:
        raise LabError(why)


def check_workloads(spec: str, caps: Capabilities, instances: Sequence[Instance], mode: str | None = None) -> None:
    """Refuse, in one line, the first workload that needs what the target cannot give (in
    `mode`, when the command has resolved it)."""
    for ask in _workload_asks(instances, mode):
        check(spec, caps, ask)


def _builtin() -> None:
    """The targets kernellab ships, registered on first use (each module registers itself)."""
    from . import kexec, lava, qemu, running  # noqa: F401 - registration
