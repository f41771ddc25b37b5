"""The finals after the search: the pool's fastest distinct configs timed again head to head with
torch, in rounds whose order alternates; the winner is the fastest finals median, a simpler config
only within 0.5% of it; without finals (failed, unsupported, one candidate) ``select_winner``
decides. Also the benchmark handler's finals orchestration with fakes, and the pipeline's finals
request over real worker processes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from _search_fakes import HARD_KEY, FakeConfig, FakeEvaluator, FakeFamily, MemorySink, Score, search_stop

from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search import handlers, tuner, workers
from autocutlass.search.handlers import BenchHandler, interleaved_rounds, round_order
from autocutlass.search.space import config_key
from autocutlass.search.timing import Timing, summarize
from autocutlass.search.tuner import (
    FINAL_ROUNDS,
    FINALISTS,
    FINALS_TIE_REL,
    TrialResult,
    finalists,
    result_row,
    select_finals_winner,
    tune_problem,
)
from autocutlass.search.workers import CandidatePipeline, EvalOutcome, FinalsOutcome

P = GemmProblem(m=512, n=512, k=512)


def cfg(tile: int, stages: int = 1, mode: str = "a") -> dict[str, Any]:
    return {"tile": tile, "stages": stages, "mode": mode}


def family(**kw: Any) -> FakeFamily:
    """4 tiles x 2 stages x 1 mode, all feasible: a grid of 8; simplicity is (stages, mode, tile)."""
    return FakeFamily(tiles=(16, 32, 64, 128), stages=(1, 2), modes=("a",), smem=10**6, seeds=[FakeConfig(16, 1)], **kw)


def table(ms: dict[str, float], default: float = 3.0) -> Score:
    """A score from config keys to ms (every other config: ``default``)."""
    return lambda p: ms.get(config_key(p), default)


def simplicity(config: dict[str, Any]) -> tuple[int, ...]:
    return (config["stages"], config["tile"])


# ---- the round order (pure) ---------------------------------------------------------------------
def test_round_order_alternates_direction() -> None:
    assert round_order(3, 0) == [0, 1, 2]
    assert round_order(3, 1) == [2, 1, 0]
    assert round_order(3, 2) == [0, 1, 2]
    assert round_order(1, 1) == [0] and round_order(0, 0) == []


@pytest.mark.parametrize("n", [2, 3, 5])
def test_over_two_rounds_every_participant_has_the_same_mean_position(n: int) -> None:
    positions = {i: [round_order(n, r).index(i) for r in range(2)] for i in range(n)}
    assert all(sum(p) == n - 1 for p in positions.values())


def test_interleaved_rounds_times_in_round_order_and_drops_failures() -> None:
    calls: list[int] = []
    fail_in_round_two = iter([1.0, None])

    def timer(i: int) -> Any:
        def t() -> float | None:
            calls.append(i)
            if i == 1:
                return next(fail_in_round_two)
            return 10.0 * i + len(calls)

        return t

    out = interleaved_rounds([timer(0), timer(1), timer(2)], rounds=3)
    # round 0 forward, round 1 backward (1 fails there), round 2 forward without 1
    assert calls == [0, 1, 2, 2, 1, 0, 0, 2]
    assert out == [[1.0, 6.0, 7.0], None, [23.0, 24.0, 28.0]]
    with pytest.raises(ValueError, match="at least one round"):
        interleaved_rounds([timer(0)], rounds=0)


# ---- choosing the winner (pure) -----------------------------------------------------------------
def tr(config: dict[str, Any], ms: float, trial_id: int | None = None) -> TrialResult:
    return TrialResult(config_key(config), config, "ok", None, Timing(ms, ms, ms, 20), trial_id)


def test_finalists_are_the_fastest_distinct_configs_capped() -> None:
    a, b, c, d, e = cfg(16), cfg(32), cfg(64), cfg(128), cfg(16, 2)
    results = [tr(a, 1.3), tr(b, 1.0), tr(b, 1.05), tr(c, 1.2), tr(d, 1.1), tr(e, 1.4), tr(a, 1.25)]
    failed = TrialResult(config_key(cfg(8)), cfg(8), "wrong_result", "x", None, None)
    got = finalists([*results, failed], simplicity)
    assert [r.config for r in got] == [b, d, c, a][:FINALISTS]
    assert got[0].timing is not None and got[0].timing.median_ms == 1.0  # a config's fastest trial
    assert got[3].timing is not None and got[3].timing.median_ms == 1.25
    assert len({r.key for r in got}) == len(got)
    assert finalists(results, simplicity, n=2) == got[:2]


def test_finals_winner_is_the_fastest_unless_a_simpler_one_is_within_half_a_percent() -> None:
    simple, complex_ = cfg(16, 1), cfg(128, 2)
    within = 1.0 * (1 + FINALS_TIE_REL * 0.6)
    beyond = 1.0 * (1 + FINALS_TIE_REL * 1.6)
    winner, runner_up = select_finals_winner([(tr(complex_, 9.0), Timing(1.0, 0.9, 1.1, 5)),
                                              (tr(simple, 9.0), Timing(within, 0.9, 1.1, 5))], simplicity)  # fmt: skip
    assert winner is not None and winner.config == simple and winner.timing == Timing(within, 0.9, 1.1, 5)
    assert runner_up is not None and runner_up.config == complex_ and runner_up.timing == Timing(1.0, 0.9, 1.1, 5)
    winner, _ = select_finals_winner([(tr(complex_, 9.0), Timing(1.0, 1.0, 1.0, 5)),
                                      (tr(simple, 9.0), Timing(beyond, beyond, beyond, 5))], simplicity)  # fmt: skip
    assert winner is not None and winner.config == complex_
    assert select_finals_winner([], simplicity) == (None, None)


# ---- the tuner ----------------------------------------------------------------------------------
def test_finals_pick_the_fastest_even_when_the_search_ranked_it_second() -> None:
    # the search's one timing ranks 32 over 64 (and 128 third); head to head 64 is faster
    search = table({config_key(cfg(32)): 1.00, config_key(cfg(64)): 1.02, config_key(cfg(128)): 1.05})
    finals = table({config_key(cfg(32)): 1.03, config_key(cfg(64)): 0.97, config_key(cfg(128)): 1.06})
    # the premise: without finals the search's timings pick 32
    fallback = tune_problem(P, family(), MemorySink(), exhaustive=True, hard_key=HARD_KEY,
                            evaluator=FakeEvaluator(search, finals_fail=True))  # fmt: skip
    assert fallback.best is not None and fallback.best.config == cfg(32)
    ev = FakeEvaluator(search, finals_score=finals)
    r = tune_problem(P, family(), MemorySink(), exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert len(ev.finals_calls) == 1 and ev.finals_calls[0][:3] == [cfg(32), cfg(64), cfg(128)]
    assert r.best is not None and r.best.config == cfg(64)
    assert r.best.timing is not None and r.best.timing.median_ms == pytest.approx(0.97)
    assert r.runner_up is not None and r.runner_up.config == cfg(32)
    assert r.stop_reason == f"space exhausted; finals: {FINALISTS} configs x {FINAL_ROUNDS} rounds"


@pytest.mark.parametrize(("simple_ms", "simple_wins"), [(1.003, True), (1.008, False)])
def test_a_simpler_config_wins_the_finals_only_within_half_a_percent(simple_ms: float, simple_wins: bool) -> None:
    simple, complex_ = cfg(16, 1), cfg(128, 2)  # simplicity: stages first
    search = table({config_key(simple): 1.5, config_key(complex_): 1.0}, default=5.0)
    finals = table({config_key(simple): simple_ms, config_key(complex_): 1.0}, default=5.0)
    r = tune_problem(P, family(), MemorySink(), exhaustive=True, evaluator=FakeEvaluator(search, finals_score=finals),
                     hard_key=HARD_KEY)  # fmt: skip
    assert r.best is not None and r.best.config == (simple if simple_wins else complex_)


def test_the_search_noise_tie_no_longer_hands_the_win_to_the_simpler_config() -> None:
    # 0.8% apart: a tie for the search (1% floor, select_winner picks the simpler), not for the finals
    simple, complex_ = cfg(16, 1), cfg(128, 2)
    search = table({config_key(simple): 1.008, config_key(complex_): 1.0}, default=5.0)
    with_finals = tune_problem(P, family(), MemorySink(), exhaustive=True, evaluator=FakeEvaluator(search),
                               hard_key=HARD_KEY)  # fmt: skip
    assert with_finals.best is not None and with_finals.best.config == complex_
    without = tune_problem(P, family(), MemorySink(), exhaustive=True,
                           evaluator=FakeEvaluator(search, finals_fail=True), hard_key=HARD_KEY)  # fmt: skip
    assert without.best is not None and without.best.config == simple


def test_fallback_to_select_winner_when_the_finals_do_not_finish() -> None:
    search = table({config_key(cfg(32)): 1.00, config_key(cfg(64)): 1.02})
    ev = FakeEvaluator(search, torch_ms=2.0, finals_fail=True)
    sink = MemorySink()
    r = tune_problem(P, family(), sink, exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    contenders = ev.finals_calls[0]
    assert len(ev.finals_calls) == 1 + len(contenders)  # then each finalist alone: all fail, none is blamed
    assert all(call == [c] for call, c in zip(ev.finals_calls[1:], contenders, strict=True))
    assert r.best is not None and r.best.config == cfg(32) and r.best.timing == Timing(1.0, 1.0, 1.0, 20)
    assert r.finals == () and r.torch is not None and r.torch.median_ms == 2.0
    assert r.stop_reason == (f"space exhausted; finals: did not finish; re-verified alone, 0 of {len(contenders)} "
                             "failed; the search timings decide")
    assert sink.best[P.key()][:2] == (cfg(32), 1.0)
    assert result_row(r)["finals"] == []


def test_a_finalist_that_fails_the_finals_alone_cannot_win() -> None:
    """The finals did not finish because one finalist faults (the search's fastest): re-verified
    alone it fails again and is kept out; the next fastest wins on its search timing."""
    search = table({config_key(cfg(32)): 1.00, config_key(cfg(64)): 1.02})
    flaky = cfg(32)
    ev = FakeEvaluator(search, torch_ms=2.0, finals_fail=lambda c: c == flaky)
    sink = MemorySink()
    r = tune_problem(P, family(), sink, exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert r.best is not None and r.best.config == cfg(64)
    assert sink.best[P.key()][0] == cfg(64)
    assert "re-verified alone, 1 of" in r.stop_reason


@dataclass
class NoFinals:
    """An evaluator without ``finals`` (an older or third-party one)."""

    inner: FakeEvaluator

    @property
    def capacity(self) -> int:
        return self.inner.capacity

    @property
    def in_flight(self) -> int:
        return self.inner.in_flight

    def submit(self, problem: GemmProblem, key: str, params: dict[str, Any]) -> None:
        self.inner.submit(problem, key, params)

    def poll(self, timeout_s: float) -> list[EvalOutcome]:
        return self.inner.poll(timeout_s)

    def baseline(self, problem: GemmProblem) -> EvalOutcome:
        return self.inner.baseline(problem)

    def device(self) -> dict[str, Any]:
        return self.inner.device()


def test_fallback_when_the_evaluator_has_no_finals() -> None:
    search = table({config_key(cfg(32)): 1.00, config_key(cfg(64)): 1.02})
    r = tune_problem(P, family(), MemorySink(), exhaustive=True, evaluator=NoFinals(FakeEvaluator(search)),  # type: ignore[arg-type]
                     hard_key=HARD_KEY)  # fmt: skip
    assert r.best is not None and r.best.config == cfg(32) and r.finals == ()
    assert r.stop_reason.endswith("; finals: not supported by the evaluator")


def test_no_finals_with_a_single_ok_candidate() -> None:
    def score(p: dict[str, Any]) -> float | tuple[str, str]:
        return 1.0 if p == cfg(16) else ("wrong_result", "relative error 1.0")

    ev = FakeEvaluator(score)
    r = tune_problem(P, family(), MemorySink(), exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert ev.finals_calls == [] and r.finals == () and r.stop_reason == "space exhausted"
    assert r.best is not None and r.best.config == cfg(16)


def test_record_best_gets_the_finals_timing_and_the_original_trial() -> None:
    search = table({config_key(cfg(32)): 1.00, config_key(cfg(64)): 1.02})
    finals = table({config_key(cfg(32)): 1.04, config_key(cfg(64)): 1.01})
    sink = MemorySink()
    r = tune_problem(P, family(), sink, exhaustive=True, evaluator=FakeEvaluator(search, finals_score=finals),
                     hard_key=HARD_KEY)  # fmt: skip
    trial = next(rec for rec in sink.records if rec.config == cfg(64))
    assert trial.median_ms == pytest.approx(1.02)  # the trial keeps the search's timing
    assert sink.best[P.key()] == (cfg(64), pytest.approx(1.01), trial.id)
    assert r.best is not None and r.best.trial_id == trial.id and r.best.timing is not None
    assert r.best.timing.median_ms == pytest.approx(1.01) and r.best.timing.n == FINAL_ROUNDS
    assert r.best_tflops == pytest.approx(P.flops / 1.01e-3 / 1e12)
    # finals in finals order (the search's fastest first), as a compact row
    assert [c for c, _ in r.finals] == [cfg(32), cfg(64), cfg(16), cfg(128)]
    assert [t.median_ms for _, t in r.finals] == pytest.approx([1.04, 1.01, 3.0, 3.0])
    row = result_row(r)
    assert row["finals"][:2] == [{"config_key": config_key(cfg(32)), "median_ms": pytest.approx(1.04)},
                                 {"config_key": config_key(cfg(64)), "median_ms": pytest.approx(1.01)}]  # fmt: skip
    assert row["median_ms"] == pytest.approx(1.01)


def test_torch_prefers_the_finals_timing() -> None:
    search = table({config_key(cfg(32)): 1.00, config_key(cfg(64)): 1.02})
    ev = FakeEvaluator(search, torch_ms=2.0, finals_torch_ms=1.8)
    r = tune_problem(P, family(), MemorySink(), exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert r.torch is not None and r.torch.median_ms == 1.8
    assert r.vs_torch == pytest.approx(1.8 / 1.0)


def test_torchs_variants_in_the_finals_are_recorded_as_vendor_records_of_their_own() -> None:
    """The finals time torch in the op's ``baseline_variants`` too (conv2d: cuDNN outside benchmark
    mode): each variant's time becomes its own vendor record, under the vendor hard key of that
    variant, beside the main one; without finals, no variant is recorded (the baseline timed none)."""
    import dataclasses

    from autocutlass.vendor import variant_of

    search = table({config_key(cfg(32)): 1.00, config_key(cfg(64)): 1.02})
    sink = MemorySink()
    ev = FakeEvaluator(search, torch_ms=2.0, finals_torch_ms=1.8, torch_variants={"heuristic": 0.7})
    tune_problem(P, family(), sink, exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    main_key, ms = sink.vendor[P.key()]
    assert ms == 1.8 and variant_of(main_key) == ""
    (key, variant), (variant_key, variant_ms) = next(iter(sink.vendor_variants.items()))
    assert len(sink.vendor_variants) == 1 and (key, variant, variant_ms) == (P.key(), "heuristic", 0.7)
    assert variant_of(variant_key) == "heuristic" and variant_key.kernel_hash != main_key.kernel_hash
    assert dataclasses.replace(variant_key, kernel_hash="") == dataclasses.replace(main_key, kernel_hash="")
    alone = MemorySink()

    def single(p: dict[str, Any]) -> float | tuple[str, str]:
        return 1.0 if p == cfg(16) else ("wrong_result", "relative error 1.0")

    tune_problem(P, family(), alone, exhaustive=True, hard_key=HARD_KEY,
                 evaluator=FakeEvaluator(single, torch_ms=2.0, torch_variants={"heuristic": 0.7}))  # fmt: skip
    assert alone.vendor[P.key()][1] == 2.0 and alone.vendor_variants == {}


def test_a_finalist_that_fails_in_the_finals_cannot_win() -> None:
    search = table({config_key(cfg(32)): 0.9, config_key(cfg(64)): 1.0})

    def finals(p: dict[str, Any]) -> float | tuple[str, str]:
        if p == cfg(32):
            return ("wrong_result", "after timing: relative error 1.0")
        return search(p)

    r = tune_problem(P, family(), MemorySink(), exhaustive=True, evaluator=FakeEvaluator(search, finals_score=finals),
                     hard_key=HARD_KEY)  # fmt: skip
    assert r.best is not None and r.best.config == cfg(64)
    assert cfg(32) not in [c for c, _ in r.finals] and len(r.finals) == FINALISTS - 1
    assert r.stop_reason.endswith(f"; finals: {FINALISTS} configs x {FINAL_ROUNDS} rounds (1 failed)")


def test_finals_after_an_explicit_budget_and_after_the_polish() -> None:
    fam = FakeFamily(tiles=tuple(range(8, 8 * 26, 8)), stages=(1, 2, 3), modes=("a", "b"), smem=10**6)
    ev = FakeEvaluator(lambda p: 1.0 + abs(p["tile"] - 96) / 100)
    r = tune_problem(P, fam, MemorySink(), trials=6, evaluator=ev, hard_key=HARD_KEY)
    assert search_stop(r.stop_reason) == "trial budget" and len(ev.finals_calls) == 1
    ev = FakeEvaluator(lambda p: 1.0 + abs(p["tile"] - 96) / 100)
    r = tune_problem(P, fam, MemorySink(), patience=4, evaluator=ev, hard_key=HARD_KEY)
    assert r.polished > 0 and len(ev.finals_calls) == 1 and len(r.finals) == FINALISTS
    assert r.stop_reason.endswith(f"; finals: {FINALISTS} configs x {FINAL_ROUNDS} rounds")


def test_resume_finals_seat_each_config_once_and_include_earlier_trials() -> None:
    fam = family()
    sink = MemorySink()
    # two earlier runs without resume: every config has two trials; 128 was fastest in the first,
    # the second ranks the rest (and 128 last)
    tune_problem(P, fam, sink, exhaustive=True, resume=False, hard_key=HARD_KEY,
                 evaluator=FakeEvaluator(table({config_key(cfg(128)): 0.5}, default=2.0)))  # fmt: skip
    tune_problem(P, fam, sink, exhaustive=True, resume=False, hard_key=HARD_KEY,
                 evaluator=FakeEvaluator(lambda p: 1.0 + p["tile"] / 1000 + p["stages"] / 100))  # fmt: skip
    assert len(sink.records) == 16
    ev = FakeEvaluator(lambda p: 1.0)
    r = tune_problem(P, fam, sink, exhaustive=True, evaluator=ev, hard_key=HARD_KEY)
    assert r.evaluated == 0 and ev.submitted == []  # everything finished earlier
    (seated,) = ev.finals_calls
    assert len(seated) == FINALISTS and len({config_key(c) for c in seated}) == FINALISTS
    assert seated == [cfg(128), cfg(16), cfg(16, 2), cfg(32)]  # 0.5 from run one, then run two's order
    assert r.best is not None and r.best.earlier


# ---- the benchmark handler's finals, with fakes for the GPU parts -------------------------------
class FakeFault(RuntimeError):
    pass


@dataclass
class FakeRunner:
    """Runs as ``name``: logs it and leaves it in D (or faults, when ``state["fault"]`` is its name)."""

    name: str
    state: dict[str, Any]
    inputs: FakeInputs

    def __call__(self) -> None:
        if self.name == self.state["fault"]:
            raise FakeFault("illegal address")
        self.inputs.log.append(self.name)
        if self.name not in self.state["no_write"]:
            self.inputs.d = self.name


@dataclass
class FakeInputs:
    log: list[str]
    d: Any = None

    @property
    def output(self) -> Any:
        return self.d

    def poison(self) -> None:
        self.d = "poison"

    def run(self, runner: Any) -> None:
        runner()


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A BenchHandler whose compile, verify, timing and torch are fakes. Config ``{"name": X}``
    runs as X; ``ms`` maps names to per-call ms; names in ``bad_verify`` / ``bad_after`` fail
    verification / the check after timing; those in ``no_write`` leave D as it was; ``fault``
    raises a CUDA fault while timed; ``disturbed`` maps names to how many of their next timings
    come out disturbed (p80 ten times p20, the median ten times the per-call ms)."""
    from autocutlass.search import timing as timing_mod
    from autocutlass.ops.gemm import evaluation as verify_mod

    state: dict[str, Any] = {"ms": {}, "bad_verify": set(), "bad_after": set(), "fault": None, "no_compile": set(),
                             "no_write": set(), "disturbed": {}}  # fmt: skip
    log: list[str] = []
    inputs = FakeInputs(log)

    def runner_for(name: str) -> FakeRunner:
        return FakeRunner(name, state, inputs)

    def compile_(family: Any, config: dict[str, Any], problem: GemmProblem) -> tuple[Any, dict[str, Any]]:
        if config["name"] in state["no_compile"]:
            return None, {"state": "compile_error", "reason": "fake DSL error", "timing": None}
        return runner_for(config["name"]), {}

    def time_callable(fn: Any, *, flush_bytes: int) -> Timing:
        fn()
        ms = state["ms"][log[-1]] + 0.01 * len(log)  # later timings are slower: a drift
        left = state["disturbed"].get(log[-1], 0)  # this many of the participant's timings are disturbed
        if left:
            state["disturbed"][log[-1]] = left - 1
            return Timing(10 * ms + left, 4 * ms, 40 * ms, 10, None)
        host = state.get("host", {}).get(log[-1])  # host ms of one call: the participant's values in turn
        if host:
            host.append(host.pop(0))
        return Timing(ms, ms, ms, 10, host[-1] if host else None)

    monkeypatch.setattr(handlers, "_compile", compile_)
    monkeypatch.setattr(handlers, "_family", lambda name: None)
    monkeypatch.setattr(handlers, "_fault_types", lambda: (FakeFault,))
    monkeypatch.setattr(timing_mod, "time_callable", time_callable)
    monkeypatch.setattr(verify_mod, "verify", lambda r, p, i, ref: (False, "bad") if r.name in state["bad_verify"] else (True, None))  # fmt: skip
    monkeypatch.setattr(verify_mod, "check_output",
                        lambda p, d, ref: (False, "NaN") if d in state["bad_after"] or d == "poison" else (True, None))  # fmt: skip
    monkeypatch.setattr(verify_mod, "torch_baseline", lambda p, i: runner_for("torch"))
    handler = BenchHandler()
    monkeypatch.setattr(handler, "_prepare", lambda problem: None)
    handler._inputs, handler._ref = inputs, "ref"
    state["handler"], state["log"] = handler, log
    yield state


