"""The bisect search on a simulated kernel: no builds, exact bookkeeping of probes."""

import statistics
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kernellab import modes
from kernellab.blast import Radius
from kernellab.experiments.bisect import Bisector

ICOUNT, WALL = modes.get("icount"), modes.get("wall")


@dataclass
class FakeBuild:
    cached: bool = False
    wall_s: float = 1.0


@dataclass
class FakeProbe:
    label: str
    requested: dict
    config: dict
    dropped: list
    runs: dict
    build: FakeBuild = field(default_factory=FakeBuild)
    boots: int = 1
    tree: None = None    # the build tree: the real prober's concern (tests/test_treepool.py)

    def value(self, metric):
        return statistics.median(self.runs[metric])


class FakeProber:
    """A 'kernel' whose metric is 1000 ns plus each culprit's cost; `requires` makes an
    option apply only together with another one, as olddefconfig would."""

    def __init__(self, costs, requires=None, metric="proc.fork_exit", together=None, recompiles=None):
        self.costs, self.requires, self.metric = costs, requires or {}, metric
        self.recompiles = recompiles or {}   # option -> objects of 1000 a change recompiles
        self.together = together or {}  # (option, option) -> extra cost when both apply
        self.builds = self.boots = 0
        self.probes, self.sequence = [], []

    def probe(self, label, settings, runs=1):
        applied = {o: v for o, v in settings.items()
                   if all(r in settings for r in self.requires.get(o, ()))}
        dropped = [{"option": o, "asked": v, "got": "n"} for o, v in settings.items() if o not in applied]
        value = 1000.0 + sum(self.costs.get(o, 0.0) for o in applied)
        value += sum(cost for pair, cost in self.together.items() if set(pair) <= set(applied))
        p = FakeProbe(label, dict(settings), applied, dropped, {self.metric: [value]})
        self.builds += 1
        self.boots += 1
        self.probes.append(p)
        self.sequence.append(tuple(sorted(settings)))
        return p

    def probe_all(self, asks, runs=1, done=None):
        out = [self.probe(label, settings, runs) for label, settings in asks]
        for p in out:
            if done is not None:
                done(p)
        return out

    def more_runs(self, probe, runs=1):
        raise AssertionError("icount never needs more runs")

    def radius(self, options):
        return Radius(1000, {o: self.recompiles.get(o, 1) for o in options}, frozenset())

    def needs(self, options):
        return {o: set(self.requires.get(o, ())) for o in options}

    def rebuilt(self):
        """Objects each probe build recompiles against the build before it, as the shared
        build tree would: the sum of the radii of the options whose value changed."""
        out, before = [], {}
        for p in self.probes:
            changed = set(p.config) ^ set(before)
            out.append(sum(self.recompiles.get(o, 1) for o in changed))
            before = p.config
        return out


def options(n):
    return {f"CONFIG_OPT{i:02d}": "y" for i in range(n)}


def bisect(prober, target):
    return Bisector(prober, target, "proc.fork_exit", ICOUNT, threshold_pct=2.0, log=lambda m: None).run()


def test_one_culprit_among_64_within_8_build_boot_cycles():
    target = options(64)
    prober = FakeProber({"CONFIG_OPT37": 800.0})
    result = Bisector(prober, target, "proc.fork_exit", ICOUNT, log=lambda m: None).run()
    assert [c.option for c in result.culprits] == ["CONFIG_OPT37"]
    search = [p for p in prober.probes if not p.label.startswith(("alone:", "without:"))]
    assert len(search) <= 8  # ceil(log2 64) + 2
    assert result.culprits[0].alone_on_good == pytest.approx(800.0)
    assert result.culprits[0].removed_from_bad == pytest.approx(800.0)
    assert result.interaction == pytest.approx(0.0) and result.below_threshold == pytest.approx(0.0)


