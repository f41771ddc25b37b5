"""The polish after the main search: hill climbing over single-field neighbours of the incumbent,
its budgets and cap, where it does not run, recording, resume, and failing neighbours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _search_fakes import HARD_KEY, FakeConfig, FakeEvaluator, FakeFamily, MemorySink, search_stop

from autocutlass.db import TuningStore
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search import tuner
from autocutlass.search.space import config_key
from autocutlass.search.tuner import POLISH_MAX_TRIALS, TuneProgress, TuneResult, differs_in_one_field, tune_problem

P = GemmProblem(m=512, n=512, k=512)

# A landscape like skinny-k on the H200: the seed is good, everything TPE samples at random is far
# worse, and the optimum is two single-field moves away from the seed (stages, then mode); the
# other order (mode first) is worse than the seed, so the path is INCUMBENT -> STEP -> OPTIMUM.
INCUMBENT = {"tile": 64, "stages": 2, "mode": "a"}
STEP = {"tile": 64, "stages": 4, "mode": "a"}
OPTIMUM = {"tile": 64, "stages": 4, "mode": "c"}
DETOUR = {"tile": 64, "stages": 2, "mode": "c"}


def landscape(params: dict[str, Any]) -> float | tuple[str, str]:
    special = {config_key(INCUMBENT): 1.0, config_key(STEP): 0.9, config_key(OPTIMUM): 0.8, config_key(DETOUR): 1.1}
    return special.get(config_key(params), 2.0 + params["tile"] / 1000)


def family() -> FakeFamily:
    """8 x 6 x 3 = 144 configs, all feasible (TPE territory); a config has 7 + 5 + 2 = 14 neighbours."""
    return FakeFamily(tiles=(8, 16, 32, 48, 64, 96, 128, 192), stages=(1, 2, 3, 4, 5, 6), modes=("a", "b", "c"),
                      smem=10**6, seeds=[FakeConfig(**INCUMBENT)])  # fmt: skip


def main_phase(r: TuneResult, ev: FakeEvaluator) -> list[dict[str, Any]]:
    """What the main search submitted (the FakeEvaluator finishes candidates in order)."""
    return ev.submitted[: r.evaluated - r.polished]


def neighbours(config: dict[str, Any], fam: FakeFamily) -> list[dict[str, Any]]:
    all_configs = [fam.config_to_dict(c) for c in fam.space(P) if fam.check(c, P) is None]
    return [c for c in all_configs if differs_in_one_field(c, config)]


def test_differs_in_one_field() -> None:
    assert differs_in_one_field(INCUMBENT, STEP)
    assert not differs_in_one_field(INCUMBENT, OPTIMUM)  # two fields
    assert not differs_in_one_field(INCUMBENT, INCUMBENT)
    # a field one dict leaves out (a family's default, e.g. hopper_conv's serial split_mode) is one more value
    assert differs_in_one_field(INCUMBENT, {"tile": 64, "stages": 2})
    assert not differs_in_one_field(INCUMBENT, {"tile": 128, "stages": 2})  # a field left out and another


def test_polish_climbs_two_moves_from_where_tpe_stopped_to_the_optimum() -> None:
    fam = family()
    ev = FakeEvaluator(landscape)
    sink = MemorySink()
    seen: list[TuneProgress] = []
    r = tune_problem(P, fam, sink, evaluator=ev, hard_key=HARD_KEY, seed=0, progress=seen.append)
    main = main_phase(r, ev)
    # the premise: seeded TPE stopped early at the seed, without seeing the two better configs
    assert r.strategy == "tpe" and main[0] == INCUMBENT
    assert STEP not in main and OPTIMUM not in main, "TPE found the optimum itself: pick another seed"
    assert search_stop(r.stop_reason) == f"no improvement in {tuner.DEFAULT_PATIENCE} trials; polish: {r.polished} trials, 2 moves, local optimum"  # fmt: skip
    # the polish: INCUMBENT -> STEP -> OPTIMUM, then OPTIMUM's neighbours certify a local optimum
    assert r.best is not None and r.best.config == OPTIMUM and not r.best.earlier
    polish = ev.submitted[len(main) :]
    assert len(polish) == r.polished > 0
    assert STEP in polish and OPTIMUM in polish
    assert all(any(differs_in_one_field(p, c) for c in (INCUMBENT, STEP, OPTIMUM)) for p in polish)
    assert len({config_key(p) for p in ev.submitted}) == len(ev.submitted)  # nothing evaluated twice
    assert all(n in ev.submitted for n in neighbours(OPTIMUM, fam))
    assert r.polished <= 14 + 13 + 12  # three rounds at most, each without what was evaluated
    # with the default budget the polish comes on top of it, within its cap
    assert r.evaluated == len(main) + r.polished and r.polished <= POLISH_MAX_TRIALS
    # progress marks the polish outcomes and counts on
    assert [p.evaluated for p in seen] == list(range(1, r.evaluated + 1))
    assert [p.polishing for p in seen] == [False] * len(main) + [True] * r.polished
    assert all(p.planned is not None and p.planned >= p.evaluated for p in seen)


def test_polish_trials_are_recorded_in_the_sink_like_other_trials() -> None:
    sink = MemorySink()
    ev = FakeEvaluator(landscape)
    r = tune_problem(P, family(), sink, evaluator=ev, hard_key=HARD_KEY, seed=0)
    assert r.polished > 0
    assert [rec.config for rec in sink.records] == ev.submitted
    assert len(sink.records) == r.evaluated
    by_key = {rec.config_key: rec for rec in sink.records}
    opt = by_key[config_key(OPTIMUM)]
    assert opt.state == "ok" and opt.median_ms == pytest.approx(0.8)
    assert sink.best[P.key()] == (OPTIMUM, pytest.approx(0.8), opt.id)
    assert r.best is not None and r.best.trial_id == opt.id


def test_polish_respects_an_explicit_trial_budget() -> None:
    ev = FakeEvaluator(landscape)
    sink = MemorySink()
    r = tune_problem(P, family(), sink, trials=25, patience=6, evaluator=ev, hard_key=HARD_KEY, seed=0)
    main = main_phase(r, ev)
    # early stop after at most 1 + 6 + capacity trials, so round one (<= 14) fits in the budget
    assert len(main) <= 1 + 6 + ev.capacity and STEP not in main
    assert search_stop(r.stop_reason) == f"no improvement in 6 trials; polish: {r.polished} trials, 1 move, trial budget"
    assert r.polished == 25 - len(main)  # polish trials count against the budget
    assert r.evaluated == len(ev.submitted) == len(sink.records) == 25
    # round one found STEP; the budget ran out early in round two, before OPTIMUM
    assert OPTIMUM not in ev.submitted, "round two reached OPTIMUM within the budget: lower the budget"
    assert r.best is not None and r.best.config == STEP


def test_no_polish_when_the_main_search_used_up_an_explicit_trial_budget() -> None:
    ev = FakeEvaluator(landscape)
    r = tune_problem(P, family(), MemorySink(), trials=5, evaluator=ev, hard_key=HARD_KEY, seed=0)
    assert r.polished == 0 and r.evaluated == len(ev.submitted) == 5
    assert search_stop(r.stop_reason) == "trial budget"


def test_polish_respects_a_seconds_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # a clock that advances one "second" per recorded outcome makes the seconds budget exact
    monkeypatch.setattr(tuner._Tuning, "_elapsed", lambda self: float(len(self.results)))
    ev = FakeEvaluator(landscape)
    r = tune_problem(P, family(), MemorySink(), seconds=20, patience=6, evaluator=ev, hard_key=HARD_KEY, seed=0)
    assert search_stop(r.stop_reason).startswith("no improvement in 6 trials; polish: ")
    assert search_stop(r.stop_reason).endswith(", time budget")
    assert r.evaluated - r.polished < 20 <= r.evaluated <= 20 + ev.capacity


def test_polish_stops_at_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuner, "POLISH_MAX_TRIALS", 5)
    ev = FakeEvaluator(landscape)
    r = tune_problem(P, family(), MemorySink(), patience=6, evaluator=ev, hard_key=HARD_KEY, seed=0)
    assert r.polished == 5 and search_stop(r.stop_reason).endswith("polish: 5 trials, 0 moves, cap")
    assert r.evaluated == len(ev.submitted) == len(main_phase(r, ev)) + 5


def test_no_polish_when_exhaustive() -> None:
    fam = family()
    ev = FakeEvaluator(landscape)
    r = tune_problem(P, fam, MemorySink(), exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert r.strategy == "grid" and search_stop(r.stop_reason) == "space exhausted" and r.polished == 0
    assert r.evaluated == r.feasible == len(ev.submitted) == len(fam.space(P))
    assert r.best is not None and r.best.config == OPTIMUM


def test_no_polish_when_a_small_grid_covers_the_space() -> None:
    ev = FakeEvaluator(landscape)
    fam = FakeFamily(seeds=[FakeConfig(64, 2, "a")])  # 24 configs, a grid within the default budget
    r = tune_problem(P, fam, MemorySink(), evaluator=ev, hard_key=HARD_KEY)
    assert r.strategy == "grid" and search_stop(r.stop_reason) == "space exhausted" and r.polished == 0
    assert r.evaluated == r.feasible


def test_a_grid_that_stops_early_is_polished() -> None:
    # not everything was evaluated, so the incumbent's neighbours are worth a look
    fam = FakeFamily(tiles=(16, 32, 64), stages=(1, 2, 3, 4), modes=("a", "c"), smem=10**6,
                     seeds=[FakeConfig(**INCUMBENT)])  # fmt: skip
    ev = FakeEvaluator(landscape)
    r = tune_problem(P, fam, MemorySink(), patience=2, evaluator=ev, hard_key=HARD_KEY, seed=3)
    assert r.strategy == "grid" and search_stop(r.stop_reason).startswith("no improvement in 2 trials; polish: ")
    assert search_stop(r.stop_reason).endswith(", 2 moves, local optimum")
    assert OPTIMUM not in main_phase(r, ev) and r.evaluated < r.feasible
    assert r.best is not None and r.best.config == OPTIMUM


def test_failing_neighbours_neither_stop_the_polish_nor_win() -> None:
    crash = {"tile": 32, "stages": 2, "mode": "a"}  # the seed's neighbours, round one
    wrong = {"tile": 96, "stages": 2, "mode": "a"}
    timeout = {"tile": 64, "stages": 4, "mode": "b"}  # STEP's neighbours, round two
    no_compile = {"tile": 16, "stages": 4, "mode": "a"}
    failing: dict[str, tuple[str, str]] = {
        config_key(crash): ("crash", "CUDA fault: illegal address"),
        config_key(wrong): ("wrong_result", "relative error 1.0"),
        config_key(timeout): ("timeout", "no reply within 60 s"),
        config_key(no_compile): ("compile_error", "fake DSL error"),
    }

    def score(params: dict[str, Any]) -> float | tuple[str, str]:
        return failing.get(config_key(params)) or landscape(params)

    ev = FakeEvaluator(score)
    sink = MemorySink()
    r = tune_problem(P, family(), sink, evaluator=ev, hard_key=HARD_KEY, seed=0)
    main = main_phase(r, ev)
    assert not any(f in main for f in (crash, wrong, timeout, no_compile, STEP, OPTIMUM))
    assert r.best is not None and r.best.config == OPTIMUM
    assert search_stop(r.stop_reason).endswith(", 2 moves, local optimum")
    assert {"crash": 1, "wrong_result": 1, "timeout": 1, "compile_error": 1}.items() <= r.states.items()
    states = {rec.config_key: rec.state for rec in sink.records}
    assert states[config_key(crash)] == "crash" and states[config_key(timeout)] == "timeout"
    assert {config_key(f.config) for f in r.failures} == set(failing)


def test_resume_polishes_from_the_earlier_incumbent_and_evaluates_nothing_twice(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "t.sqlite")
    fam = family()
    first = FakeEvaluator(landscape)
    r1 = tune_problem(P, fam, store, evaluator=first, hard_key=HARD_KEY, seed=0)
    assert r1.best is not None and r1.best.config == OPTIMUM and r1.polished > 0
    assert len(store.trials(P, HARD_KEY)) == r1.evaluated
    rec = store.lookup(P, HARD_KEY)
    assert rec is not None and rec.config == OPTIMUM
    # again: the incumbent is the earlier OPTIMUM, whose neighbours are all finished already
    second = FakeEvaluator(landscape)
    r2 = tune_problem(P, fam, store, evaluator=second, hard_key=HARD_KEY, seed=1)
    assert r2.skipped == r1.evaluated and r2.polished == 0
    assert search_stop(r2.stop_reason).endswith("; polish: 0 trials, 0 moves, local optimum")
    assert {config_key(p) for p in first.submitted}.isdisjoint(config_key(p) for p in second.submitted)
    assert r2.best is not None and r2.best.earlier and r2.best.config == OPTIMUM
