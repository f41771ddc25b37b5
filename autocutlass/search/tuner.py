"""Tune one problem: propose candidates, evaluate them out of process, record every trial, pick a winner.

``tune_problem(problem, family, sink, ...)`` is the whole loop:

1. ``SearchSpace`` enumerates the family's space and runs ``check`` on each config; rejected
   configs never reach a worker and never cost budget (their reasons are counted).
2. ``make_strategy`` picks a grid (small space, or ``exhaustive``) or TPE seeded with the
   caller's ``seeds`` (priors from the database), then ``family.seeds``. With ``resume``, configs the sink already holds a trial of
   (``finished_config_keys``) are skipped, and earlier timings are fed to TPE.
3. Candidates go to the evaluator (``workers.CandidatePipeline`` by default: compile children,
   then a benchmark child that verifies and times). The pipeline is kept full; each outcome is
   recorded with ``sink.record_trial`` as soon as it arrives.
4. Stops on the trial budget (candidates evaluated in this run), the seconds budget (no new
   submissions after it; in-flight ones finish), exhaustion, or early stop: ``patience``
   outcomes in a row without an improvement beyond the timing noise.
5. Polish (hill climbing), unless the search was exhaustive or stopped on exhaustion or on a
   budget the caller gave: from the incumbent (the fastest ok trial of this run, and with
   ``resume`` of the sink's earlier ones), every feasible *neighbour* (a config that differs in
   exactly one field of ``family.config_to_dict``) not evaluated yet is evaluated and recorded
   like any trial; if one beats the incumbent (``timing.beats``), the fastest such becomes the
   incumbent and its neighbours follow. It stops at a round without such an improvement, after
   ``POLISH_MAX_TRIALS``, or on the caller's ``trials``/``seconds`` budget (polish trials count
   against it; with the default budget they come on top of it).
6. torch is timed on the same inputs before and after the search (the faster counts, unless
   the finals time it).
7. Finals: the pool is every ok trial (this run's, and with ``resume`` the sink's earlier ones of
   the same hard key and family that are in the space). Its ``FINALISTS`` fastest distinct
   configs, when there are at least two, are timed again head to head with torch
   (``Evaluator.finals``: ``FINAL_ROUNDS`` rounds, the order reversed every other round). One
   timing per candidate cannot rank near-equal configs: the per-call spread of a large GEMM is
   3-7% on an H200, and a single window also catches a different clock (the GPU is power-limited)
   than the next candidate's. The finals do not count as trials and come on top of every budget.
8. The winner: with finals, the fastest finals median, unless a simpler config
   (``family.simplicity``) is within ``FINALS_TIE_REL`` of it; a finalist that failed in the
   finals cannot win. Without finals (one ok config, or the finals failed or are not supported by
   the evaluator): ``select_winner`` over the pool, the fastest unless a simpler config is within
   the noise of it (``timing.beats``). ``sink.record_best`` stores the winner with its finals
   timing when it has one (and the id of its trial, whose recorded timing is the search's).
9. Beside the winner, torch's time (the finals', else the faster of step 6) is recorded as a best of
   the pseudo-family ``vendor.VENDOR_FAMILY`` under the vendor hard key: dispatch lets torch serve
   the problem where it beat our winner (``autocutlass.vendor``); with it, torch's time in each of
   the op's ``baseline_variants`` the finals timed (conv2d: cuDNN outside benchmark mode), as the
   vendor record of that variant.

The sink is a ``TrialSink``: ``autocutlass.db.TuningStore`` satisfies it (search/ does not
import db/).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol, TypeVar

from autocutlass.device import DeviceInfo, HardKey
from autocutlass.errors import UnsupportedProblem
from autocutlass.kernels.base import KernelFamily
from autocutlass.keys import config_key
from autocutlass.ops.base import OpProblem
from autocutlass.search.space import ABSENT, Candidate, SearchSpace
from autocutlass.search.strategy import Strategy, make_strategy
from autocutlass.search.timing import Timing, beats
from autocutlass.search.workers import OK, CandidatePipeline, EvalOutcome, FinalsOutcome
from autocutlass.vendor import MAIN_VARIANT, VENDOR_FAMILY, host_config, vendor_hard_key

log = logging.getLogger("autocutlass")

C = TypeVar("C")

GRID_MAX = 64
"""A remaining feasible space of at most this many candidates is searched as a grid."""
DEFAULT_TRIALS = 64
"""Trial budget when neither ``trials`` nor ``seconds`` is given."""
DEFAULT_PATIENCE = 24
"""Outcomes in a row without a significant improvement before the search stops early."""
POLISH_MAX_TRIALS = 48
"""Most candidates the polish (hill climbing after the main search, step 5 of the module doc)
evaluates in one run. TPE with early stop can end one or two single-field moves short of a
better config; each move costs a round (the incumbent's unevaluated feasible neighbours: about
15-22 in the hopper_gemm space), so the cap covers about three rounds: two moves and the round
that finds nothing better."""
FINALISTS = 4
"""Configs in the finals (step 7 of the module doc): the pool's fastest distinct ones. In the
shipped H200 database (14 problems) at most four ok trials of a problem are within 1% of its
fastest, the band where one timing cannot rank them."""
FINAL_ROUNDS = 5
"""Rounds of the finals; each participant (the finalists and torch) is timed once per round."""
FINALS_TIE_REL = 0.005
"""A simpler config wins the finals only when its finals median is within this fraction of the
fastest's. Half the search's 1% noise floor: the rounds spread clock and power drift over every
finalist alike, which the search's one window per candidate could not, and the 1% floor handed
ties to 1x1 clusters that are measurably slower in a sustained run."""
POLL_S = 1.0

# why the main search stopped (``_Tuning.stopped_by``)
_TRIAL_BUDGET = "trial budget"
_TIME_BUDGET = "time budget"
_STOPPED = "stopped"
_EXHAUSTED = "space exhausted"
_EARLY_STOP = "early stop"
# why the polish stopped, besides the budgets above
_LOCAL_OPTIMUM = "local optimum"
_POLISH_CAP = "cap"


# ---- interfaces ---------------------------------------------------------------------------------
class PriorTrial(Protocol):
    """A trial recorded earlier, as the sink returns it (``autocutlass.db.TrialRecord``)."""

    @property
    def id(self) -> int: ...
    @property
    def family(self) -> str: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def config_key(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def median_ms(self) -> float | None: ...
    @property
    def p20_ms(self) -> float | None: ...
    @property
    def p80_ms(self) -> float | None: ...


class TrialSink(Protocol):
    """Where trials and winners go; the signatures of ``autocutlass.db.TuningStore``.

    ``record_trial`` is called once per evaluated candidate, as it finishes, with ``state`` one
    of the plain strings of ``workers.STATES``; it returns the trial's id. ``record_best``
    replaces the best of (problem, hard key). ``finished_config_keys`` and ``trials`` serve
    resuming: keys are ``space.config_key`` of the config dict.
    """

    def record_trial(
        self,
        problem: OpProblem,
        hard_key: HardKey,
        family: str,
        config: Mapping[str, Any],
        state: str,
        reason: str | None = None,
        median_ms: float | None = None,
        p20_ms: float | None = None,
        p80_ms: float | None = None,
        tflops: float | None = None,
    ) -> int: ...

    def record_best(
        self,
        problem: OpProblem,
        hard_key: HardKey,
        family: str,
        config: Mapping[str, Any],
        median_ms: float,
        tflops: float,
        trial_id: int | None = None,
    ) -> None: ...

    def finished_config_keys(self, problem: OpProblem, hard_key: HardKey, family: str) -> set[str]: ...

    def trials(self, problem: OpProblem | None = None, hard_key: HardKey | None = None) -> Sequence[PriorTrial]: ...


class Evaluator(Protocol):
    """Evaluates candidates asynchronously; ``workers.CandidatePipeline`` is the real one."""

    @property
    def capacity(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    def submit(self, problem: OpProblem, key: str, params: dict[str, Any]) -> None: ...
    def poll(self, timeout_s: float) -> list[EvalOutcome]: ...
    def baseline(self, problem: OpProblem) -> EvalOutcome: ...
    def finals(self, problem: OpProblem, configs: list[dict[str, Any]], rounds: int) -> FinalsOutcome | None:
        """Time ``configs`` and torch head to head (only when nothing is in flight); None when the
        finals did not finish. Optional: the tuner falls back to ``select_winner`` without it."""
        ...

    def device(self) -> dict[str, Any]: ...


# ---- results ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrialResult:
    """One evaluated candidate as the tuner saw it (this run's, or an earlier one's with ``earlier``)."""

    key: str
    config: dict[str, Any]
    state: str
    reason: str | None
    timing: Timing | None
    trial_id: int | None
    earlier: bool = False

    @property
    def ok(self) -> bool:
        return self.state == OK and self.timing is not None


@dataclass(frozen=True)
class TuneProgress:
    """Passed to the ``progress`` callback after every outcome."""

    problem: OpProblem
    evaluated: int
    planned: int | None
    """Candidates this run will evaluate at most (trial budget or remaining feasible space)."""
    elapsed_s: float
    last: TrialResult
    best: TrialResult | None
    polishing: bool = False
    """True for outcomes of the polish (hill climbing after the main search)."""


@dataclass(frozen=True)
class TuneResult:
    """What one ``tune_problem`` call did and found.

    ``evaluated`` counts every candidate this run evaluated, ``polished`` of them in the polish.
    ``stop_reason`` says why the main search stopped; when the polish ran, it goes on with
    ``"; polish: N trials, M moves, <why it stopped>"``, and when finals were due with
    ``"; finals: N configs x R rounds"`` (or why they did not decide). ``finals`` holds the
    finalists that finished the finals, with their finals timings, in finals order (fastest by the
    search first); empty when no finals ran. With finals, ``best`` and ``runner_up`` carry their
    finals timings and ``torch`` is torch's timing in the same rounds.
    """

    problem: OpProblem
    family: str
    hard_key: HardKey
    strategy: str
    best: TrialResult | None
    runner_up: TrialResult | None
    torch: Timing | None
    evaluated: int
    states: Counter[str]
    rejections: Counter[str]
    space_size: int
    feasible: int
    skipped: int
    stop_reason: str
    wall_s: float
    device: dict[str, Any] | None = None
    failures: tuple[TrialResult, ...] = field(default_factory=tuple)
    polished: int = 0
    finals: tuple[tuple[dict[str, Any], Timing], ...] = field(default_factory=tuple)

    @property
    def best_config(self) -> dict[str, Any] | None:
        """The winner's config dict (``family.config_from_dict`` turns it back), or None."""
        return dict(self.best.config) if self.best is not None else None

    @property
    def best_tflops(self) -> float | None:
        return self.best.timing.tflops(self.problem.flops) if self.best and self.best.timing else None

    @property
    def torch_tflops(self) -> float | None:
        return self.torch.tflops(self.problem.flops) if self.torch else None

    @property
    def vs_torch(self) -> float | None:
        """torch time / our time (> 1: faster than torch), both measured in this run's process."""
        if self.best is None or self.best.timing is None or self.torch is None:
            return None
        return self.torch.median_ms / self.best.timing.median_ms


