"""Board labs: a LAVA job that boots a built variant with the agent, and the import of its log.

`kernellab lava-job` writes this job definition (YAML, LAVA's v2 format):

    device_type: TYPE                     # the lab's device type (--device-type)
    job_name: kernellab VARIANT (Linux VERSION, ARCH)
    timeouts: {job: {minutes: J}, action: {minutes: 5}, connection: {minutes: 2}}
    priority: medium
    visibility: public
    context:
      console_device: ttyS0              # the arch's console (--console); a device
                                         # dictionary that names its own keeps it
      extra_kernel_args: printk.time=1 loglevel=7 BOOT-ARGS KL_...
    metadata:                            # what the import checks the log against
      kernellab.variant / .build_key / .config_hash / .initramfs / .arch / .source
    actions:
    - deploy:
        to: tftp
        timeout: {minutes: 10}
        kernel: {url: URL/IMAGE, type: image|zimage|uimage}   # type: --kernel-type, or from
                                                             # the image's name (Image, zImage, uImage)
        ramdisk: {url: URL/INITRAMFS.cpio, install_modules: false, install_overlay: false}
                                         # with --workload: the agent's initramfs and, appended,
                                         # the workloads' Debian userland (the QEMU guest's)
    - boot:
        method: u-boot                   # --boot-method: u-boot, ipxe, grub, depthcharge (qemu: below)
        commands: ramdisk                # the device type's own tftp kernel+ramdisk commands
        timeout: {minutes: B}
        prompts: ['@KL seq=[0-9]+ t=end records=[0-9]+ #[0-9a-f]{8}']

With --boot-method qemu, for LAVA's QEMU device type, the dispatcher runs the QEMU itself:

    context: {arch: ARCH}                # the device type runs qemu-system-ARCH (the arch's QEMU)
    actions:
    - deploy:
        to: tmpfs
        timeout: {minutes: 10}
        images:                          # each image_arg joins the device's QEMU command,
          kernel: {url: URL/IMAGE,       # {label} replaced by the downloaded file
                   image_arg: '-kernel {kernel} -append "console=CONSOLE printk.time=1 loglevel=7 ..."'}
          initrd: {url: URL/INITRAMFS.cpio, image_arg: '-initrd {initrd}'}
    - boot: {method: qemu, media: tmpfs, timeout: {minutes: B}, prompts: [the same end record]}

The kernel command line is in the kernel's image_arg: the device type's template gives the
qemu method no -append (only qemu-nfs), and the job's context no kernel arguments. Its words
cannot hold a double quote (the dispatcher splits the command at spaces outside quotes) or
a brace ({label} is an image's path); the device decides QEMU's machine, memory and KVM. A
dispatcher alone runs it (`lava-run`), file:// URLs and all (tests/test_lava_dispatcher.py).

There is no test action: the agent is the initramfs's /init and prints its records on the
console by itself. The boot action ends when LAVA sees one of its `prompts` (pexpect
patterns); the only prompt is the agent's end record, so the job waits exactly until the
agent is done, and LAVA's own kernel-message checks still end it early on a panic. The
ramdisk is left as it is (no overlay, no modules): the agent needs nothing else.

With workloads (--workload), the ramdisk is the very initramfs a QEMU guest of the arch
boots (lab.initramfs_for): the agent's archive with the workloads' file, then the Debian
userland kernellab assembled for the arch as a second archive, which the kernel unpacks
after the first. The agent runs them after its tables as in QEMU, so the import reads the
same records; the job's boot timeout allows each workload its own timeout, and its
metadata names them (kernellab.workloads). A workload that needs what a board does not
give (a link from the host, a disk with a file system for its files) is refused before anything is built
(targets.registry, from the lava target's capabilities).

The user serves the image and initramfs at URL (`kernellab lava-job` says which files),
submits the job, and imports its log with `kernellab import-lava`, which stores the
agent's records as a run of the variant on "LAVA device TYPE", once per job.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from .. import arches
from ..arches import ArchProfile
from ..build import Build
from ..errors import LabError
from ..guest.records import InvalidRecord, RecordStream
from ..report.model import VariantRecord, build_report
from ..store import Store
from ..targets import registry
from ..targets.lava import CAPABILITIES, LavaLog, LavaLogTarget
from ..workloads import Instance
from .lab import Prepared, RunOptions, RunOutcome, run
from .spec import VariantSpec

BOOT_METHODS = ("u-boot", "ipxe", "grub", "depthcharge", "qemu")
# LAVA's QEMU device type: the dispatcher runs the QEMU itself, with no bootloader.
QEMU = "qemu"
KERNEL_TYPES = ("image", "zimage", "uimage")
# LAVA's names for the images it knows by their format; a bzImage or an ELF vmlinux has
# none (x86 boards boot with ipxe or grub, which need no type).
_KERNEL_TYPE_OF = {"Image": "image", "zImage": "zimage", "uImage": "uimage"}
# What the qemu target adds besides the console, but panic=-1: a board that reboots on a
# panic lands in its bootloader's autoboot, while LAVA stops a panicking job by itself.
BOARD_ARGS = "printk.time=1 loglevel=7"
END_PROMPT = "@KL seq=[0-9]+ t=end records=[0-9]+ #[0-9a-f]{8}"
DEPLOY_MINUTES = 10
# What the job's words may be. Each lands in a YAML value and, through LAVA's device
# templates, in a bootloader command or the kernel's command line ("console={{ console_device
# }},{{ baud_rate }}"): a space or a newline there would add arguments nobody asked for.
_DEVICE_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")   # LAVA's device-type names are slugs
_CONSOLE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,31}")          # ttyS0, ttyAMA0, ttymxc1, hvc0
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[!-~]+")                # printable, no whitespace
# The kernel's and the agent's share of a boot (--timeout): a day is far more than any
# kernellab run, and keeps the job's minutes a number LAVA takes.
MAX_TIMEOUT_S = 24 * 3600.0


def check_device_type(device_type: str) -> str:
    if not _DEVICE_TYPE.fullmatch(device_type):
        raise LabError(f"--device-type {device_type!r}: a LAVA device type is a name of letters, digits, - and _ "
                       "(as `lavacli device-types list` shows it), e.g. beaglebone-black")
    return device_type


def check_job_options(device_type: str, artifact_url: str, console: str | None, timeout_s: float,
                      workloads: Sequence[Instance] = (), boot_method: str = "u-boot",
                      kernel_type: str | None = None, spec: VariantSpec | None = None) -> None:
    """The words `lava-job` puts in a job, refused before anything is built when they
    would not stay the one value they are, and workloads the board cannot run; `spec`:
    the variant, whose arch and command line the qemu boot method puts in the job."""
    check_device_type(device_type)
    if boot_method == QEMU:
        _check_qemu_job(kernel_type, spec)
    registry.check_workloads(f"lava:{device_type}", CAPABILITIES, workloads)
    if console is not None and not _CONSOLE.fullmatch(console):
        raise LabError(f"--console {console!r}: a serial console is a device name, like ttyS0 or ttyAMA0 "
                       "(no spaces, no options: the device type gives the baud rate)")
    if not _URL.fullmatch(artifact_url):
        raise LabError(f"--artifact-url {artifact_url!r}: give the URL of a directory, like "
                       "http://files.example/kernellab (no spaces or control characters)")
    if not 0 < timeout_s <= MAX_TIMEOUT_S:   # also refuses nan
        raise LabError(f"--timeout {timeout_s}: the seconds the kernel and the agent may take, more than 0 and "
                       f"at most {MAX_TIMEOUT_S:.0f} (a day)")


def _check_qemu_job(kernel_type: str | None, spec: VariantSpec | None) -> None:
    if kernel_type is not None:
        raise LabError(f"--kernel-type {kernel_type}: the qemu boot method gives QEMU the image itself "
                       "(-kernel), which takes no LAVA kernel type: leave --kernel-type out")
    if spec is None:
        return
    qemu_arch(arches.load(spec.arch))
    for word in spec.boot_words():
        # The dispatcher splits QEMU's command at spaces outside quotes (pexpect) and puts
        # each image's path where its {label} is: the command line is one "quoted" word.
        if any(c in word for c in '"{}'):
            raise LabError(f"variant {spec.name!r}: boot parameter {word!r} has a double quote or a brace, which "
                           "the qemu boot method cannot pass through LAVA's QEMU command: leave it out")


def qemu_arch(profile: ArchProfile) -> str:
    """The QEMU device type's name for the arch (its job context's `arch`): the device type
    runs qemu-system-ARCH (its template maps arm64 and aarch64 alike)."""
    binary = Path(profile.qemu.binary).name if profile.qemu is not None else ""
    if not binary.startswith("qemu-system-"):
        raise LabError(f"arch {profile.name} has no QEMU machine: the qemu boot method boots the kernel in the "
                       "dispatcher's QEMU; use --boot-method u-boot (or the board's own) instead")
    return binary.removeprefix("qemu-system-")


def job_definition(p: Prepared, build: Build, initrd: Path, options: RunOptions, device_type: str,
                   artifact_url: str, console: str | None = None, kernel_type: str | None = None,
                   boot_method: str = "u-boot") -> dict[str, Any]:
    check_job_options(device_type, artifact_url, console, options.timeout_s, boot_method=boot_method,
                      kernel_type=kernel_type, spec=p.spec)
    url = artifact_url.rstrip("/")
    # The bootloader's and the kernel's share, and each workload's own timeout (as a QEMU run's).
    boot_minutes = math.ceil((options.timeout_s + options.workload_timeout_s()) / 60) + 2
    machine = p.profile.qemu
    console = console or (machine.console if machine else "ttyS0")
    kernel_args = f"{BOARD_ARGS} {options.cmdline(p.spec)}".strip()
    if boot_method == QEMU:
        context: dict[str, str] = {"arch": qemu_arch(p.profile)}
        deploy = _tmpfs_deploy(url, build, initrd, f"console={console} {kernel_args}")
        boot: dict[str, Any] = {"method": QEMU, "media": "tmpfs"}
    else:
        context = {"console_device": console, "extra_kernel_args": kernel_args}
        deploy = _tftp_deploy(url, build, initrd, kernel_type)
        boot = {"method": boot_method, "commands": "ramdisk"}
    return {
        "device_type": device_type,
        "job_name": f"kernellab {p.spec.name} (Linux {p.source.version}, {p.profile.name})"[:200],
        "timeouts": {"job": {"minutes": DEPLOY_MINUTES + boot_minutes + 5},
                     "action": {"minutes": 5}, "connection": {"minutes": 2}},
        "priority": "medium",
        "visibility": "public",
        "context": context,
        "metadata": {"kernellab.variant": p.spec.name, "kernellab.build_key": build.key,
                     "kernellab.config_hash": p.config.hash, "kernellab.initramfs": initrd.name,
                     "kernellab.arch": p.profile.name, "kernellab.source": p.source.version,
                     # LAVA's metadata values are strings: the labels, as the import is given them
                     **({"kernellab.workloads": " ".join(i.label for i in options.workloads)}
                        if options.workloads else {})},
        "actions": [
            {"deploy": deploy},
            {"boot": {**boot, "timeout": {"minutes": boot_minutes}, "prompts": [END_PROMPT]}},
        ],
    }


def _tftp_deploy(url: str, build: Build, initrd: Path, kernel_type: str | None) -> dict[str, Any]:
    kernel: dict[str, Any] = {"url": f"{url}/{build.image.name}"}
    kernel_type = kernel_type or _KERNEL_TYPE_OF.get(build.image.name)
    if kernel_type:
        kernel["type"] = kernel_type
    return {"to": "tftp", "timeout": {"minutes": DEPLOY_MINUTES}, "kernel": kernel,
            "ramdisk": {"url": f"{url}/{initrd.name}", "install_modules": False, "install_overlay": False}}


def _tmpfs_deploy(url: str, build: Build, initrd: Path, cmdline: str) -> dict[str, Any]:
    """The QEMU device type's deploy: the dispatcher downloads the images and adds each
    one's image_arg to the device's QEMU command, {label} replaced by its local path. The
    device type gives QEMU no -append (only its nfs method does), so the kernel's does."""
    return {"to": "tmpfs", "timeout": {"minutes": DEPLOY_MINUTES},
            "images": {"kernel": {"url": f"{url}/{build.image.name}",
                                  "image_arg": f'-kernel {{kernel}} -append "{cmdline}"'},
                       "initrd": {"url": f"{url}/{initrd.name}", "image_arg": "-initrd {initrd}"}}}


