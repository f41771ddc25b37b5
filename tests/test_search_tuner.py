"""tune_problem with an in-process evaluator: budgets, rejection before evaluation, early stop,
resume, failure states, winner selection under noise, and recording into a real TuningStore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _search_fakes import HARD_KEY, FakeConfig, FakeEvaluator, FakeFamily, MemorySink, search_stop, timing

from autocutlass.db import TuningStore
from autocutlass.errors import UnsupportedProblem
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.space import config_key
from autocutlass.search.timing import NOISE_FLOOR_REL, Timing, beats, noise_ms
from autocutlass.search.tuner import TrialResult, select_winner, tune_problem

P = GemmProblem(m=512, n=512, k=512)


def big_family(**kw: Any) -> FakeFamily:
    """~300 configs, about half infeasible: TPE territory."""
    return FakeFamily(tiles=tuple(range(8, 8 * 26, 8)), stages=(1, 2, 3, 4, 5, 6), modes=("a", "b"), smem=400, **kw)


def by_tile(params: dict[str, Any]) -> float:
    return 1.0 + abs(params["tile"] - 96) / 10 + params["stages"] * 0.01


def test_infeasible_configs_never_reach_evaluation_nor_consume_budget() -> None:
    fam = big_family()
    ev = FakeEvaluator(by_tile)
    sink = MemorySink()
    r = tune_problem(P, fam, sink, trials=12, evaluator=ev, hard_key=HARD_KEY)
    assert r.strategy == "tpe"
    assert r.evaluated == len(ev.submitted) == len(sink.records) == 12
    assert all(fam.check(fam.config_from_dict(p), P) is None for p in ev.submitted)
    assert len({config_key(p) for p in ev.submitted}) == 12  # no repeats
    assert sum(r.rejections.values()) > 0  # TPE sampled infeasible configs; they were rejected for free
    assert r.best is not None and search_stop(r.stop_reason) == "trial budget"
    assert sink.best[P.key()][0] == r.best.config


def test_small_space_is_a_grid_and_exhaustive_evaluates_every_feasible_config() -> None:
    fam = FakeFamily()
    ev = FakeEvaluator(by_tile)
    r = tune_problem(P, fam, MemorySink(), exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert r.strategy == "grid"
    assert r.evaluated == r.feasible == len(ev.submitted)
    assert search_stop(r.stop_reason) == "space exhausted"
    assert ev.submitted[0] == {"tile": 32, "stages": 2, "mode": "a"}  # the seed first


def test_early_stop_when_nothing_improves() -> None:
    ev = FakeEvaluator(lambda p: 1.0)  # all equal: nothing ever improves after the first
    r = tune_problem(P, big_family(), MemorySink(), trials=100, patience=5, evaluator=ev, hard_key=HARD_KEY)
    # the polish then evaluates the incumbent's neighbours once, finds nothing better and stops
    assert search_stop(r.stop_reason).startswith("no improvement in 5 trials; polish: ")
    assert search_stop(r.stop_reason).endswith(", 0 moves, local optimum")
    # the first outcome is the improvement; 5 more without one stop submissions; in-flight ones finish
    assert 6 <= r.evaluated - r.polished <= 6 + ev.capacity


def test_exhaustive_never_stops_early() -> None:
    ev = FakeEvaluator(lambda p: 1.0)
    fam = FakeFamily()
    r = tune_problem(P, fam, MemorySink(), exhaustive=True, patience=2, evaluator=ev, hard_key=HARD_KEY)
    assert r.evaluated == r.feasible


def test_seconds_budget() -> None:
    ev = FakeEvaluator(by_tile)
    r = tune_problem(P, big_family(), MemorySink(), seconds=1e-9, evaluator=ev, hard_key=HARD_KEY)
    assert search_stop(r.stop_reason) == "time budget" and r.evaluated == 0 and r.best is None


def test_resume_skips_finished_config_keys() -> None:
    fam = FakeFamily(smem=10_000)
    sink = MemorySink()
    first = FakeEvaluator(by_tile)
    r1 = tune_problem(P, fam, sink, trials=5, evaluator=first, hard_key=HARD_KEY)
    assert r1.evaluated == 5
    second = FakeEvaluator(by_tile)
    r2 = tune_problem(P, fam, sink, exhaustive=True, evaluator=second, hard_key=HARD_KEY)
    done_first = {config_key(p) for p in first.submitted}
    assert r2.skipped == 5
    assert done_first.isdisjoint(config_key(p) for p in second.submitted)
    assert len(first.submitted) + len(second.submitted) == len(fam.space(P))
    # the winner is chosen over both runs' trials
    all_ms = {config_key(p): by_tile(p) for p in first.submitted + second.submitted}
    assert r2.best is not None and r2.best.timing is not None
    assert r2.best.timing.median_ms <= min(all_ms.values()) * (1 + NOISE_FLOOR_REL) + 1e-12
    # no-resume evaluates everything again
    third = FakeEvaluator(by_tile)
    tune_problem(P, fam, sink, exhaustive=True, resume=False, evaluator=third, hard_key=HARD_KEY)
    assert len(third.submitted) == len(fam.space(P))


def test_resume_with_an_earlier_winner_keeps_it_if_the_new_run_finds_nothing_better() -> None:
    fam = FakeFamily(smem=10_000, seeds=[FakeConfig(64, 1, "a")])
    sink = MemorySink()
    tune_problem(P, fam, sink, trials=1, evaluator=FakeEvaluator(lambda p: 0.5), hard_key=HARD_KEY)
    earlier = dict(sink.best[P.key()][0])
    r = tune_problem(P, fam, sink, trials=3, evaluator=FakeEvaluator(lambda p: 2.0), hard_key=HARD_KEY)
    assert r.best is not None and r.best.earlier and r.best.config == earlier
    assert sink.best[P.key()][0] == earlier


def test_failures_are_recorded_with_their_state_and_never_win() -> None:
    def score(p: dict[str, Any]) -> float | tuple[str, str]:
        if p["tile"] == 16:
            return ("wrong_result", "relative Frobenius error 0.5")  # would be the fastest
        if p["tile"] == 128:
            return ("crash", "benchmark: worker died (killed by SIGSEGV)")
        if p["mode"] == "b" and p["tile"] == 64:
            return ("timeout", "no reply within 60 s")
        return 1.0 + p["tile"] / 100

    sink = MemorySink()
    r = tune_problem(P, FakeFamily(), sink, exhaustive=True, evaluator=FakeEvaluator(score), hard_key=HARD_KEY)
    states = {rec.state for rec in sink.records}
    assert {"ok", "wrong_result", "crash", "timeout"} <= states
    assert r.best is not None and r.best.config["tile"] == 32
    assert r.states["wrong_result"] >= 1 and all(not f.ok for f in r.failures)
    assert all(rec.median_ms is None for rec in sink.records if rec.state != "ok")


def test_torch_ratio_is_reported() -> None:
    r = tune_problem(P, FakeFamily(), MemorySink(), trials=3, evaluator=FakeEvaluator(lambda p: 0.5, torch_ms=1.0),
                     hard_key=HARD_KEY)  # fmt: skip
    assert r.vs_torch == pytest.approx(2.0)
    assert r.best_tflops == pytest.approx(P.flops / 0.5e-3 / 1e12)


def test_hard_key_defaults_to_the_evaluator_device() -> None:
    sink = MemorySink()
    r = tune_problem(P, FakeFamily(), sink, trials=2, evaluator=FakeEvaluator(by_tile))
    assert r.hard_key == HARD_KEY and all(rec.hard_key == HARD_KEY for rec in sink.records)


def test_unsupported_problem_raises() -> None:
    with pytest.raises(UnsupportedProblem):
        tune_problem(GemmProblem(m=16, n=16, k=0), FakeFamily(), MemorySink(), evaluator=FakeEvaluator(by_tile))


def test_progress_callback() -> None:
    seen = []
    tune_problem(P, FakeFamily(), MemorySink(), trials=4, evaluator=FakeEvaluator(by_tile), hard_key=HARD_KEY,
                 progress=seen.append)  # fmt: skip
    assert [p.evaluated for p in seen] == [1, 2, 3, 4]
    assert seen[-1].planned == 4 and seen[-1].best is not None


# ---- winner selection ----------------------------------------------------------------------------
def simplicity(cfg: dict[str, Any]) -> tuple[int, ...]:
    return (cfg["stages"],)


def tr(stages: int, t: Timing) -> TrialResult:
    cfg = {"tile": 64, "stages": stages, "mode": "a"}
    return TrialResult(config_key(cfg), cfg, "ok", None, t, None)


def test_noise_rules() -> None:
    assert beats(timing(1.0), timing(1.1))
    assert not beats(timing(1.0), timing(1.005))  # within the relative floor
    assert not beats(timing(1.0, spread=0.3), timing(1.1, spread=0.3))  # within the spread
    assert noise_ms(timing(1.0, 0.3), timing(1.1)) == pytest.approx(0.15)


def test_a_tie_goes_to_the_simpler_config() -> None:
    fast_complex = tr(3, timing(1.000))
    slow_simple = tr(1, timing(1.004))
    winner, runner_up = select_winner([fast_complex, slow_simple], simplicity)
    assert winner is slow_simple and runner_up is fast_complex


def test_a_winner_must_beat_the_simpler_by_more_than_the_noise() -> None:
    fast_complex = tr(3, timing(1.0, spread=0.02))
    slow_simple = tr(1, timing(1.2, spread=0.02))
    winner, _ = select_winner([slow_simple, fast_complex], simplicity)
    assert winner is fast_complex
    noisy_simple = tr(1, timing(1.2, spread=0.5))
    winner, _ = select_winner([noisy_simple, fast_complex], simplicity)
    assert winner is noisy_simple


def test_no_ok_results_no_winner() -> None:
    bad = TrialResult("k", {"stages": 1}, "wrong_result", "x", None, None)
    assert select_winner([bad], simplicity) == (None, None)


# ---- with the real database ----------------------------------------------------------------------
def test_records_into_a_tuning_store_and_resumes_from_it(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "t.sqlite")
    fam = FakeFamily(smem=10_000)
    r1 = tune_problem(P, fam, store, trials=4, evaluator=FakeEvaluator(by_tile), hard_key=HARD_KEY)
    trials = store.trials(P, HARD_KEY)
    assert len(trials) == 4 and all(t.state == "ok" for t in trials)
    rec = store.lookup(P, HARD_KEY)
    assert rec is not None and r1.best is not None and rec.config == r1.best.config and rec.family == "fake"
    assert store.finished_config_keys(P, HARD_KEY, "fake") == {t.config_key for t in trials}
    ev = FakeEvaluator(by_tile)
    r2 = tune_problem(P, fam, store, exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert r2.skipped == 4 and len(ev.submitted) == len(fam.space(P)) - 4
    assert len(store.trials(P, HARD_KEY)) == len(fam.space(P))
    best = store.lookup(P, HARD_KEY)
    # tiles 64 and 128 tie (by_tile), stages 1 is fastest; the tie goes to the simpler (smaller tile)
    assert best is not None and best.config == {"tile": 64, "stages": 1, "mode": "a"}