def test_two_culprits_each_with_its_contribution():
    prober = FakeProber({"CONFIG_OPT03": 300.0, "CONFIG_OPT17": 500.0})
    result = bisect(prober, options(20))
    assert {c.option: c.alone_on_good for c in result.culprits} == {"CONFIG_OPT03": 300.0, "CONFIG_OPT17": 500.0}
    assert result.good == 1000.0 and result.bad == 1800.0
    assert result.interaction == pytest.approx(0.0) and result.below_threshold == pytest.approx(0.0)


def test_culprits_that_cost_more_together_report_their_interaction():
    prober = FakeProber({"CONFIG_OPT03": 300.0, "CONFIG_OPT17": 500.0},
                        together={("CONFIG_OPT03", "CONFIG_OPT17"): 200.0})
    result = bisect(prober, options(20))
    assert {c.option: c.alone_on_good for c in result.culprits} == {"CONFIG_OPT03": 300.0, "CONFIG_OPT17": 500.0}
    assert {c.option: c.removed_from_bad for c in result.culprits} == {"CONFIG_OPT03": 500.0, "CONFIG_OPT17": 700.0}
    assert result.interaction == pytest.approx(200.0) and result.below_threshold == pytest.approx(0.0)


def test_an_effect_spread_thin_is_reported_below_the_threshold_not_as_interaction():
    # One option costs 30%; eight others 2% each: no probe of theirs moves by 10%.
    costs = {"CONFIG_OPT00": 300.0, **{f"CONFIG_OPT{i:02d}": 20.0 for i in range(8, 16)}}
    result = Bisector(FakeProber(costs), options(16), "proc.fork_exit", ICOUNT, threshold_pct=10.0,
                      log=lambda m: None).run()
    assert [c.option for c in result.culprits] == ["CONFIG_OPT00"]
    assert result.below_threshold == pytest.approx(160.0) and result.interaction == pytest.approx(0.0)
    from kernellab.report.bisect import bisect_text
    text = bisect_text(result.to_dict())
    assert "below the threshold: +160" in text and "interaction: +0" in text


def test_small_effects_below_the_threshold_are_not_culprits():
    prober = FakeProber({"CONFIG_OPT05": 5.0, "CONFIG_OPT09": 900.0})  # 0.5% of good
    assert [c.option for c in bisect(prober, options(16)).culprits] == ["CONFIG_OPT09"]


def test_same_inputs_same_probe_sequence():
    first, second = FakeProber({"CONFIG_OPT11": 100.0}), FakeProber({"CONFIG_OPT11": 100.0})
    bisect(first, options(32))
    bisect(second, options(32))
    assert first.sequence == second.sequence


def test_an_option_that_needs_another_is_followed_and_recorded():
    # OPT02 only applies with OPT30: the first half cannot carry it alone.
    prober = FakeProber({"CONFIG_OPT02": 700.0}, requires={"CONFIG_OPT02": ["CONFIG_OPT30"]})
    result = bisect(prober, options(32))
    # OPT02 cannot be set without OPT30: the search follows OPT30, which carries it.
    (culprit,) = result.culprits
    assert culprit.option == "CONFIG_OPT30" and "CONFIG_OPT02" in culprit.notes[0]
    assert culprit.alone_on_good == 0.0 and culprit.removed_from_bad == 700.0
    assert any("moved" in a for a in result.adjustments)


def test_options_that_only_follow_others_are_not_culprits():
    # Like LOCKDEP selected by PROVE_LOCKING: the derived option cannot be set by itself.
    prober = FakeProber({"CONFIG_OPT09": 600.0, "CONFIG_OPT10": 0.0},
                        requires={"CONFIG_OPT10": ["CONFIG_OPT09"]})
    result = bisect(prober, options(16))
    assert [c.option for c in result.culprits] == ["CONFIG_OPT09"]


def test_no_difference_no_culprit():
    result = bisect(FakeProber({}), options(8))
    assert result.culprits == [] and result.interaction is None and result.below_threshold == 0.0


