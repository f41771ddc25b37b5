"""Which candidate to evaluate next: a grid over the feasible space, or Optuna's TPE.

Both strategies hand out only *feasible*, *new* candidates: a configuration that ``check``
rejects, that is not in the space, or that was already evaluated (in this run or, when
resuming, in an earlier one) is never proposed, and proposing it costs no budget. TPE is
told about rejected samples (as infeasible trials, through Optuna's per-trial constraints) so
that it learns to avoid those regions.

* ``GridStrategy``: the family's seeds first, then every other feasible candidate in an order
  shuffled by ``seed`` (so a seconds budget covers the space evenly, reproducibly).
* ``TpeStrategy``: Optuna TPE (multivariate, constant liar for candidates still in flight),
  seeded with the family's seeds through ``enqueue_trial``. When ``MAX_SAMPLE_ATTEMPTS``
  samples in a row are rejected or repeats, it enqueues a random unseen feasible candidate, so
  it always makes progress until the space is exhausted.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar

import optuna

from autocutlass.search.space import Candidate, SearchSpace

C = TypeVar("C")

MAX_SAMPLE_ATTEMPTS = 64
"""Consecutive rejected or repeated TPE samples before falling back to a random new candidate."""

TPE_STARTUP_TRIALS = 8
"""Trials TPE samples at random (after the seeds) before it starts modelling."""

INFEASIBLE = "infeasible"
FAILED = "failed"


class Strategy(Protocol[C]):
    """Proposes candidates one at a time and learns from their outcomes."""

    name: str

    def propose(self) -> Candidate[C] | None:
        """A feasible candidate never proposed before, or None when the space is exhausted."""

    def observe(self, candidate: Candidate[C], median_ms: float | None) -> None:
        """The outcome of a proposed candidate: its median time, or None when it failed."""

    def add_prior(self, candidate: Candidate[C], median_ms: float | None) -> None:
        """A candidate evaluated in an earlier run (resume): its time, or None when it failed.
        It is never proposed again (the caller also passes it in ``skip``)."""

    @property
    def rejections(self) -> Counter[str]:
        """Reasons of the samples rejected before evaluation, with their counts."""


class GridStrategy(Generic[C]):
    """Every feasible candidate once: seeds first, then the rest in a seeded shuffle."""

    name = "grid"

    def __init__(self, space: SearchSpace[C], seeds: Iterable[C], *, skip: set[str], seed: int = 0) -> None:
        seed_keys: list[str] = []
        for cfg in seeds:
            cand = space.candidate_of(cfg)
            if cand is not None and space.rejection(cand.key) is None and cand.key not in seed_keys:
                seed_keys.append(cand.key)
        rest = [c for c in space.feasible if c.key not in seed_keys]
        random.Random(seed).shuffle(rest)
        ordered = [space.get(k) for k in seed_keys] + rest
        self._queue: list[Candidate[C]] = [c for c in ordered if c is not None and c.key not in skip]
        self._queue.reverse()  # pop() from the end
        self._rejections: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._queue)

    def propose(self) -> Candidate[C] | None:
        return self._queue.pop() if self._queue else None

    def observe(self, candidate: Candidate[C], median_ms: float | None) -> None:
        return None

    def add_prior(self, candidate: Candidate[C], median_ms: float | None) -> None:
        """Nothing to learn: a grid visits every candidate not in ``skip`` once."""
        return None

    @property
    def rejections(self) -> Counter[str]:
        return self._rejections


class TpeStrategy(Generic[C]):
    """Optuna TPE over the space's categorical axes, seeded, skipping rejected and seen configs."""

    name = "tpe"

    def __init__(self, space: SearchSpace[C], seeds: Iterable[C], *, skip: set[str], seed: int = 0) -> None:
        self._space = space
        self._rng = random.Random(seed)
        sampler = optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=TPE_STARTUP_TRIALS,
            multivariate=True,
            constant_liar=True,
        )
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._seen: set[str] = set(skip)
        self._pending: dict[str, optuna.trial.Trial] = {}
        self._rejections: Counter[str] = Counter()
        self._unseen = [c for c in space.feasible if c.key not in self._seen]
        for cfg in seeds:
            cand = space.candidate_of(cfg)
            if cand is not None and space.rejection(cand.key) is None and cand.key not in self._seen:
                self._study.enqueue_trial(space.axis_params(cand), skip_if_exists=True)

    @property
    def rejections(self) -> Counter[str]:
        return self._rejections

    def _random_unseen(self) -> Candidate[C] | None:
        while self._unseen:
            i = self._rng.randrange(len(self._unseen))
            self._unseen[i], self._unseen[-1] = self._unseen[-1], self._unseen[i]
            cand = self._unseen.pop()
            if cand.key not in self._seen:
                return cand
        return None

    def propose(self) -> Candidate[C] | None:
        for _attempt in range(MAX_SAMPLE_ATTEMPTS):
            trial = self._study.ask(self._space.distributions)
            cand, reason = self._space.resolve(trial.params)
            if cand is None:
                assert reason is not None
                self._rejections[reason] += 1
                trial.set_constraint(INFEASIBLE, 1.0)
                self._study.tell(trial, math.inf)
                continue
            if cand.key in self._seen:
                self._study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            return self._accept(cand, trial)
        fallback = self._random_unseen()
        if fallback is None:
            return None
        self._study.enqueue_trial(self._space.axis_params(fallback))
        trial = self._study.ask(self._space.distributions)
        return self._accept(fallback, trial)

    def _accept(self, cand: Candidate[C], trial: optuna.trial.Trial) -> Candidate[C]:
        self._seen.add(cand.key)
        self._pending[cand.key] = trial
        return cand

    def add_prior(self, candidate: Candidate[C], median_ms: float | None) -> None:
        """Tell TPE about a candidate evaluated in an earlier run (resume): its time, or None."""
        failed = median_ms is None or not math.isfinite(median_ms)
        self._study.add_trial(
            optuna.trial.create_trial(
                params=self._space.axis_params(candidate),
                distributions=self._space.distributions,
                value=math.inf if failed else float(median_ms),  # type: ignore[arg-type]
                constraints={FAILED: 1.0} if failed else None,
            )
        )
        self._seen.add(candidate.key)

    def observe(self, candidate: Candidate[C], median_ms: float | None) -> None:
        trial = self._pending.pop(candidate.key)
        if median_ms is None or not math.isfinite(median_ms):
            trial.set_constraint(FAILED, 1.0)
            self._study.tell(trial, math.inf)
        else:
            self._study.tell(trial, float(median_ms))


def make_strategy(
    space: SearchSpace[C],
    seeds: Iterable[C],
    *,
    skip: set[str],
    budget_trials: int | None,
    exhaustive: bool,
    grid_max: int,
    seed: int = 0,
) -> Strategy[C]:
    """Grid when asked to be exhaustive or when the remaining feasible space is small (at most
    ``grid_max`` candidates, or no more than the trial budget); TPE otherwise."""
    remaining = sum(1 for c in space.feasible if c.key not in skip)
    small = remaining <= grid_max or (budget_trials is not None and remaining <= budget_trials)
    if exhaustive or small:
        return GridStrategy(space, seeds, skip=skip, seed=seed)
    return TpeStrategy(space, seeds, skip=skip, seed=seed)
