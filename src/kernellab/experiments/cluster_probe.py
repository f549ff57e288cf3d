"""Probes for sweep and bisect on a Dask cluster.

What a search asks for together (a sweep's flips, a bisect's two endpoints and the probes
that confirm its culprits) builds at once on the workers, each in its own build tree; in
icount mode the boots run at once too, each preferably where its kernel was built. In wall
mode every boot runs on one worker, in turn, so that the probes' comparison stays fair.
The client alone writes the store and reuses every equal run it already holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import blast, modes
from ..build import Build
from ..store import Store
from ..targets import Target
from . import executor, lab
from .probe import Probe, Prober
from .spec import VariantSpec


def prober(store: Store, base: VariantSpec, base_text: str, metrics: list[str], mode: str,
           cluster: executor.Cluster | None, log: Callable[[str], None] = print,
           place: Callable[[lab.Prepared, Build | None, lab.RunOptions], Target] | None = None) -> Prober:
    """The local prober (booting where `place` says), or the cluster's when there is one
    (QEMU on its workers: the command refused any other target, registry.Ask(cluster=True))."""
    if cluster is None:
        return Prober(store, base, base_text, metrics, mode, place=place)
    return ClusterProber(store, base, base_text, metrics, mode, cluster=cluster, log=log)


@dataclass
class ClusterProber(Prober):
    cluster: executor.Cluster | None = None
    log: Callable[[str], None] = print

    def __post_init__(self) -> None:
        from distributed import Queue
        super().__post_init__()
        assert self.cluster is not None
        self.client = self.cluster.client
        self.queue = Queue(self.cluster.queue_name, client=self.client)
        self.replay = executor.Replay(self.store)
        self.built_on: dict[str, str] = {}        # build key -> the worker that built it
        self.pinned: list[str] | None = None      # wall mode: the one worker that boots

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

    def _boot(self, due: list[tuple[Probe, lab.Prepared, Path]]) -> Iterator[lab.RunOutcome]:
        pending = []
        for probe, prepared, _ in due:
            built_on = self.built_on.get(probe.build.key)
            if not modes.get(self.mode).deterministic and self.pinned is None and built_on:
                self.pinned = [built_on]
            key = f"run-{uuid.uuid4().hex}"
            assert self.cluster is not None
            future = self.client.submit(
                executor.run_task, prepared.spec, self.options, self.cluster.queue_name, key,
                executor.shipped(prepared.spec),
                pure=False, key=key, workers=self.pinned or ([built_on] if built_on else None),
                allow_other_workers=self.pinned is None)
            pending.append(future)
            if self.pinned is not None:   # in turn: each boot alone on its worker
                executor.await_all([future], self.replay, self.queue, self.pinned)
        executor.await_all(pending, self.replay, self.queue, self.pinned)
        for (probe, _, _), future in zip(due, pending, strict=True):
            result = future.result()
            self.replay.drain(self.queue)
            for run_id in self.replay.lost(future.key, result["token"]):
                self.log(f"{probe.label}: run {run_id} lost with its worker; measured again")
            yield lab.RunOutcome(self.replay.runs[result["token"]], result["status"], result["reason"],
                                 result["samples"])

    def radius(self, options: list[str]) -> blast.Radius:
        """Read where the last probe was built: that worker's tree holds its build records."""
        worker = self.built_on.get(self.probes[-1].build.key) if self.probes else None
        spec = self._spec("radius", {})
        future = self.client.submit(executor.radius_task, spec, executor.shipped(spec), options,
                                    pure=False, workers=[worker] if worker else None)
        radius: blast.Radius = future.result()
        return radius
