"""What `kernellab workload list`, `show` and `check` print."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from .. import datafile
from ..printable import printable
from . import Instance, load, packaged, resolve, samples


def list_rows() -> list[dict[str, Any]]:
    rows = []
    for name in packaged():
        w = load(name).workload
        rows.append({"name": name, "packages": list(w.packages), "fixed_work": w.fixed_work,
                     "metrics": sorted({m.name for m in w.metric}), "description": w.description})
    return rows


def list_lines(rows: list[dict[str, Any]]) -> list[str]:
    width = max(len(r["name"]) for r in rows)
    lines = [f"{'workload':{width}}  {'work':5}  {'packages':28}  description"]
    for r in rows:
        work = "fixed" if r["fixed_work"] else "timed"
        lines.append(f"{r['name']:{width}}  {work:5}  {','.join(r['packages']):28}  {r['description']}")
    lines += ["", "work: fixed (a fixed amount of work: icount reruns are identical) or timed (runs for a time).",
              "`kernellab workload show NAME` gives its command, parameters and metrics; NAME:key=value,... a variant."]
    return lines


def show_lines(spec: str) -> list[str]:
    """A workload (NAME, FILE.toml, with :key=value,...) as text: its command with these
    parameters, the parameters, the server, what it needs and its metrics."""
    inst = resolve(spec)
    w = inst.workload
    # Where each part runs: the machine whose kernel is measured (a guest, a real machine),
    # or, for the command of one that talks to the host, kernellab's own machine.
    here = "where the kernel runs"
    command_on = f"on the host, kernellab's machine, against the server's port {w.server.port}" if (
        w.client_on_host and w.server is not None) else here
    lines = [f"{inst.label}  ({inst.loaded.origin})", f"  {w.description}",
             f"  packages: {', '.join(w.packages) or '(none)'}",
             f"  command:  {shlex.join(inst.argv('{workdir}'))}  ({command_on})"]
    server = inst.server_argv("{workdir}")
    if server is not None and w.server is not None:
        ready = f"port {w.server.ready_port}" if w.server.ready_port else f"a line matching {w.server.ready_line!r}"
        lines.append(f"  server:   {shlex.join(server)}  ({here}; ready: {ready}, stopped with "
                     f"SIG{w.server.stop_signal})")
    if w.files:
        lines.append(f"  files:    {', '.join(w.files)} (written into {{workdir}})")
    amount = f"iterations: {w.run.iterations}" if w.run.iterations else f"duration: {w.run.duration}"
    lines.append(f"  run:      {amount}, timeout {w.run.timeout_s:g} s; output: {w.output.format} on {w.output.stream}")
    lines.append(f"  {'fixed work' if w.fixed_work else 'not fixed work'}: {w.why}")
    n = w.needs
    lines.append(f"  needs:    {', '.join(n.kernel) or 'no kernel option'}; {n.vcpus} vCPU(s); "
                 f"memory {f'{n.memory_mib} MiB' if n.memory_mib else 'any'}; "
                 f"disk {f'{n.disk_mib} MiB' if n.disk_mib else 'none'}; network {n.network}")
    if w.params:
        lines.append("  parameters:")
        for name, p in w.params.items():
            lines.append(f"    {name} = {inst.params[name]}  (default {p.default}; {p.allowed()})  {p.help}")
    lines.append("  metrics (with these parameters):")
    for m in inst.metrics():
        modes = ",".join(m.modes)
        lines.append(f"    {w.name}.{m.name}  {m.unit}, {m.better} is better, means something in {modes}  "
                     f"{m.path or m.regex}")
    return [printable(line) for line in lines]


def check_lines(spec: str, sample: str | None) -> list[str]:
    """Load a workload file and read samples with its parser: the sample given, else every
    sample the file names. A failure is a LabError."""
    inst = resolve(spec)
    loaded = inst.loaded
    lines = [f"{loaded.origin}: {loaded.workload.name} loads, {len(loaded.workload.metric)} metric(s)"]
    if sample is not None:
        text = datafile.read_text(Path(sample), "the sample output")
        return lines + _read(inst, text, sample)
    if not loaded.workload.sample:
        return lines + ["no sample to read: name one in the file ([[sample]] file = ...) or give --sample OUTPUT"]
    yielded: set[str] = set()
    for declared, sample_instance, text in samples(loaded):
        lines += _read(sample_instance, text, declared.file)
        yielded |= {m.template for m in sample_instance.metrics()}
    missing = sorted({m.name for m in loaded.workload.metric} - yielded)
    if missing:
        lines.append(f"no sample yields: {', '.join(missing)}")
    return [printable(line) for line in lines]


def _read(inst: Instance, text: str, where: str) -> list[str]:
    values = inst.read(text).strict(f"{where} ({inst.label})")
    units = {m.name: m.unit for m in inst.metrics()}
    return [f"{where} ({inst.label}):", *(f"  {inst.workload.name}.{k} = {v:g} {units[k]}" for k, v in values.items())]