class NoisyProber(FakeProber):
    """Wall mode: each run of a probe measures the kernel's value times seeded noise, so
    verdicts need more runs before they are clear."""

    def __init__(self, costs, noise_pct, seed=1, **kw):
        super().__init__(costs, **kw)
        self.noise, self.random = noise_pct / 100, __import__("random").Random(seed)
        self.extra_runs = 0

    def _one(self, probe):
        exact = 1000.0 + sum(self.costs.get(o, 0.0) for o in probe.config)
        return exact * (1 + self.random.gauss(0, self.noise))

    def probe(self, label, settings, runs=1):
        p = super().probe(label, settings)
        p.runs[self.metric] = [self._one(p) for _ in range(runs)]
        return p

    def more_runs(self, probe, runs=1):
        while len(probe.runs[self.metric]) < runs:
            probe.runs[self.metric].append(self._one(probe))
            self.boots += 1
            self.extra_runs += 1


def wall_bisect(prober, target, threshold=5.0):
    return Bisector(prober, target, "proc.fork_exit", WALL, threshold_pct=threshold, log=lambda m: None).run()


def test_wall_mode_reruns_noisy_probes_until_the_culprit_is_clear():
    prober = NoisyProber({"CONFIG_OPT05": 300.0}, noise_pct=4.0)
    result = wall_bisect(prober, options(8))
    assert [c.option for c in result.culprits] == ["CONFIG_OPT05"]
    assert prober.extra_runs > 0  # three runs per probe were not always enough to tell
    assert all(len(p.runs["proc.fork_exit"]) <= 8 for p in prober.probes)  # never past the cap
    assert result.culprits[0].alone_on_good == pytest.approx(300.0, rel=0.25)


def test_wall_mode_stops_when_more_runs_could_not_decide_and_says_not_yet_known():
    """A 15% effect under 50% noise: the interval after three runs each is so wide that
    even eight could not bring it within +-5%, so no run is spent on it; no culprit is
    named, and the answer is "not yet known", not "no difference"."""
    prober = NoisyProber({"CONFIG_OPT01": 150.0}, noise_pct=50.0, seed=1)
    result = wall_bisect(prober, options(4))
    assert result.culprits == []
    [unsure] = result.unsure
    assert unsure.startswith("good@") and "not yet known" in unsure and "more runs could not decide it" in unsure
    assert prober.extra_runs == 0


def test_wall_mode_runs_to_the_cap_while_more_runs_could_decide():
    """Noise that eight runs can see through, but three cannot: runs are added while they
    could decide, and with a cap of 3 the same comparison ends "not yet known" at the cap."""
    prober = NoisyProber({"CONFIG_OPT01": 60.0}, noise_pct=2.0, seed=2)
    capped = Bisector(prober, options(2), "proc.fork_exit", WALL, threshold_pct=5.0, log=lambda m: None,
                      max_runs=3).run()
    assert capped.culprits == [] and any("the cap of 3 runs" in u for u in capped.unsure)
    prober = NoisyProber({"CONFIG_OPT01": 60.0}, noise_pct=2.0, seed=2)
    result = Bisector(prober, options(2), "proc.fork_exit", WALL, threshold_pct=5.0, log=lambda m: None).run()
    assert prober.extra_runs > 0 and [c.option for c in result.culprits] == ["CONFIG_OPT01"]


def test_icount_verdicts_are_exact_and_never_unsure():
    from kernellab.experiments.probe import DIFFERENT, SAME, verdict
    assert verdict([100.0], [101.0], "lower", ICOUNT, 2.0, 8).kind == SAME
    assert verdict([100.0], [103.0], "lower", ICOUNT, 2.0, 8).kind == DIFFERENT


def test_a_wall_verdict_of_same_needs_the_interval_inside_the_threshold():
    from kernellab.experiments.probe import SAME, UNKNOWN, verdict
    tight = [100.0, 100.2, 99.8, 100.1, 99.9]
    assert verdict(tight, [x + 0.3 for x in tight], "lower", WALL, 5.0, 8).kind == SAME
    loose = [100.0, 130.0, 75.0]
    assert verdict(loose, [101.0, 128.0, 77.0], "lower", WALL, 5.0, 8).kind == UNKNOWN