# ---- winner selection ---------------------------------------------------------------------------
def select_winner(
    results: Sequence[TrialResult], simplicity: Callable[[dict[str, Any]], tuple[int, ...]]
) -> tuple[TrialResult | None, TrialResult | None]:
    """(winner, runner-up) among the ok results, by their search timings.

    The winner is the simplest config (then the fastest) among those the fastest one does not
    *beat* (``timing.beats``: faster by more than the noise), so a config must beat a simpler one
    by more than the noise to win. The runner-up is the fastest of the others. The tuner uses it
    for progress reports and when no finals decide (``select_finals_winner``).
    """
    ok = sorted((r for r in results if r.ok), key=lambda r: (r.timing.median_ms, simplicity(r.config)))  # type: ignore[union-attr]
    if not ok:
        return None, None
    fastest = ok[0]
    assert fastest.timing is not None
    tied = [r for r in ok if r.timing is not None and not beats(fastest.timing, r.timing)]
    winner = min(tied, key=lambda r: (simplicity(r.config), r.timing.median_ms))  # type: ignore[union-attr]
    others = [r for r in ok if r.key != winner.key]
    return winner, (others[0] if others else None)


def finalists(
    results: Sequence[TrialResult], simplicity: Callable[[dict[str, Any]], tuple[int, ...]], n: int = FINALISTS
) -> list[TrialResult]:
    """The ``n`` fastest distinct ok configs of ``results`` (each by its fastest trial), fastest
    first; a config timed in two runs is one finalist, not two seats."""
    ok = sorted((r for r in results if r.ok), key=lambda r: (r.timing.median_ms, simplicity(r.config)))  # type: ignore[union-attr]
    by_key: dict[str, TrialResult] = {}
    for r in ok:
        by_key.setdefault(r.key, r)
    return list(by_key.values())[:n]


