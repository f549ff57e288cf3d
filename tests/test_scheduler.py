"""The one run loop (experiments.scheduler) with a fake boot: counterbalanced rounds, side
by side only in a deterministic mode on a target with deterministic time, in turn
otherwise, and the stopping rule."""

import threading
import time
from dataclasses import replace

import pytest

from kernellab import modes
from kernellab.errors import LabError
from kernellab.experiments.lab import RunOutcome
from kernellab.experiments.scheduler import Threads
from kernellab.store import Store
from kernellab.targets.qemu import CAPABILITIES as QEMU

ICOUNT, WALL = modes.get("icount"), modes.get("wall")


class FakeBoots:
    """Boots that take a little time and remember their order, how many ran at once,
    and whether they were handed a cancellation (a side-by-side round's)."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds = seconds
        self.order: list[str] = []
        self.runs: dict[str, int] = {}
        self.running = self.most_at_once = 0
        self.lock = threading.Lock()

    def __call__(self, item: str, store: Store, cancellation) -> RunOutcome:
        with self.lock:
            self.order.append(item)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
        return RunOutcome(len(self.order), "ok", "", 1)

    def record(self, item: str, outcome: RunOutcome) -> None:
        self.runs[item] = self.runs.get(item, 0) + 1

    def have(self, item: str) -> int:
        return self.runs.get(item, 0)


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "s.sqlite")


def scheduler(store, boots, mode, capabilities=QEMU, cores=4):
    return Threads(mode, capabilities, store, boots, cores=cores)


def test_wall_rounds_are_counterbalanced_and_in_turn(store):
    boots = FakeBoots()
    scheduler(store, boots, WALL).run(["a", "b", "c"], boots.have, boots.record, min_runs=3, max_runs=3)
    assert boots.order == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert boots.most_at_once == 1


def test_a_deterministic_mode_boots_a_round_side_by_side_one_per_core(store):
    boots = FakeBoots(seconds=0.3)
    scheduler(store, boots, ICOUNT, cores=2).run(["a", "b", "c"], boots.have, boots.record, min_runs=2)
    assert boots.most_at_once == 2                 # two cores: never three at once
    assert boots.runs == {"a": 2, "b": 2, "c": 2}
    # Side by side too, a round starts its boots in counterbalanced order: the first two
    # cores take a and b, then c; the next round starts c and b, then a.
    assert set(boots.order[:2]) == {"a", "b"} and boots.order[2] == "c"
    assert set(boots.order[3:5]) == {"c", "b"} and boots.order[5] == "a"


def test_deterministic_mode_on_a_target_without_deterministic_time_boots_in_turn(store):
    boots = FakeBoots()
    kvm = replace(QEMU, deterministic=False)
    scheduler(store, boots, ICOUNT, kvm).run(["a", "b"], boots.have, boots.record, min_runs=2)
    assert boots.order == ["a", "b", "b", "a"] and boots.most_at_once == 1


def test_wall_runs_go_on_while_imprecise_up_to_the_cap(store):
    boots, said = FakeBoots(seconds=0), []
    verdicts = iter([["syscall.null"], ["syscall.null"], []])   # precise after the 4th round
    scheduler(store, boots, WALL).run(["a", "b"], boots.have, boots.record, min_runs=2, max_runs=8,
                                      imprecise=lambda: next(verdicts), log=said.append)
    assert boots.runs == {"a": 4, "b": 4}
    assert said == ["another run: 1 metric(s) not yet within +-3% (syscall.null...)"] * 2
    capped = FakeBoots(seconds=0)
    scheduler(store, capped, WALL).run(["a", "b"], capped.have, capped.record, min_runs=2, max_runs=5,
                                       imprecise=lambda: ["syscall.null"])
    assert capped.runs == {"a": 5, "b": 5}


def test_a_deterministic_mode_stops_at_the_minimum_without_asking_for_precision(store):
    boots = FakeBoots(seconds=0)

    def imprecise():
        raise AssertionError("reruns are identical: precision is never in question")

    scheduler(store, boots, ICOUNT).run(["a", "b"], boots.have, boots.record, min_runs=1, max_runs=5,
                                        imprecise=imprecise)
    assert boots.runs == {"a": 1, "b": 1}


def test_runs_already_there_sit_their_rounds_out(store):
    boots, said = FakeBoots(seconds=0), []
    boots.runs = {"a": 3}      # taken from the store
    scheduler(store, boots, WALL).run(["a", "b"], boots.have, boots.record, min_runs=2, max_runs=3,
                                      imprecise=lambda: ["syscall.null"], log=said.append)
    assert boots.order == ["b", "b", "b"] and len(said) == 1
    # Every run of the next round is there already: no boot, and no word of another run.
    done, said = FakeBoots(seconds=0), []
    done.runs = {"a": 3, "b": 3}
    scheduler(store, done, WALL).run(["a", "b"], done.have, done.record, min_runs=2, max_runs=3,
                                     imprecise=lambda: ["syscall.null"], log=said.append)
    assert done.order == [] and said == []


def test_in_turn_a_record_that_refuses_an_outcome_starts_no_more_boots(store):
    boots = FakeBoots(seconds=0)

    def record(item, outcome):
        raise LabError(f"probe {item} failed")

    with pytest.raises(LabError, match="probe a failed"):
        scheduler(store, boots, WALL).run(["a", "b"], boots.have, record, min_runs=1)
    assert boots.order == ["a"]