def job_yaml(job: dict[str, Any], p: Prepared, build: Build, initrd: Path, variant: str,
             workloads: Sequence[str] = ()) -> str:
    """The job as YAML, headed by what to do with it; `variant` and `workloads` (each
    --workload SPEC): as the user wrote them, which the import needs again (with the same
    source and arch) to find the same build and initramfs."""
    again = shlex.join(["kernellab", "import-lava", "log.yaml", variant, "--device-type", job["device_type"],
                        "--source", p.spec.source, "--arch", p.spec.arch,
                        *(word for spec in workloads for word in ("--workload", spec)), "--job-id"])
    header = _comments([f"Written by kernellab lava-job. Serve {build.image} and {initrd}",
                        "at the URLs below, submit this job, then import its log:",
                        "  lavacli jobs logs --raw JOB > log.yaml",
                        f"  {again} JOB"])
    body: str = yaml.safe_dump(job, sort_keys=False, default_flow_style=False, width=120)
    return header + body


# What ends a line for YAML (and for an editor): any of these in a comment would start a
# line of the job itself.
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _comments(lines: list[str]) -> str:
    """YAML comment lines that stay comments: a control character in a variant or a path
    is shown escaped, never a line break that would add keys to the job."""
    return "".join("# " + _LINE_BREAKS.sub(lambda m: repr(m.group())[1:-1], line) + "\n" for line in lines)


