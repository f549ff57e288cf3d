"""compare on a Dask cluster: builds and boots are tasks on the workers, each worker with
its own cache; the client alone writes the store.

A worker measures a run exactly as the local lab does (lab.run), against a store that
forwards every write to the client over a Dask queue, in batches as the run goes: the
client applies them to its SQLite store, mapping the worker's provisional ids to its own.
A run whose worker is lost mid-boot is recorded as lost, with the samples that reached the
client; Dask runs the task again elsewhere, and the store keeps each (run, record number)
once. The rounds are compare's (scheduler.Scheduler); DaskScheduler runs them on the workers:
in icount mode the runs of a round go to the workers at once (guest time does not depend on
the host); in wall mode every boot runs on one worker, in turn, so that the comparison stays
fair. A worker's writes reach the store by the Store's own write methods (WRITES).
"""

from __future__ import annotations

import ipaddress
import pickle
import threading
import time
import typing
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

from .. import blast, datafile, progress, reaper
from .. import build as builder
from ..build import Build
from ..errors import LabError, RunLost
from ..modes import Mode
from ..report.model import VariantRecord, build_report
from ..store import Store
from ..targets import Capabilities
from . import compare, lab, probe
from .scheduler import Scheduler, T
from .spec import Experiment, VariantSpec

FLUSH_S = 0.5        # how often a worker sends what its run wrote
POLL_S = 0.2
WORKER_CHECK_S = 2.0   # how often a wall-mode wait asks whether its worker is still there
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass
class Cluster:
    client: Any                      # distributed.Client
    queue_name: str
    local: Any = None                # the LocalCluster kernellab started (--workers), if any

    def close(self) -> None:
        self.client.close()
        if self.local is not None:
            self.local.close()


def connect(workers: int | None, address: str | None) -> Cluster:
    """A local cluster of `workers` processes, or the scheduler at `address` (TLS, or this
    host only: a scheduler runs the code it is sent)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise LabError("--workers and --cluster need Dask: pip install 'dask[distributed]'") from None
    if address is not None:
        _check_address(address)
        try:
            client = Client(address, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise LabError(f"cannot reach the Dask scheduler at {address} ({exc}): start it "
                           "(see README, 'More machines') or check the address") from None
        return Cluster(client, f"kernellab-{uuid.uuid4().hex}")
    local = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    return Cluster(Client(local), f"kernellab-{uuid.uuid4().hex}", local)


def _check_address(address: str) -> None:
    try:
        url = urlparse(address if "://" in address else f"tcp://{address}")
        host = url.hostname or ""
        url.port   # noqa: B018  (parsed on reading: a port that is no number raises here)
    except ValueError as exc:
        raise LabError(f"--cluster {address}: not an address ({exc}): give tls://HOST:PORT, or HOST:PORT of "
                       "this host") from None
    if not host or any(c.isspace() or not c.isprintable() for c in address):
        raise LabError(f"--cluster {address}: not an address: give tls://HOST:PORT, or HOST:PORT of this host")
    if url.scheme == "tls":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host in LOCAL_HOSTS
    if not loopback:
        raise LabError(f"--cluster {address}: a Dask scheduler runs the code it is sent, so kernellab talks to "
                       "one on another host only over TLS (tls://HOST:PORT, see README, 'More machines')")


# -- on the worker ----------------------------------------------------------------------

# The store's write API, read from the Store itself so that a new write method is forwarded
# with no more code: its public methods named for a write, each with whether it hands out an
# id (returns an int: a variant, a run, a log), which is provisional on the worker.
_WRITE_VERBS = ("add_", "start_", "finish_", "append_", "set_")
WRITES: dict[str, bool] = {name: typing.get_type_hints(method).get("return") is int
                           for name, method in vars(Store).items()
                           if name.startswith(_WRITE_VERBS) and callable(method)}


class _Forwarding:
    """The store a worker's run writes to: each write goes to the client, in batches.
    Ids it hands out are provisional (negative); the client maps them to its own."""

    def __init__(self, queue: Any, task: str, token: str) -> None:
        self.queue, self.task, self.token = queue, task, token
        self.pending: list[tuple[str, int | None, tuple[Any, ...], dict[str, Any]]] = []
        self.next_id = -1
        self.lock = threading.Lock()
        self.done = threading.Event()
        # A guest that goes quiet (hung, or its worker about to die) must not keep what it
        # sent last: what is pending goes out every FLUSH_S, whether more comes or not.
        self.timer = threading.Thread(target=self._every_while, daemon=True)
        self.timer.start()

    def _every_while(self) -> None:
        while not self.done.wait(FLUSH_S):
            self.flush()

    def _call(self, method: str, *args: Any, returns: bool = False, **kwargs: Any) -> int | None:
        with self.lock:
            local = None
            if returns:
                local, self.next_id = self.next_id, self.next_id - 1
            self.pending.append((method, local, args, kwargs))
        if method in ("start_run", "finish_run"):
            self.flush()
        return local

    def flush(self) -> None:
        with self.lock:
            batch, self.pending = self.pending, []
            if batch:
                # A Dask queue carries msgpack data: the calls travel pickled, as task results do.
                self.queue.put([self.task, self.token, pickle.dumps(batch)])

    def close(self) -> None:
        self.done.set()
        self.timer.join()
        self.flush()

    def __getattr__(self, name: str) -> Callable[..., int | None]:
        """The store's write methods (WRITES), each forwarded; nothing else: a worker
        cannot read the client's store."""
        if name not in WRITES:
            raise AttributeError(f"a Dask worker's run only writes to the store: {name} is not one of its "
                                 f"write methods ({', '.join(WRITES)})")
        returns = WRITES[name]

        def forward(*args: Any, **kwargs: Any) -> int | None:
            return self._call(name, *args, returns=returns, **kwargs)
        return forward


