"""Probes for sweep and bisect on a Dask cluster.

What a search asks for together (a sweep's flips, a bisect's two endpoints and the probes
that confirm its culprits, and with a halving the probes of the next halvings whichever
way its verdict goes, when workers would otherwise be idle: spare) builds at once on the
workers, each in its own build tree; in icount mode the boots run at once too, each
preferably where its kernel was built. In wall mode every boot runs on one worker, in
turn, so that the probes' comparison stays fair (executor.DaskScheduler, in the rounds of
scheduler.Scheduler).
The client alone writes the store and reuses every equal run it already holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from .. import blast, modes
from ..store import Store
from ..workloads import Instance
from . import executor, lab
from .placement import Placement
from .probe import Due, Probe, Prober
from .scheduler import Scheduler
from .spec import VariantSpec


def prober(store: Store, base: VariantSpec, base_text: str, metrics: list[str], mode: modes.Mode,
           cluster: executor.Cluster | None, log: Callable[[str], None] = print,
           placement: Placement | None = None, command: str = "sweep",
           workloads: tuple[Instance, ...] = ()) -> Prober:
    """The local prober (booting where `placement` says), or the cluster's when there is
    one (QEMU on its workers: the command refused any other target, registry.Ask(cluster=True)).
    `workloads`: real programs every probe's run measures too."""
    if cluster is None:
        return Prober(store, base, base_text, metrics, mode, placement=placement, command=command,
                      workloads=workloads)
    return ClusterProber(store, base, base_text, metrics, mode, command=command, workloads=workloads,
                         cluster=cluster, log=log)


def spare(prober: object, due: int) -> int:
    """How many workers of its cluster a round of `due` probes would leave idle: where a
    search may measure ahead the probes it asks for next (bisect.Bisector._probes). None
    on this machine (a probe builds in the trees of one pool, one after another) nor in
    wall mode (every boot runs on one worker, in turn: a probe ahead would delay the
    round's own)."""
    if not isinstance(prober, ClusterProber) or not prober.scheduler.side_by_side:
        return 0
    return max(len(prober.client.scheduler_info()["workers"]) - due, 0)


@dataclass
class ClusterProber(Prober):
    cluster: executor.Cluster | None = None
    log: Callable[[str], None] = print

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.cluster is not None
        self.client = self.cluster.client
        self.replay = executor.Replay(self.store)
        self.built_on: dict[str, str] = {}        # build key -> the worker that built it

    @cached_property
    def scheduler(self) -> Scheduler[Due]:
        """Probes boot on the workers, each preferably where its kernel was built."""
        def task(d: Due) -> executor.BootTask:
            return executor.BootTask(d.probe.label, d.prepared.spec, self.built_on.get(d.probe.build.key))
        assert self.cluster is not None
        return executor.DaskScheduler(self.mode, self.capabilities, self.cluster, self.replay, self.options, task,
                                      self.log)

    def probe_all(self, asks: list[tuple[str, dict[str, str]]], runs: int = 1,
                  done: Callable[[Probe], None] | None = None) -> list[Probe]:
        prepared = [lab.prepare(self._spec(label, settings)) for label, settings in asks]
        futures = [self.client.submit(executor.build_task, p.spec, executor.shipped(p.spec), pure=False,
                                      key=f"build-{uuid.uuid4().hex}") for p in prepared]
        probes = []
        for (label, settings), p, future in zip(asks, prepared, futures, strict=True):
            result = future.result()
            build = executor.build_from(result["build"])
            self.store.add_build(build.key, lab.record_variant(p, self.store), result["build"])
            self.built_on[build.key] = result["worker"]
            probes.append(self._new(label, settings, p, build))
        if self.needs_boot:
            self._complete(list(zip(probes, prepared, strict=True)), runs)
        for probe in probes:
            if done is not None:
                done(probe)
        return probes

    def radius(self, options: list[str]) -> blast.Radius:
        """Read where the last probe was built: that worker's tree holds its build records."""
        worker = self.built_on.get(self.probes[-1].build.key) if self.probes else None
        spec = self._spec("radius", {})
        future = self.client.submit(executor.radius_task, spec, executor.shipped(spec), options,
                                    pure=False, workers=[worker] if worker else None)
        radius: blast.Radius = future.result()
        return radius
