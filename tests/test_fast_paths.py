"""Work kernellab no longer repeats or starts too early: a typo in --metric costs no
kernel config resolution, a data file's schema is read once per class."""

import typing
from dataclasses import dataclass

import pytest

from kernellab import datafile
from kernellab.config import resolve as resolve_module


@pytest.mark.parametrize("command", [("bisect", "good=tinyconfig", "bad=tinyconfig+CONFIG_FAKE_SLOW=y"),
                                     ("sweep", "a=tinyconfig", "--toggle", "FAKE_SLOW")])
def test_an_unknown_metric_is_refused_before_any_variant_is_resolved(lab, capsys, monkeypatch, command):
    def no_make(*args):
        raise AssertionError("a variant was resolved before --metric was checked")

    monkeypatch.setattr(resolve_module, "_make", no_make)
    monkeypatch.setattr(resolve_module, "_RESOLVED", {}, raising=False)   # nothing resolved yet
    assert lab.main(*command, "--metric", "proc.fork_exti") == 2
    assert capsys.readouterr().err == ("kernellab: error: --metric: unknown metric 'proc.fork_exti', nor a metric "
                                       "of a --workload given: did you mean proc.fork_exit, proc.fork_exec? "
                                       "(`kernellab metrics` lists every metric)\n")


@dataclass
class _Inner:
    depth: int


@dataclass
class _Outer:
    name: str
    inner: list[_Inner]


def test_a_schemas_type_hints_are_evaluated_once_per_class(monkeypatch):
    calls: list[type] = []
    real = typing.get_type_hints

    def counted(kind, *args, **kwargs):
        calls.append(kind)
        return real(kind, *args, **kwargs)

    monkeypatch.setattr(typing, "get_type_hints", counted)
    table = {"name": "a", "inner": [{"depth": 1}, {"depth": 2}]}
    for _ in range(3):
        assert datafile.load(_Outer, table, "t.toml") == _Outer("a", [_Inner(1), _Inner(2)])
    assert sorted(c.__name__ for c in calls) == ["_Inner", "_Outer"]