def select_finals_winner(
    timed: Sequence[tuple[TrialResult, Timing]],
    simplicity: Callable[[dict[str, Any]], tuple[int, ...]],
    tie_rel: float = FINALS_TIE_REL,
) -> tuple[TrialResult | None, TrialResult | None]:
    """(winner, runner-up) of the finals, each with its finals timing.

    The winner is the fastest finals median, unless simpler configs are within ``tie_rel`` of it;
    then the simplest of those (then the fastest). The runner-up is the fastest of the others.
    """
    ranked = sorted((replace(r, timing=t) for r, t in timed), key=lambda r: (r.timing.median_ms, simplicity(r.config)))  # type: ignore[union-attr]
    if not ranked:
        return None, None
    limit = ranked[0].timing.median_ms * (1.0 + tie_rel)  # type: ignore[union-attr]
    tied = [r for r in ranked if r.timing.median_ms <= limit]  # type: ignore[union-attr]
    winner = min(tied, key=lambda r: (simplicity(r.config), r.timing.median_ms))  # type: ignore[union-attr]
    others = [r for r in ranked if r.key != winner.key]
    return winner, (others[0] if others else None)


@dataclass(frozen=True)
class _Finals:
    """What the finals of one tuning gave: the finalists that finished with their finals timings,
    the keys of those that failed, torch's finals timing, and the note for ``stop_reason``."""

    timed: tuple[tuple[TrialResult, Timing], ...] = ()
    failed: frozenset[str] = frozenset()
    torch: Timing | None = None
    note: str = ""
    torch_variants: Mapping[str, Timing] = field(default_factory=dict)