def test_culprits_are_confirmed_by_reverting_them():
    prober = FakeProber({"CONFIG_OPT03": 300.0, "CONFIG_OPT17": 500.0})
    result = bisect(prober, options(20))
    conf = result.confirmation
    assert conf["confirmed"] is True and conf["together"]["verdict"] == "same"
    assert {o: v["verdict"] for o, v in conf["each"].items()} == {"CONFIG_OPT03": "different",
                                                                  "CONFIG_OPT17": "different"}


def test_an_effect_spread_thin_fails_the_revert_check():
    """Culprits that explain only part of the change: BAD without them is not GOOD again."""
    costs = {"CONFIG_OPT00": 400.0, **{f"CONFIG_OPT{i:02d}": 15.0 for i in range(1, 20)}}
    result = bisect(FakeProber(costs), options(20))
    assert [c.option for c in result.culprits] == ["CONFIG_OPT00"]
    assert result.confirmation["confirmed"] is False
    assert result.confirmation["together"]["verdict"] == "different"


def _wide_states(prober, wide):
    """The distinct settings of the wide options the probes built, in order: each new
    one recompiles most of the tree, even with ccache."""
    seen = []
    for p in prober.probes:
        state = frozenset(o for o in p.config if o in wide)
        if state not in seen:
            seen.append(state)
    return seen


WIDE = {"CONFIG_OPT03": 1000, "CONFIG_OPT14": 900, "CONFIG_OPT27": 1000}


def test_wide_options_are_tested_together_first_and_then_left_alone():
    """Three options that recompile the whole tree among 32, culprits among the local
    ones: the wide ones are probed together once, found innocent, and every later probe
    builds them as BAD has them, so no probe but GOOD and BAD's needs a new wide build.
    Halving in name order finds the same culprits with several new wide builds."""
    target, costs = options(32), {"CONFIG_OPT05": 300.0, "CONFIG_OPT20": 400.0}
    by_radius, in_name_order = FakeProber(costs, recompiles=WIDE), FakeProber(costs)
    found, plain = bisect(by_radius, target), bisect(in_name_order, target)
    assert [c.option for c in found.culprits] == [c.option for c in plain.culprits] == ["CONFIG_OPT05", "CONFIG_OPT20"]
    assert found.wide == ["CONFIG_OPT03", "CONFIG_OPT27", "CONFIG_OPT14"]   # widest first, then by name
    assert plain.wide == []
    assert by_radius.sequence[2] == tuple(sorted(WIDE))     # the first halving: the wide ones together
    assert _wide_states(by_radius, WIDE) == [frozenset(), frozenset(WIDE)]
    assert len(_wide_states(in_name_order, WIDE)) > 2
    in_name_order.recompiles = WIDE

    def search_cost(prober):   # objects the halving probes recompile, past GOOD and BAD
        n = sum(not p.label.startswith(("alone:", "without")) for p in prober.probes)
        return sum(prober.rebuilt()[2:n])
    assert search_cost(by_radius) < 100 < 1000 < search_cost(in_name_order)


def test_an_option_a_wide_one_needs_is_searched_with_it():
    """Like FTRACE, which FUNCTION_TRACER (a compiler flag) needs: few objects name FTRACE,
    yet the flag comes and goes with it. Left among the local options, the wide half could
    not apply FUNCTION_TRACER, and the local half would switch the flag on and off."""
    target = options(32)
    recompiles = {"CONFIG_OPT02": 1000, "CONFIG_OPT21": 900}
    requires = {"CONFIG_OPT02": ["CONFIG_OPT30"], "CONFIG_OPT07": ["CONFIG_OPT30"]}
    prober = FakeProber({"CONFIG_OPT02": 700.0}, requires=requires, recompiles=recompiles)
    result = bisect(prober, target)
    # OPT30's family first (it needs nothing, then what needs it), then OPT21; OPT07 needs
    # OPT30 but recompiles little: it stays with the local options.
    assert result.wide == ["CONFIG_OPT30", "CONFIG_OPT02", "CONFIG_OPT21"]
    assert prober.sequence[2] == ("CONFIG_OPT02", "CONFIG_OPT21", "CONFIG_OPT30")
    assert prober.probes[2].config.keys() == {"CONFIG_OPT02", "CONFIG_OPT21", "CONFIG_OPT30"}   # all applied
    # The wide half halves between families: OPT30 and OPT02 together, OPT21 alone.
    assert prober.sequence[3] == ("CONFIG_OPT02", "CONFIG_OPT30")
    assert [c.option for c in result.culprits] == ["CONFIG_OPT02"]
    assert result.culprits[0].removed_from_bad == 700.0
    assert result.families == {"CONFIG_OPT30": "CONFIG_OPT30", "CONFIG_OPT02": "CONFIG_OPT30",
                               "CONFIG_OPT21": "CONFIG_OPT21"}