# An import that was refused (an agent that is not this kernellab's) or that died midway
# (killed, a crash) stored no result of the job: importing it again must go ahead.
RETRYABLE = ("agent-mismatch", "interrupted")


def imported_run(store: Store, job_id: str) -> int | None:
    return store.run_for_target("lava", "job_id", job_id, unless=RETRYABLE)


def imported_status(store: Store, run_id: int) -> str:
    row = store.run(run_id)
    return str(row["status"]) if row is not None else "gone"


def check_records(log: LavaLog) -> None:
    """Every agent record on the job's console, checked before anything is built or stored:
    one intact record that no kernellab agent sends refuses the whole log (nothing half
    stored). Damaged ones (line noise) are the session's to count."""
    stream = RecordStream()
    try:
        for line in log.console():
            stream.feed(line.text)
    except InvalidRecord as exc:
        raise LabError(f"{log.path}: {exc}") from None


def job_id(log: LavaLog, given: str | None) -> str:
    """The job's number: as given, else as the log says; when both, they must agree."""
    if given is not None and not re.fullmatch(r"\d+(\.\d+)?", given):
        raise LabError(f"--job-id {given!r}: a LAVA job number is like 1234 (or 1234.0 for a multinode part)")
    found = log.job_id()
    if given is not None and found is not None and given != found:
        raise LabError(f"{log.path} is the log of job {found} (its dispatcher paths say so), not of job {given}: "
                       "check --job-id")
    if given is None and found is None:
        raise LabError(f"{log.path} does not say which job it is: give its number with --job-id N")
    return given or found or ""