def record_vendor(sink: TrialSink, problem: OpProblem, hard_key: HardKey, versions: tuple[str, str],
                  torch_timing: Timing, ours: Timing, variants: Mapping[str, Timing] | None = None) -> None:  # fmt: skip
    """torch's time as the vendor record of ``problem`` beside our record under ``hard_key``
    (``versions``: torch's and CUDA's), its config the host time of one call of torch's path and
    of ours where both were measured (``vendor.host_config``); and the time of each of torch's
    ``variants`` (``vendor``: variants) as the vendor record of that variant. The tuner's step 9,
    and ``autocutlass tune --verdicts``."""
    for variant, timing in {MAIN_VARIANT: torch_timing, **(variants or {})}.items():
        sink.record_best(problem, vendor_hard_key(hard_key, *versions, variant), VENDOR_FAMILY,
                         host_config(timing.host_ms, ours.host_ms), timing.median_ms,
                         timing.tflops(problem.flops))  # fmt: skip


# ---- the loop -----------------------------------------------------------------------------------
def _prior_results(sink: TrialSink, problem: OpProblem, hard_key: HardKey, family: str) -> list[TrialResult]:
    out = []
    for t in sink.trials(problem, hard_key):
        if t.family != family:
            continue
        timing = None
        if t.state == OK and t.median_ms is not None:
            p20 = t.p20_ms if t.p20_ms is not None else t.median_ms
            p80 = t.p80_ms if t.p80_ms is not None else t.median_ms
            timing = Timing(t.median_ms, p20, p80, 0)
        out.append(TrialResult(t.config_key, dict(t.config), str(t.state), None, timing, t.id, earlier=True))
    return out


def _typed(family: KernelFamily[C], seeds: Sequence[Mapping[str, Any]]) -> list[C]:
    """The typed configs of ``seeds``; a dict the family cannot read (a record of older sources
    with other fields) is left out and logged at debug level."""
    out = []
    for d in seeds:
        try:
            out.append(family.config_from_dict(dict(d)))
        except (KeyError, TypeError, ValueError) as e:
            log.debug("autocutlass: seed %s left out: %s: %s", d, type(e).__name__, e)
    return out