def _reap() -> None:
    """A worker killed mid-build or mid-boot left make or QEMU running on its machine: the
    next task there stops them, as the next kernellab command would."""
    reaper.reap(lambda message: None)


def shipped(spec: VariantSpec) -> dict[str, str]:
    """The files a variant names (a base config, fragments) as their text: a worker on
    another machine has none of the client's files. A probe's base is such a file too."""
    return {name: datafile.read_text(Path(name).expanduser(), "variant file")
            for name in [spec.base, *spec.fragments] if datafile.is_file(Path(name).expanduser(), "variant file")}


def _here(spec: VariantSpec, files: dict[str, str]) -> VariantSpec:
    """The variant with each file it names replaced by the same text in this machine's
    cache (content-addressed, so every task on the worker shares one copy)."""
    if not files:
        return spec

    def local(name: str) -> str:
        return str(probe.base_file(files[name])) if name in files else name

    return replace(spec, base=local(spec.base), fragments=[local(f) for f in spec.fragments])


def build_task(spec: VariantSpec, files: dict[str, str]) -> dict[str, Any]:
    from distributed import get_worker
    _reap()
    p = lab.prepare(_here(spec, files))
    assert p.toolchain is not None   # the client sends only variants kernellab builds
    built = builder.build(p.source, p.profile, p.toolchain, p.config, what=spec.name)
    return {"build": built.to_dict(), "worker": get_worker().address}


def radius_task(spec: VariantSpec, files: dict[str, str], options: list[str]) -> blast.Radius:
    """The blast radius read from the build records of this worker's tree."""
    return probe.radius(_here(spec, files), options)


def run_task(spec: VariantSpec, options: lab.RunOptions, queue_name: str, task: str,
             files: dict[str, str]) -> dict[str, Any]:
    from distributed import Queue
    _reap()
    token = uuid.uuid4().hex    # this attempt: a lost worker's task runs again with another
    store = _Forwarding(Queue(queue_name), task, token)
    p = lab.prepare(_here(spec, files))
    forwarded = cast(Store, store)   # what lab writes to a store, sent to the client's
    try:
        built = lab.ensure_built(p, forwarded)
        outcome = lab.run(p, built, forwarded, options)
    finally:
        store.close()
    return {"token": token, "status": outcome.status, "reason": outcome.reason, "samples": outcome.samples}


# -- on the client ----------------------------------------------------------------------

