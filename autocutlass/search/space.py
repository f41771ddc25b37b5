"""A kernel family's config space for one problem, as Optuna distributions, with feasibility.

``SearchSpace(family, problem)`` enumerates ``family.space(problem)`` (plus ``family.seeds``, should
a seed lie outside the space) once and runs the family's
pure-Python ``check`` on every config, keeping the reason of each rejection. Optuna sees one
``CategoricalDistribution`` per config field: the sorted set of values that field takes in the
space. A sampled combination is mapped back with ``resolve``; it may be outside the space (the
axes' product is larger than the space) or infeasible for this problem, and then it comes back
with its reason instead of a candidate, before anything is compiled.

Candidates are identified by ``config_key`` (sha256 of the canonical JSON of the config dict),
the same key the tuning database stores, so resuming compares keys, never ``str(config)``.

A family may leave a field out of a config's dict where it holds its default (so that configs
from before the field keep their keys: ``hopper_conv``'s ``split_mode``, ``hopper_conv_wgrad``'s
``slab_groups``). Optuna still sees that field as an axis, with ``ABSENT`` among its values for
the configs that lack it (``axis_params``); otherwise every sampled or enqueued combination would
carry the field and only the configs that name it could ever be drawn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import optuna

from autocutlass.kernels.base import KernelFamily
from autocutlass.keys import config_key
from autocutlass.ops.base import OpProblem

C = TypeVar("C")

NOT_IN_SPACE = "combination of axis values is not in the family's space for this problem"

ABSENT = "<absent>"
"""The axis value of a field a config's dict leaves out (``SearchSpace.axis_params``)."""


@dataclass(frozen=True)
class Candidate(Generic[C]):
    """One config of the space: the typed config, its plain dict and its key."""

    config: C
    params: dict[str, Any]
    key: str


def _sort_key(v: Any) -> tuple[str, Any]:
    return (type(v).__name__, v)


class SearchSpace(Generic[C]):
    """The space of ``family`` for ``problem``: candidates, feasibility and Optuna axes."""

    def __init__(self, family: KernelFamily[C], problem: OpProblem) -> None:
        self.family = family
        self.problem = problem
        configs: list[C] = [*family.space(problem), *family.seeds(problem)]
        self.candidates: list[Candidate[C]] = []
        self._by_key: dict[str, Candidate[C]] = {}
        self._reject: dict[str, str] = {}
        axes: dict[str, set[Any]] = {}
        for cfg in configs:
            params = family.config_to_dict(cfg)
            cand = Candidate(cfg, params, config_key(params))
            if cand.key in self._by_key:
                continue
            self.candidates.append(cand)
            self._by_key[cand.key] = cand
            for name, value in params.items():
                axes.setdefault(name, set()).add(value)
            reason = family.check(cfg, problem)
            if reason is not None:
                self._reject[cand.key] = reason
        for cand in self.candidates:
            for name in axes.keys() - cand.params.keys():
                axes[name].add(ABSENT)
        self._axis_names = tuple(sorted(axes))
        self._by_axes: dict[str, Candidate[C]] = {config_key(self.axis_params(c)): c for c in self.candidates}
        self.axes: dict[str, tuple[Any, ...]] = {
            name: tuple(sorted(values, key=_sort_key)) for name, values in sorted(axes.items())
        }
        self.distributions: dict[str, optuna.distributions.BaseDistribution] = {
            name: optuna.distributions.CategoricalDistribution(values) for name, values in self.axes.items()
        }
        self.feasible: list[Candidate[C]] = [c for c in self.candidates if c.key not in self._reject]

    def __len__(self) -> int:
        return len(self.candidates)

    def get(self, key: str) -> Candidate[C] | None:
        return self._by_key.get(key)

    def rejection(self, key: str) -> str | None:
        """The ``check`` reason of an infeasible candidate, None for a feasible one."""
        return self._reject.get(key)

    def reason_counts(self) -> Counter[str]:
        """How many configs of the space each rejection reason rules out."""
        return Counter(self._reject.values())

    def axis_params(self, candidate: Candidate[C]) -> dict[str, Any]:
        """The candidate as Optuna sees it: a value for every axis, ``ABSENT`` for the fields its
        dict leaves out. What ``resolve`` takes back, and what seeds and priors are enqueued as."""
        return {name: candidate.params.get(name, ABSENT) for name in self._axis_names}

    def resolve(self, params: Mapping[str, Any]) -> tuple[Candidate[C] | None, str | None]:
        """A sampled parameter combination (``axis_params`` form) as (feasible candidate, None) or
        (None, reason)."""
        cand = self._by_axes.get(config_key({name: params.get(name, ABSENT) for name in self._axis_names}))
        if cand is None:
            return None, NOT_IN_SPACE
        reason = self._reject.get(cand.key)
        if reason is not None:
            return None, reason
        return cand, None

    def candidate_of(self, config: C) -> Candidate[C] | None:
        """The candidate of a typed config (None when the config is not in the space)."""
        return self._by_key.get(config_key(self.family.config_to_dict(config)))