def final_request(names: list[str], rounds: int) -> dict[str, Any]:
    return {"op": "final", "family": "fake", "problem": P.as_dict(), "configs": [{"name": n} for n in names],
            "rounds": rounds, "device": 0}  # fmt: skip


def test_handler_finals_interleave_and_summarise(fake_gpu: dict[str, Any]) -> None:
    fake_gpu["ms"] = {"a": 1.0, "b": 0.9, "torch": 2.0}
    reply = fake_gpu["handler"]._final(final_request(["a", "b"], rounds=3))
    assert fake_gpu["log"] == ["a", "b", "torch", "torch", "b", "a", "a", "b", "torch"]
    assert reply["state"] == "ok" and "exit" not in reply
    a, b = reply["entries"]
    assert a["state"] == "ok" and a["round_ms"] == pytest.approx([1.01, 1.06, 1.07])
    assert Timing.from_dict(a["timing"]) == summarize(a["round_ms"]) and summarize(a["round_ms"]).n == 3
    assert Timing.from_dict(a["timing"]).median_ms == pytest.approx(1.06)
    assert b["round_ms"] == pytest.approx([0.92, 0.95, 0.98])
    assert reply["torch"]["round_ms"] == pytest.approx([2.03, 2.04, 2.09])
    assert Timing.from_dict(reply["torch"]["timing"]).median_ms == pytest.approx(2.04)