def differs_in_one_field(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when exactly one field differs between two config dicts, a field one of them leaves
    out counting as one more value (``search.space.ABSENT``: a serial config and its workspace
    twin, which names ``split_mode``, are neighbours)."""
    return sum(1 for name in a.keys() | b.keys() if a.get(name, ABSENT) != b.get(name, ABSENT)) == 1


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _faster(a: Timing | None, b: Timing | None) -> Timing | None:
    if a is None or b is None:
        return a or b
    return a if a.median_ms <= b.median_ms else b


def tune_problem(
    problem: OpProblem,
    family: KernelFamily[C],
    sink: TrialSink,
    *,
    trials: int | None = None,
    seconds: float | None = None,
    exhaustive: bool = False,
    resume: bool = True,
    progress: Callable[[TuneProgress], None] | None = None,
    evaluator: Evaluator | None = None,
    hard_key: HardKey | None = None,
    patience: int | None = None,
    seed: int = 0,
    compile_workers: int | None = None,
    device_index: int = 0,
    seeds: Sequence[Mapping[str, Any]] = (),
    stop: threading.Event | None = None,
) -> TuneResult:
    """Tune ``problem`` for ``family`` and record trials and the winner in ``sink``.

    Budgets: ``trials`` (candidates evaluated in this run, polish included) and/or ``seconds``
    (wall clock); with neither, ``DEFAULT_TRIALS`` for the main search and up to
    ``POLISH_MAX_TRIALS`` more for the polish; ``exhaustive`` evaluates every remaining feasible
    candidate (a grid, no early stop, no polish; ``trials``/``seconds`` still apply if given).
    ``patience``: early-stop window (default ``DEFAULT_PATIENCE``). ``evaluator``: defaults to a
    ``CandidatePipeline`` on CUDA device ``device_index``, closed on return); ``hard_key``:
    defaults to the evaluator's device. ``seeds``: config dicts evaluated first, before the
    family's own seeds (priors from the database: winners of nearby tuned problems, a sibling
    GPU's record); repeats, configs outside the space and infeasible ones are dropped.
    ``stop``: when set (interpreter exit, a cancelled background tuning), the run submits nothing
    more, abandons what is in flight, records no further trial and no best, and returns at once
    (``stop_reason`` "stopped", ``best`` None); its own pipeline is killed, and an injected
    evaluator is left with work in flight for the caller to reset. Raises ``UnsupportedProblem``
    when no config of the family can serve the problem.
    """
    why = family.supports(problem)
    if why is not None:
        raise UnsupportedProblem(f"{family.name} cannot serve {problem.describe()}: {why}")
    if evaluator is None:
        with CandidatePipeline(family.name, compile_workers=compile_workers, device_index=device_index,
                               cancel=stop) as pipeline:  # fmt: skip
            result = tune_problem(
                problem, family, sink, trials=trials, seconds=seconds, exhaustive=exhaustive, resume=resume,
                progress=progress, evaluator=pipeline, hard_key=hard_key, patience=patience, seed=seed,
                seeds=seeds, stop=stop,
            )  # fmt: skip
            if stop is not None and stop.is_set():
                pipeline.kill()  # abandoned work: no graceful wait for children in the middle of a request
            return result
    return _Tuning(problem, family, sink, evaluator, hard_key, trials=trials, seconds=seconds, exhaustive=exhaustive,
                   resume=resume, progress=progress, patience=patience, seed=seed, seeds=seeds, stop=stop).run()


class _Tuning:
    """The state of one ``tune_problem`` call (private; one object per call, used once)."""

    def __init__(
        self,
        problem: OpProblem,
        family: KernelFamily[Any],
        sink: TrialSink,
        evaluator: Evaluator,
        hard_key: HardKey | None,
        *,
        trials: int | None,
        seconds: float | None,
        exhaustive: bool,
        resume: bool,
        progress: Callable[[TuneProgress], None] | None,
        patience: int | None,
        seed: int,
        seeds: Sequence[Mapping[str, Any]] = (),
        stop: threading.Event | None = None,
    ) -> None:
        self.t0 = time.monotonic()
        self.stop = stop
        self.problem = problem
        self.family = family
        self.sink = sink
        self.evaluator = evaluator
        self.device: dict[str, Any] | None = None
        if hard_key is None:
            self.device = evaluator.device()
            hard_key = DeviceInfo(**self.device["device"]).hard_key(family.source_hash())
        self.hard_key = hard_key
        self.default_budget = trials is None and seconds is None and not exhaustive
        self.trials = DEFAULT_TRIALS if self.default_budget else trials
        self.seconds = seconds
        self.exhaustive = exhaustive
        self.resume = resume
        self.progress = progress
        self.patience = None if exhaustive else (DEFAULT_PATIENCE if patience is None else patience)
        self.space: SearchSpace[Any] = SearchSpace(family, problem)
        self.finished = sink.finished_config_keys(problem, hard_key, family.name) if resume else set()
        self.prior = _prior_results(sink, problem, hard_key, family.name) if resume else []
        self.strategy: Strategy[Any] = make_strategy(
            self.space, [*_typed(family, seeds), *family.seeds(problem)], skip=self.finished, budget_trials=self.trials,
            exhaustive=exhaustive, grid_max=GRID_MAX, seed=seed,
        )  # fmt: skip
        for r in self.prior:
            cand = self.space.get(r.key)
            if cand is not None and self.space.rejection(cand.key) is None:
                self.strategy.add_prior(cand, r.timing.median_ms if r.ok and r.timing else None)
        remaining = sum(1 for c in self.space.feasible if c.key not in self.finished)
        self.planned = remaining if self.trials is None else min(self.trials, remaining)
        self.pending: dict[str, Candidate[Any]] = {}
        self.results: list[TrialResult] = []
        self.submitted = 0
        self.since_improvement = 0
        prior_ok = [r.timing for r in self.prior if r.ok and r.timing is not None]
        self.best_timing: Timing | None = min(prior_ok, key=lambda t: t.median_ms) if prior_ok else None
        self.stop_reason: str | None = None
        self.stopped_by: str | None = None
        self.polishing = False
        self.polished = 0
        self.polish_stop: str | None = None

    def _stopped(self) -> bool:
        """The caller's stop event is set: record nothing more, return at once."""
        return self.stop is not None and self.stop.is_set()

    def _stop(self, cause: str, reason: str | None = None) -> None:
        self.stopped_by = cause
        self.stop_reason = reason or cause

    def _simplicity(self, config: dict[str, Any]) -> tuple[int, ...]:
        return tuple(self.family.simplicity(self.family.config_from_dict(config)))

    def _elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _submit(self, cand: Candidate[Any]) -> None:
        self.pending[cand.key] = cand
        self.evaluator.submit(self.problem, cand.key, dict(cand.params))
        self.submitted += 1

    def _evaluate_until_idle(self, fill: Callable[[], None]) -> list[TrialResult]:
        """Keep the evaluator filled by ``fill`` and record outcomes until nothing is in flight;
        the results recorded meanwhile."""
        start = len(self.results)
        while True:
            fill()
            if self.evaluator.in_flight == 0 or self._stopped():
                return self.results[start:]
            for outcome in self.evaluator.poll(POLL_S):
                if self._stopped():  # e.g. a child killed at exit: not a result to record
                    return self.results[start:]
                self._record(outcome)

    def _fill(self) -> None:
        """Main search: submit the strategy's proposals until a budget, exhaustion or early stop."""
        while self.stop_reason is None and self.evaluator.in_flight < self.evaluator.capacity:
            if self._stopped():
                self._stop(_STOPPED)
                return
            if self.trials is not None and self.submitted >= self.trials:
                self._stop(_TRIAL_BUDGET)
                return
            if self.seconds is not None and self._elapsed() >= self.seconds:
                self._stop(_TIME_BUDGET)
                return
            cand = self.strategy.propose()
            if cand is None:
                self._stop(_EXHAUSTED)
                return
            self._submit(cand)

    def _record(self, o: EvalOutcome) -> None:
        cand = self.pending.pop(o.key)
        t = o.timing if o.state == OK else None
        trial_id = self.sink.record_trial(
            self.problem, self.hard_key, self.family.name, cand.params, o.state, o.reason,
            median_ms=t.median_ms if t else None, p20_ms=t.p20_ms if t else None, p80_ms=t.p80_ms if t else None,
            tflops=t.tflops(self.problem.flops) if t else None,
        )  # fmt: skip
        result = TrialResult(o.key, dict(cand.params), o.state, o.reason, t, trial_id)
        self.results.append(result)
        if not self.polishing:  # the strategy proposed it and waits for its outcome
            self.strategy.observe(cand, t.median_ms if t else None)
        if t is not None and (self.best_timing is None or beats(t, self.best_timing)):
            self.best_timing = t
            self.since_improvement = 0
        else:
            if t is not None and t.median_ms < self.best_timing.median_ms:  # type: ignore[union-attr]
                self.best_timing = t  # faster, but within the noise: not an improvement
            self.since_improvement += 1
        if self.progress is not None:
            best, _ = select_winner(self.results, self._simplicity)
            self.progress(TuneProgress(self.problem, len(self.results), self.planned, self._elapsed(), result, best,
                                       polishing=self.polishing))  # fmt: skip
        if self.patience is not None and self.since_improvement >= self.patience and self.stop_reason is None:
            self._stop(_EARLY_STOP, f"no improvement in {self.patience} trials")

    # ---- polish -----------------------------------------------------------------------------
    def _should_polish(self) -> bool:
        """After an early stop, or after the default trial budget; not after exhaustion, an
        exhaustive search, or a budget the caller gave."""
        if self.exhaustive:
            return False
        if self.stopped_by == _TRIAL_BUDGET:
            return self.default_budget
        return self.stopped_by == _EARLY_STOP

    def _incumbent(self) -> TrialResult | None:
        """The fastest ok trial of this run (and, with ``resume``, of the earlier ones) in the space."""
        pool = [r for r in (*self.prior, *self.results) if r.ok and self._feasible(r.key)]
        return min(pool, key=lambda r: (r.timing.median_ms, self._simplicity(r.config)), default=None)  # type: ignore[union-attr]

    def _feasible(self, key: str) -> bool:
        """Whether ``key`` is a config of the space that ``check`` accepts now (a trial recorded
        earlier may fail a rule tightened since: the checks are not part of the source hash)."""
        return self.space.get(key) is not None and self.space.rejection(key) is None

    def _new_neighbours(self, incumbent: TrialResult) -> list[Candidate[Any]]:
        """Feasible candidates one field away from ``incumbent``, not evaluated in this run nor
        (with ``resume``) finished earlier; in the space's order."""
        base = self.space.get(incumbent.key)
        assert base is not None
        done = self.finished | {r.key for r in self.results}
        return [c for c in self.space.feasible if c.key not in done and differs_in_one_field(c.params, base.params)]

    def _polish_allowance(self) -> int:
        """Polish trials still allowed by the cap and by the caller's trial budget."""
        left = POLISH_MAX_TRIALS - self.polished
        if not self.default_budget and self.trials is not None:
            left = min(left, self.trials - self.submitted)
        return max(left, 0)

    def _fill_polish(self, queue: deque[Candidate[Any]]) -> None:
        """Submit the round's neighbours until the queue is empty or a polish limit is reached."""
        while queue and self.polish_stop is None and self.evaluator.in_flight < self.evaluator.capacity:
            if self._stopped():
                self.polish_stop = _STOPPED
            elif self.polished >= POLISH_MAX_TRIALS:
                self.polish_stop = _POLISH_CAP
            elif self._polish_allowance() == 0:
                self.polish_stop = _TRIAL_BUDGET
            elif self.seconds is not None and self._elapsed() >= self.seconds:
                self.polish_stop = _TIME_BUDGET
            else:
                self._submit(queue.popleft())
                self.polished += 1

    def _polish(self) -> int:
        """Hill climbing from the incumbent (step 5 of the module doc); the number of moves."""
        incumbent = self._incumbent()
        self.polishing = True
        moves = 0
        while incumbent is not None and incumbent.timing is not None:
            queue = deque(self._new_neighbours(incumbent))
            self.planned = self.submitted + min(len(queue), self._polish_allowance())
            round_results = self._evaluate_until_idle(partial(self._fill_polish, queue))
            better = [r for r in round_results if r.ok and r.timing is not None and beats(r.timing, incumbent.timing)]
            if better:
                incumbent = min(better, key=lambda r: (r.timing.median_ms, self._simplicity(r.config)))  # type: ignore[union-attr]
                moves += 1
            if self.polish_stop is not None:
                break
            if not better:
                self.polish_stop = _LOCAL_OPTIMUM
        return moves

    # ---- finals -----------------------------------------------------------------------------
    def _pool(self) -> list[TrialResult]:
        """The trials the winner is chosen from: this run's, and with ``resume`` the sink's earlier
        ones (read again: this run's are in the sink now) that are in the space."""
        pool = list(self.results)
        if self.resume:
            mine = {r.trial_id for r in self.results}
            pool += [r for r in _prior_results(self.sink, self.problem, self.hard_key, self.family.name)
                     if r.trial_id not in mine]  # fmt: skip
        return [r for r in pool if self._feasible(r.key)]

    def _finals(self, pool: Sequence[TrialResult]) -> _Finals:
        """Step 7 of the module doc: the pool's fastest distinct configs head to head."""
        contenders = finalists(pool, self._simplicity)
        if len(contenders) < 2:
            return _Finals()
        run = getattr(self.evaluator, "finals", None)
        if run is None:
            return _Finals(note="; finals: not supported by the evaluator")
        outcome: FinalsOutcome | None = run(self.problem, [dict(c.config) for c in contenders], FINAL_ROUNDS)
        if outcome is None:
            failed = self._failing_alone(contenders)
            return _Finals(failed=failed, note=f"; finals: did not finish; re-verified alone, {len(failed)} of "
                                               f"{len(contenders)} failed; the search timings decide")  # fmt: skip
        timed, failed = [], []
        for c, e in zip(contenders, outcome.entries, strict=True):
            if e.state == OK and e.timing is not None:
                timed.append((c, e.timing))
            else:
                failed.append(c.key)
                log.warning("finals: %s failed (%s): %s", c.config, e.state, e.reason)
        note = f"; finals: {len(contenders)} configs x {outcome.rounds} rounds"
        if failed:
            note += f" ({len(failed)} failed)"
        return _Finals(tuple(timed), frozenset(failed), outcome.torch, note, outcome.variants)

    def _failing_alone(self, contenders: Sequence[TrialResult]) -> frozenset[str]:
        """After finals that did not finish (a fault or a timeout of one of them, unknown which):
        each finalist verified and timed alone for one round; the keys of those that fail, kept out
        of the winner's choice. When every one fails alone, the cause is not theirs: none is
        blamed."""
        run = self.evaluator.finals  # type: ignore[attr-defined]
        failed = []
        for c in contenders:
            alone: FinalsOutcome | None = run(self.problem, [dict(c.config)], 1)
            if alone is None or not alone.entries or alone.entries[0].state != OK:
                failed.append(c.key)
                log.warning("finals: %s fails alone (%s)", c.config,
                            "did not finish" if alone is None or not alone.entries else alone.entries[0].reason)  # fmt: skip
        return frozenset() if len(failed) == len(contenders) else frozenset(failed)

    def _abandoned(self) -> TuneResult:
        """The result of a run stopped by the caller: its trials so far, no winner recorded."""
        return TuneResult(
            problem=self.problem, family=self.family.name, hard_key=self.hard_key, strategy=self.strategy.name,
            best=None, runner_up=None, torch=None, evaluated=len(self.results),
            states=Counter(r.state for r in self.results), rejections=self.strategy.rejections,
            space_size=len(self.space), feasible=len(self.space.feasible), skipped=len(self.finished),
            stop_reason=_STOPPED, wall_s=self._elapsed(), device=self.device,
            failures=tuple(r for r in self.results if not r.ok), polished=self.polished,
        )  # fmt: skip

    def _record_vendor(self, timing: Timing, ours: Timing, variants: Mapping[str, Timing]) -> None:
        """Step 9 of the module doc: torch's time as the vendor record of this problem; its config
        holds the host time of one call of torch's path and of our winner's when both were measured
        (``vendor.host_config``), which verdicts weigh."""
        if self.device is not None:
            d = self.device["device"]
            versions = (str(d.get("torch_version", "")), str(d.get("cuda_runtime_version", "")))
        else:
            import torch  # the tuning process has it (dispatch, the campaign worker)

            versions = (str(torch.__version__), str(torch.version.cuda))
        record_vendor(self.sink, self.problem, self.hard_key, versions, timing, ours, variants)

    def run(self) -> TuneResult:
        if self._stopped():
            return self._abandoned()
        before = self.evaluator.baseline(self.problem)
        self._evaluate_until_idle(self._fill)
        if self._stopped():
            return self._abandoned()
        stop_reason = self.stop_reason or "done"
        if self._should_polish() and self._incumbent() is not None:
            moves = self._polish()
            stop_reason += f"; polish: {_plural(self.polished, 'trial')}, {_plural(moves, 'move')}, {self.polish_stop}"
        if self._stopped():
            return self._abandoned()
        after = self.evaluator.baseline(self.problem)
        torch_timing = _faster(before.timing if before.state == OK else None, after.timing if after.state == OK else None)
        pool = self._pool()
        finals = self._finals(pool)
        if self._stopped():
            return self._abandoned()
        stop_reason += finals.note
        if finals.timed:
            winner, runner_up = select_finals_winner(finals.timed, self._simplicity)
        else:
            winner, runner_up = select_winner([r for r in pool if r.key not in finals.failed], self._simplicity)
        torch_timing = finals.torch or torch_timing
        if winner is not None and winner.timing is not None:
            self.sink.record_best(
                self.problem, self.hard_key, self.family.name, winner.config, winner.timing.median_ms,
                winner.timing.tflops(self.problem.flops), trial_id=winner.trial_id,
            )  # fmt: skip
            if torch_timing is not None:  # torch's variants only where the finals timed them
                self._record_vendor(torch_timing, winner.timing, finals.torch_variants if finals.torch else {})
        return TuneResult(
            problem=self.problem,
            family=self.family.name,
            hard_key=self.hard_key,
            strategy=self.strategy.name,
            best=winner,
            runner_up=runner_up,
            torch=torch_timing,
            evaluated=len(self.results),
            states=Counter(r.state for r in self.results),
            rejections=self.strategy.rejections,
            space_size=len(self.space),
            feasible=len(self.space.feasible),
            skipped=len(self.finished),
            stop_reason=stop_reason,
            wall_s=self._elapsed(),
            device=self.device,
            failures=tuple(r for r in self.results if not r.ok),
            polished=self.polished,
            finals=tuple((dict(r.config), t) for r, t in finals.timed),
        )