def import_log(p: Prepared, build: Build, store: Store, log: LavaLog, device_type: str, job: str,
               initrd: Path, workloads: tuple[Instance, ...] = ()) -> RunOutcome:
    """Stores the job's console as a run of the variant, through the measurement session;
    `workloads`: those the job ran (its initramfs is `initrd`, lab.initramfs_for), whose
    records the session reads into WORKLOAD.METRIC samples with their provenance."""
    check_device_type(device_type)
    check_records(log)
    deployed = [url.rsplit("/", 1)[-1] for url in log.downloads()]
    if deployed and initrd.name not in deployed:
        raise LabError(f"job {job} deployed {', '.join(deployed)}, not {initrd.name}, the agent initramfs "
                       f"this kernellab gives {p.spec.name}"
                       + (f" with --workload {' '.join(i.label for i in workloads)}" if workloads else "")
                       + ": import it with the kernellab that wrote the job and the job's --workload options "
                       "(its header says them), or run a job written by `kernellab lava-job` now")
    return run(p, build, store, RunOptions(mode="wall", workloads=workloads), initrd,
               target=LavaLogTarget(log, device_type, job))


def run_report(p: Prepared, build: Build, store: Store, run_id: int) -> dict[str, Any]:
    """The imported run as a compare report of its one variant: every metric it stored,
    the workloads' among them, and each workload's provenance, as on any other target."""
    row = store.run(run_id)
    status, reason = (str(row["status"]), str(row["reason"] or "")) if row is not None else ("gone", "")
    outcome = RunOutcome(run_id, status, reason, len(store.run_samples(run_id)))
    return build_report(f"LAVA job of {p.spec.name}", "a board lab's job, imported from its log",
                        [VariantRecord(p, build, [outcome])], store, "wall")
