import pytest

from kernellab.errors import LabError
from kernellab.experiments.compare import plan
from kernellab.experiments.spec import load_experiment


def test_icount_runs_once():
    p = plan(load_experiment(None), None, None, None, 60)
    assert (p.mode.name, p.min_runs, p.max_runs) == ("icount", 1, 1)


def test_wall_is_adaptive_between_five_and_the_cap():
    p = plan(load_experiment(None), "wall", None, None, 60)
    assert (p.min_runs, p.max_runs) == (5, 12)
    assert plan(load_experiment(None), "wall", None, 20, 60).max_runs == 20


def test_explicit_runs_are_fixed_unless_a_cap_is_given():
    assert plan(load_experiment(None), "wall", 3, None, 60).max_runs == 3
    assert plan(load_experiment(None), "wall", 3, 8, 60).max_runs == 8


def test_bad_mode_and_runs():
    with pytest.raises(LabError, match="unknown timing mode"):
        plan(load_experiment(None), "cycles", None, None, 60)
    with pytest.raises(LabError, match="at least 1"):
        plan(load_experiment(None), "wall", -1, None, 60)