def result_row(result: TuneResult) -> dict[str, Any]:
    """A plain-data summary of a ``TuneResult`` (for JSON output and tables)."""
    best = result.best
    return {
        "problem": result.problem.describe(),
        "config": best.config if best else None,
        "tflops": result.best_tflops,
        "torch_tflops": result.torch_tflops,
        "vs_torch": result.vs_torch,
        "median_ms": best.timing.median_ms if best and best.timing else None,
        "trials": result.evaluated,
        "polished": result.polished,
        "states": dict(result.states),
        "finals": [{"config_key": config_key(c), "median_ms": t.median_ms} for c, t in result.finals],
        "strategy": result.strategy,
        "stop": result.stop_reason,
        "wall_s": result.wall_s,
    }


__all__ = [
    "DEFAULT_PATIENCE",
    "DEFAULT_TRIALS",
    "FINALISTS",
    "FINALS_TIE_REL",
    "FINAL_ROUNDS",
    "GRID_MAX",
    "POLISH_MAX_TRIALS",
    "Evaluator",
    "PriorTrial",
    "TrialResult",
    "TrialSink",
    "TuneProgress",
    "TuneResult",
    "differs_in_one_field",
    "finalists",
    "record_vendor",
    "result_row",
    "select_finals_winner",
    "select_winner",
    "tune_problem",
]