@dataclass
class Replay:
    """Applies the workers' writes to the store, one run (token) at a time."""
    store: Store
    ids: dict[str, dict[int, int]] = field(default_factory=dict)      # token -> provisional -> real
    runs: dict[str, int] = field(default_factory=dict)                # token -> its run's real id
    finished: set[str] = field(default_factory=set)
    attempts: dict[str, set[str]] = field(default_factory=dict)       # task -> its attempts' tokens

    def apply(self, token: str, calls: list[tuple[str, int | None, tuple[Any, ...], dict[str, Any]]]) -> None:
        ids = self.ids.setdefault(token, {})

        def real(value: Any) -> Any:
            return ids.get(value, value) if type(value) is int and value < 0 else value

        for method, local, args, kwargs in calls:
            if method not in WRITES:   # what a worker sends is run on the client's store: writes only
                raise LabError(f"a Dask worker sent {method!r}, which is not one of the store's write methods")
            result = getattr(self.store, method)(*map(real, args), **{k: real(v) for k, v in kwargs.items()})
            if local is not None:
                ids[local] = result
            if method == "start_run":
                self.runs[token] = result
            elif method == "finish_run":
                self.finished.add(token)

    def drain(self, queue: Any) -> None:
        for task, token, calls in queue.get(batch=True):
            self.attempts.setdefault(task, set()).add(token)
            self.apply(token, pickle.loads(calls))

    def abandon(self, reason: str) -> list[int]:
        """Every run started and not finished, marked lost (`reason` may say {kept})."""
        out = []
        for token, run_id in sorted(self.runs.items()):
            if token not in self.finished:
                kept = len(self.store.run_samples(run_id))
                self.store.finish_run(run_id, "lost", reason.format(kept=kept))
                self.finished.add(token)
                out.append(run_id)
        return out

    def lost(self, task: str, winner: str) -> list[int]:
        """Runs of the task's attempts that never finished (their worker was lost): marked."""
        out = []
        for token in sorted(self.attempts.get(task, set()) - {winner}):
            if token in self.runs and token not in self.finished:
                run_id = self.runs[token]
                kept = len(self.store.run_samples(run_id))
                self.store.finish_run(run_id, "lost", f"its Dask worker was lost mid-run; the run was done again "
                                                      f"elsewhere; the {kept} sample(s) that arrived are kept")
                self.finished.add(token)
                out.append(run_id)
        return out


class BootTask(typing.NamedTuple):
    """What a worker needs to boot one item, and what to call it in messages."""
    name: str
    spec: VariantSpec
    built_on: str | None      # the worker that built its kernel (it has the artifacts)


class DaskScheduler(Scheduler[T]):
    """Boots on a Dask cluster's workers (scheduler.Scheduler). Side by side, each boot
    goes preferably to the worker that built its kernel; in turn, every boot goes to one
    worker, the one that built the first kernel booted, so that the comparison stays fair.
    The client alone writes the store (Replay)."""

    def __init__(self, mode: Mode, capabilities: Capabilities, cluster: Cluster, replay: Replay,
                 options: lab.RunOptions, task: Callable[[T], BootTask], log: Callable[[str], None]) -> None:
        from distributed import Queue
        super().__init__(mode, capabilities)
        self.cluster, self.replay, self.options, self.task, self.log = cluster, replay, options, task, log
        self.queue = Queue(cluster.queue_name, client=cluster.client)
        self.pinned: list[str] | None = None     # in turn: the one worker that boots

    def boots(self, order: list[T]) -> Iterator[lab.RunOutcome]:
        tasks = [self.task(x) for x in order]
        if self.side_by_side:
            pending = [(t, self._submit(t)) for t in tasks]
            await_all([f for _, f in pending], self.replay, self.queue)
            for t, future in pending:
                yield self._outcome(t, future)
            return
        for t in tasks:   # each boot alone on the worker, started when its outcome is asked for
            if self.pinned is None and t.built_on:
                self.pinned = [t.built_on]
            future = self._submit(t)
            await_all([future], self.replay, self.queue, self.pinned)
            yield self._outcome(t, future)

    def _submit(self, t: BootTask) -> Any:
        key = f"run-{uuid.uuid4().hex}"
        return self.cluster.client.submit(
            run_task, t.spec, self.options, self.cluster.queue_name, key, shipped(t.spec), pure=False, key=key,
            workers=self.pinned or ([t.built_on] if t.built_on else None), allow_other_workers=self.pinned is None)

    def _outcome(self, t: BootTask, future: Any) -> lab.RunOutcome:
        result = future.result()
        self.replay.drain(self.queue)
        for run_id in self.replay.lost(future.key, result["token"]):
            self.log(f"{t.name}: run {run_id} lost with its worker; measured again")
        return lab.RunOutcome(self.replay.runs[result["token"]], result["status"], result["reason"],
                              result["samples"])