def test_the_bench_says_how_many_wide_builds_no_search_order_avoids():
    """Telling 1 culprit family of 2 apart takes one halving, its revert one more build."""
    import importlib.util
    path = Path(__file__).parent.parent / "bench" / "bisect_builds.py"
    spec = importlib.util.spec_from_file_location("bisect_builds", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    families = {"CONFIG_OPT30": "CONFIG_OPT30", "CONFIG_OPT02": "CONFIG_OPT30", "CONFIG_OPT21": "CONFIG_OPT21"}
    one = {"families": families, "culprits": [{"option": "CONFIG_OPT02"}]}
    assert bench.wide_floor(one, 5) == (
        "culprits in 1 of the 2 wide families: any search order is expected to make at least 2 probe builds of a "
        "wide combination no earlier probe made (1 to tell which 1 of 2, on average over where they could lie; "
        "1 to revert them in the confirmation); this bisect made 5 probe builds")
    many = {"families": {f"W{i}": f"W{i}" for i in range(35)},
            "culprits": [{"option": "W0"}, {"option": "W7"}, {"option": "W9"}, {"option": "NARROW"}]}
    assert "expected to make at least 17 probe builds" in bench.wide_floor(many, 20)   # 13 halvings + 4 reverts
    assert bench.wide_floor({"families": families, "culprits": [{"option": "NARROW"}]}, 5) == \
        "no culprit is wide: every probe could be incremental"


def test_a_wide_culprit_is_found_as_in_name_order():
    target, costs = options(32), {"CONFIG_OPT14": 400.0, "CONFIG_OPT20": 300.0}
    found = bisect(FakeProber(costs, recompiles=WIDE), target)
    assert [c.option for c in found.culprits] == [c.option for c in bisect(FakeProber(costs), target).culprits] \
        == ["CONFIG_OPT14", "CONFIG_OPT20"]
    assert found.culprits[0].alone_on_good == pytest.approx(400.0)


def html_summary(page: str) -> str:
    """The lines of an HTML page's summary (its first section's), as text."""
    import html
    import re
    start = page.index('<div class="summary">')
    return html.unescape(re.sub(r"<[^>]+>", "\n", page[start:page.index("</div>", start)]))


def test_probes_measured_ahead_are_marked_and_counted_in_the_table_and_thehtml_summary():
    """A probe a cluster's idle workers measured ahead and the search never needed: marked
    in the table, counted in its cost line and in the HTML page's summary; none, no mention."""
    from kernellab.report import kinds
    result = bisect(FakeProber({"CONFIG_OPT03": 100.0}), options(8)).to_dict()
    bisect_kind = kinds.get("bisect")
    for view in (bisect_kind.render(result, "table"), html_summary(bisect_kind.render(result, "html"))):
        assert "measured ahead" not in view
    unused = result["probes"][1]["label"]
    result["probes"][1]["ahead"] = True
    table = bisect_kind.render(result, "table")
    assert [line.split()[0] for line in table.splitlines() if line.endswith("measured ahead, not needed")] == [unused]
    count = f"{len(result['probes'])} probe(s) (1 of them measured ahead on idle workers and not needed)"
    assert count in table
    assert count in html_summary(bisect_kind.render(result, "html"))