def test_handler_finals_keep_the_median_host_time_of_the_rounds(fake_gpu: dict[str, Any]) -> None:
    """Each participant's finals timing carries the median of its rounds' host times (torch's
    too); a participant whose rounds measured none has none."""
    fake_gpu["ms"] = {"a": 1.0, "b": 0.9, "torch": 2.0}
    fake_gpu["host"] = {"a": [0.01, 0.03, 0.02], "torch": [0.05]}
    reply = fake_gpu["handler"]._final(final_request(["a", "b"], rounds=3))
    a, b = reply["entries"]
    assert Timing.from_dict(a["timing"]).host_ms == pytest.approx(0.02)
    assert Timing.from_dict(b["timing"]).host_ms is None and "host_ms" not in b["timing"]
    assert Timing.from_dict(reply["torch"]["timing"]).host_ms == pytest.approx(0.05)


def test_handler_finals_time_each_torch_variant_on_a_thread_of_its_own(fake_gpu: dict[str, Any],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """An op with ``baseline_variants`` (conv2d: cuDNN outside benchmark mode): the finals time
    torch in each variant beside the main path, every round, under that variant's settings and
    always on one thread of the variant's own (PyTorch caches cuDNN's plan per thread, keyed
    without the mode), never the handler's; the reply carries each variant's timing."""
    import contextlib
    import threading

    from autocutlass.ops.gemm import evaluation as ev

    seen: list[tuple[str, int]] = []
    current = threading.local()

    @contextlib.contextmanager
    def context(problem: Any, variant: str = "") -> Iterator[None]:
        seen.append((variant, threading.get_ident()))
        current.variant = variant
        yield

    def baseline(problem: Any, inputs: Any) -> FakeRunner:
        return FakeRunner(f"torch-{current.variant}" if current.variant else "torch", fake_gpu, inputs)

    monkeypatch.setattr(ev, "baseline_variants", lambda problem: ("heuristic",), raising=False)
    monkeypatch.setattr(ev, "baseline_context", context)
    monkeypatch.setattr(ev, "torch_baseline", baseline)
    fake_gpu["ms"] = {"a": 1.0, "b": 0.9, "torch": 2.0, "torch-heuristic": 1.5}
    reply = fake_gpu["handler"]._final(final_request(["a", "b"], rounds=3))
    assert fake_gpu["log"] == ["a", "b", "torch", "torch-heuristic", "torch-heuristic", "torch", "b", "a",
                               "a", "b", "torch", "torch-heuristic"]  # fmt: skip
    here = threading.get_ident()
    assert [v for v, _ in seen] == ["", "heuristic", "heuristic", "", "", "heuristic"]
    assert {t for v, t in seen if v == ""} == {here}
    threads = {t for v, t in seen if v == "heuristic"}
    assert len(threads) == 1 and here not in threads
    assert Timing.from_dict(reply["torch"]["timing"]).median_ms == pytest.approx(2.06)
    side = reply["torch_variants"]["heuristic"]
    assert side["round_ms"] == pytest.approx([1.54, 1.55, 1.62]) and list(reply["torch_variants"]) == ["heuristic"]
    out = workers._finals_outcome([{"name": "a"}, {"name": "b"}], 3, workers.Reply("result", reply))
    assert out is not None and out.variants["heuristic"].median_ms == pytest.approx(1.55)
    assert out.torch is not None and out.torch.median_ms == pytest.approx(2.06)


def bench_request(name: str | None) -> dict[str, Any]:
    return {"op": "bench", "family": "fake", "problem": P.as_dict(), "config": None if name is None else {"name": name},
            "device": 0}  # fmt: skip


def test_a_disturbed_search_timing_is_taken_again(fake_gpu: dict[str, Any]) -> None:
    """A candidate's (and torch's) single search timing whose p80 exceeds 1.5x its p20 is taken
    again (session 33: one trial timed at 171.8 us, p20 71.5, p80 587.7, a config its next tuning
    timed at 15.2 us, dropped from the finals); an undisturbed one is taken once."""
    fake_gpu["ms"] = {"a": 1.0, "b": 2.0, "torch": 3.0}
    fake_gpu["disturbed"] = {"a": 1, "torch": 2}
    reply = fake_gpu["handler"]._bench(bench_request("a"))
    assert reply["state"] == "ok" and fake_gpu["log"].count("a") == 2  # disturbed, then again
    t = Timing.from_dict(reply["timing"])
    assert t.median_ms < 1.1 and t.p80_ms == t.p20_ms
    reply = fake_gpu["handler"]._bench(bench_request(None))
    assert fake_gpu["log"].count("torch") == 3 and Timing.from_dict(reply["timing"]).median_ms < 3.1
    reply = fake_gpu["handler"]._bench(bench_request("b"))
    assert fake_gpu["log"].count("b") == 1 and Timing.from_dict(reply["timing"]).median_ms < 2.1


def test_steady_gives_up_after_its_attempts_with_the_lowest_median() -> None:
    from autocutlass.search.timing import DISTURBED_SPREAD, STEADY_ATTEMPTS, disturbed, steady

    assert not disturbed(Timing(1.0, 0.95, 0.95 * DISTURBED_SPREAD, 10))
    assert disturbed(Timing(1.0, 0.95, 0.96 * DISTURBED_SPREAD, 10))
    seq = iter([Timing(9.0, 1.0, 20.0, 10), Timing(5.0, 1.0, 20.0, 10), Timing(7.0, 1.0, 20.0, 10),
                Timing(1.0, 1.0, 1.0, 10)])  # fmt: skip
    calls: list[Timing] = []

    def measure() -> Timing:
        calls.append(next(seq))
        return calls[-1]

    assert steady(measure).median_ms == 5.0 and len(calls) == STEADY_ATTEMPTS == 3
    with pytest.raises(ValueError, match="attempts"):
        steady(measure, attempts=0)


def test_the_gpus_head_start_covers_the_hosts_launches() -> None:
    """50 us a repetition for a cheap launch; a launch path dearer than that gets its own host time
    plus the flush's and the events' per repetition; capped."""
    from autocutlass.search.timing import HOST_SLACK_MS, MAX_SLEEP_MS, head_start_ms

    assert head_start_ms(100, 0.01) == pytest.approx(5.0)  # 100 x 50 us
    assert head_start_ms(100, 0.2) == pytest.approx(100 * (0.2 + HOST_SLACK_MS))
    assert head_start_ms(200, 5.0) == MAX_SLEEP_MS


def test_timing_host_time_round_trips_and_divides_per_call() -> None:
    from autocutlass.search.handlers import per_call
    from autocutlass.search.timing import host_summary

    t = Timing(1.0, 0.9, 1.1, 10, 0.02)
    assert Timing.from_dict(t.as_dict()) == t and Timing.from_dict(Timing(1.0, 0.9, 1.1, 10).as_dict()).host_ms is None
    assert host_summary([0.5, 0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx(0.02)  # the 20th percentile
    assert host_summary([]) is None

    class Twice:
        calls_per_run = 2

    assert per_call(t, Twice()) == Timing(0.5, 0.45, 0.55, 10, 0.01)


def test_handler_finals_drop_failing_configs(fake_gpu: dict[str, Any]) -> None:
    fake_gpu["ms"] = {"a": 1.0, "b": 0.9, "c": 0.8, "d": 0.7, "torch": 2.0}
    fake_gpu["bad_verify"] = {"b"}
    fake_gpu["no_compile"] = {"c"}
    fake_gpu["bad_after"] = {"d"}
    reply = fake_gpu["handler"]._final(final_request(["a", "b", "c", "d"], rounds=2))
    a, b, c, d = reply["entries"]
    assert a["state"] == "ok" and len(a["round_ms"]) == 2
    assert (b["state"], b["reason"], b["timing"]) == ("wrong_result", "bad", None)
    assert (c["state"], c["reason"], c["timing"]) == ("compile_error", "fake DSL error", None)
    assert (d["state"], d["timing"], d["round_ms"]) == ("wrong_result", None, [])
    assert d["reason"].startswith("after timing: ")
    # d was timed once (round one) and then dropped; b and c never timed
    assert fake_gpu["log"] == ["a", "d", "torch", "torch", "a"]
    assert reply["torch"]["timing"] is not None


def test_handler_finals_poison_d_so_a_runner_cannot_pass_on_what_another_wrote(fake_gpu: dict[str, Any]) -> None:
    fake_gpu["ms"] = {"a": 1.0, "lazy": 0.5, "torch": 2.0}
    fake_gpu["no_write"] = {"lazy"}
    reply = fake_gpu["handler"]._final(final_request(["a", "lazy"], rounds=2))
    a, lazy = reply["entries"]
    assert a["state"] == "ok" and lazy["state"] == "wrong_result" and lazy["timing"] is None
    assert fake_gpu["log"] == ["a", "lazy", "torch", "torch", "a"]


def test_handler_finals_fault_is_a_crash_that_exits(fake_gpu: dict[str, Any]) -> None:
    fake_gpu["ms"] = {"a": 1.0, "b": 0.9, "torch": 2.0}
    fake_gpu["fault"] = "b"
    reply = fake_gpu["handler"]._final(final_request(["a", "b"], rounds=2))
    assert reply["state"] == "crash" and reply["exit"] is True and "illegal address" in reply["reason"]
    assert reply["entries"] is None


# ---- the pipeline's finals over real worker processes ---------------------------------------------
def fake_pipeline(**kw: Any) -> CandidatePipeline:
    return CandidatePipeline("fake", compile_handler="_search_fakes:make_fake_compile_handler",
                             bench_handler="_search_fakes:make_fake_bench_handler", **kw)  # fmt: skip


def test_pipeline_finals_round_trip() -> None:
    configs = [{"tile": 16, "mode": "a"}, {"tile": 8, "mode": "wrong"}, {"tile": 4, "mode": "b"}]
    with fake_pipeline(compile_workers=1) as pipe:
        out = pipe.finals(P, configs, rounds=3)
    assert isinstance(out, FinalsOutcome) and out.rounds == 3
    assert [e.params for e in out.entries] == configs
    assert [e.key for e in out.entries] == [config_key(c) for c in configs]
    assert [e.state for e in out.entries] == ["ok", "wrong_result", "ok"]
    assert out.entries[0].timing is not None and out.entries[0].timing.median_ms == pytest.approx(1.016)
    assert out.entries[1].timing is None and out.entries[1].reason == "relative error 1.0"
    assert out.torch is not None and out.torch.median_ms == 2.0


def test_pipeline_finals_return_none_on_a_fault_or_a_hang_and_the_pipeline_serves_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workers, "FINALS_TIMEOUT_S", 1.0)
    monkeypatch.setattr(workers, "FINALS_TIMEOUT_PER_TIMING_S", 0.1)
    with fake_pipeline(compile_workers=1) as pipe:
        assert pipe.baseline(P).state == "ok"  # started and ready: the finals' timeout is theirs alone
        assert pipe.finals(P, [{"tile": 1, "mode": "a"}, {"tile": 2, "mode": "fault"}], rounds=2) is None
        t0 = time.monotonic()
        assert pipe.finals(P, [{"tile": 1, "mode": "a"}, {"tile": 2, "mode": "hang"}], rounds=2) is None
        assert time.monotonic() - t0 < 10
        assert pipe.finals(P, [{"tile": 1, "mode": "crash"}], rounds=1) is None
        assert pipe.baseline(P).state == "ok"
        ok = pipe.finals(P, [{"tile": 1, "mode": "a"}], rounds=1)
        assert ok is not None and ok.entries[0].state == "ok"


def test_pipeline_finals_need_an_idle_pipeline() -> None:
    with fake_pipeline(compile_workers=1) as pipe:
        pipe.submit(P, config_key({"tile": 1, "mode": "a"}), {"tile": 1, "mode": "a"})
        with pytest.raises(RuntimeError, match="idle"):
            pipe.finals(P, [{"tile": 1, "mode": "a"}], rounds=1)
        while pipe.in_flight:
            pipe.poll(1.0)
        with pytest.raises(ValueError, match="at least one round"):
            pipe.finals(P, [{"tile": 1, "mode": "a"}], rounds=0)


def test_tune_problem_runs_the_finals_over_real_worker_processes() -> None:
    fam = FakeFamily(tiles=(16, 32, 64), stages=(1,), modes=("a", "b"), seeds=[])
    with fake_pipeline(compile_workers=1) as pipe:
        r = tune_problem(P, fam, MemorySink(), exhaustive=True, evaluator=pipe)
    assert r.stop_reason == f"space exhausted; finals: {FINALISTS} configs x {FINAL_ROUNDS} rounds"
    assert len(r.finals) == FINALISTS and r.best is not None and r.best.config["tile"] == 16
    assert r.best.timing is not None and r.torch is not None and r.vs_torch == pytest.approx(2.0 / 1.016)


def test_tuner_constants() -> None:
    assert (tuner.FINALISTS, tuner.FINAL_ROUNDS, tuner.FINALS_TIE_REL) == (4, 5, 0.005)


def test_an_earlier_trial_that_fails_a_tightened_check_cannot_win() -> None:
    """A resumed tuning's pool holds the earlier runs' trials; one whose config ``check`` rejects
    now (a rule tightened since: checks are not hashed, the hard key stays) is kept out of the
    polish's incumbent and of the winner's choice, though it is the fastest."""
    sink = MemorySink()
    search = table({config_key(cfg(128, 2)): 0.5, config_key(cfg(32)): 1.0}, default=2.0)
    tune_problem(P, family(), sink, exhaustive=True, evaluator=FakeEvaluator(search, torch_ms=3.0), hard_key=HARD_KEY)
    assert sink.best[P.key()][0] == cfg(128, 2)
    tight = FakeFamily(tiles=(16, 32, 64, 128), stages=(1, 2), modes=("a",), smem=128, seeds=[FakeConfig(16, 1)])
    r = tune_problem(P, tight, sink, exhaustive=True, evaluator=FakeEvaluator(search, torch_ms=3.0), hard_key=HARD_KEY)
    assert r.best is not None and r.best.config == cfg(32)
    assert sink.best[P.key()][0] == cfg(32)