def run_experiment(exp: Experiment, store: Store, how: compare.Plan, cluster: Cluster,
                   log: Callable[[str], None] = print) -> tuple[dict[str, Any], list[str]]:
    """compare with builds and boots on the cluster: the same rounds (compare.boot_rounds)."""
    if exp.cold_builds:
        raise LabError(f"experiment {exp.name} times cold builds, which must all run on one machine: "
                       "run it without --workers/--cluster")
    client = cluster.client
    replay = Replay(store)
    records = [VariantRecord(lab.explained(lab.prepare(spec))) for spec in exp.variants]
    for r in records:
        if r.prepared.toolchain is None or r.prepared.profile.build_only:
            raise LabError(f"{r.prepared.spec.name}: on a Dask cluster kernellab builds and boots QEMU "
                           "variants; measure running kernels and build-only arches without --workers/--cluster")
    failures: list[str] = []
    built_on: dict[str, str] = {}
    with progress.task(f"{exp.name}: builds on the cluster", len(records), "variants") as bar:
        futures = {client.submit(build_task, r.prepared.spec, shipped(r.prepared.spec), pure=False,
                                 key=f"build-{uuid.uuid4().hex}"): r for r in records}
        for future in futures:
            r = futures[future]
            result = future.result()
            r.build = build_from(result["build"])
            built_on[r.prepared.spec.name] = result["worker"]
            store.add_build(r.build.key, lab.record_variant(r.prepared, store), result["build"])
            log(f"{r.prepared.spec.name}: {'cached' if r.build.cached else f'built in {r.build.wall_s:.0f} s'} "
                f"on {result['worker']}")
            bar.advance()
    if how.reuse:   # a study resumes: runs of the same kernel measured the same way count
        for r in records:
            # The agent its runs boot with, workloads and all (the key names the initramfs).
            agent = lab.agent_for(r.prepared, compare.target_of(how, r), how.options.workloads)
            r.runs = compare.earlier_runs(r, store, how, agent)
            if r.runs:
                log(f"{r.prepared.spec.name}: {len(r.runs)} earlier run(s) taken from the store")

    def task(r: VariantRecord) -> BootTask:
        return BootTask(r.prepared.spec.name, r.prepared.spec, built_on[r.prepared.spec.name])

    scheduler = DaskScheduler(how.mode, how.capabilities, cluster, replay, how.options, task, log)
    compare.boot_rounds(exp.name, records, store, how, scheduler, failures, log)
    return build_report(exp.name, exp.description, records, store, how.mode.name, how.only), failures


def await_all(futures: list[Any], replay: Replay, queue: Any, pinned: list[str] | None = None) -> None:
    """Waits for the futures, storing what the workers send meanwhile. Wall-mode runs are
    pinned to one worker: if it is lost they cannot go on elsewhere and stay comparable,
    so its runs are marked lost and the command stops (what finished is in the store)."""
    checked = time.monotonic()
    while not all(f.done() for f in futures):
        replay.drain(queue)
        if pinned and time.monotonic() - checked > WORKER_CHECK_S:
            checked = time.monotonic()
            client = futures[0].client
            if pinned[0] not in client.scheduler_info()["workers"]:
                for f in futures:
                    f.cancel()
                replay.drain(queue)
                lost = replay.abandon(f"its Dask worker {pinned[0]} was lost mid-run; the "
                                      "{kept} sample(s) that arrived are kept")
                raise RunLost(f"the Dask worker {pinned[0]}, which boots every wall-mode run of this experiment so "
                              f"that they compare fairly, was lost: {len(lost)} run(s) marked lost, every finished "
                              "run is in the store; run the command again to go on with another worker")
        time.sleep(POLL_S)
    replay.drain(queue)


def build_from(record: dict[str, Any]) -> Build:
    return Build(**{**record, "artifacts": Path(record["artifacts"]), "image": Path(record["image"])})
