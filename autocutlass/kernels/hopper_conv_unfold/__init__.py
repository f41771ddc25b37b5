"""Convolutions whose input channels are not whole 16-byte units, on the forward and wgrad
kernels through a row-unfolded input (``lowering``): ``hopper_conv_unfold`` (fprop, the
``hopper_conv`` family's configs) and ``hopper_conv_wgrad_unfold`` (wgrad, ``hopper_conv_wgrad``'s).

Each family's space, seeds, check and compiled kernels are the inner family's for the lowered
layer; its runner unfolds the input (and the forward's filter) around the inner runner
(``runner``). Records are keyed by the layer itself and the family's own source hash
(``sources``). The wgrad family is tuned-only, as its inner family is, and is switched off with it
(``AUTOCUTLASS_CONV_WGRAD=0``: the inner family's ``supports`` says so).

Modules: ``lowering`` (the mapping and the tensor transforms in torch ops), ``unfold`` and
``unfold_kernel`` (the input's unfolding as one CuTe DSL kernel), ``runner`` (the callables),
``sources``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from autocutlass.device import source_hash as _hash
from autocutlass.errors import CantImplement
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv.config import HopperConvConfig, Schedule
from autocutlass.kernels.hopper_conv_unfold import sources
from autocutlass.kernels.hopper_conv_unfold.lowering import unfolded_problem, unsupported
from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradFamily
from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig
from autocutlass.ops.conv.problem import ConvDirection

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

__all__ = ["HopperConvUnfoldFamily", "HopperConvWgradUnfoldFamily"]

C = TypeVar("C")


class _UnfoldedFamily(KernelFamily[C], Generic[C]):
    """The inner family on ``lowering.unfolded_problem``; subclasses name the direction, the inner
    family (whose config type is theirs) and the runner."""

    DIRECTION: ClassVar[ConvDirection]
    INNER: ClassVar[type[KernelFamily[Any]]]

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._inner = self.INNER(cache_dir)

    def source_hash(self) -> str:
        return _hash(self.SOURCE_FILES)

    def supports(self, problem: ConvProblem) -> str | None:
        reason = unsupported(problem, self.DIRECTION)
        if reason is not None:
            return reason
        lowered = unfolded_problem(problem)
        why = self._inner.supports(lowered)
        return None if why is None else f"as the row-unfolded layer {lowered.describe()}: {why}"

    def space(self, problem: ConvProblem) -> Sequence[C]:
        """The inner family's space for the lowered layer (empty when not served)."""
        return [] if unsupported(problem, self.DIRECTION) is not None else self._inner.space(unfolded_problem(problem))

    def check(self, config: C, problem: ConvProblem) -> str | None:
        reason = unsupported(problem, self.DIRECTION)
        return reason if reason is not None else self._inner.check(config, unfolded_problem(problem))

    def seeds(self, problem: ConvProblem) -> Sequence[C]:
        """The inner family's first guesses for the lowered layer (none when not served)."""
        return [] if unsupported(problem, self.DIRECTION) is not None else self._inner.seeds(unfolded_problem(problem))

    def config_to_dict(self, config: C) -> dict[str, Any]:
        return self._inner.config_to_dict(config)

    def config_from_dict(self, d: dict[str, Any]) -> C:
        return self._inner.config_from_dict(d)  # type: ignore[no-any-return]

    def compile(self, config: C, problem: ConvProblem) -> Any:
        reason = self.check(config, problem)
        if reason is not None:
            raise CantImplement(reason)
        return self._runner(config, problem)

    def _runner(self, config: C, problem: ConvProblem) -> Any:
        raise NotImplementedError

    def simplicity(self, config: C) -> tuple[int, ...]:
        return self._inner.simplicity(config)


class HopperConvUnfoldFamily(_UnfoldedFamily[HopperConvConfig]):
    """conv2d fprop of a layer with unaligned input channels, on ``hopper_conv``."""

    name = "hopper_conv_unfold"
    SOURCE_FILES = sources.FPROP_SOURCE_FILES
    DIRECTION = ConvDirection.FPROP
    INNER = HopperConvFamily

    def seeds(self, problem: ConvProblem) -> Sequence[HopperConvConfig]:
        """``hopper_conv``'s first guesses for the lowered layer, a cooperative tile in a 2x1 cluster
        first (the first such seed, else the first seed made one): on an H100 it was the fastest of
        the first three seeds on every unfolded layer probed, where the first seed (a ping-pong tile)
        barely beat cuDNN (the stem at batch 32: 157 against 223 us, cuDNN 227; at 128: 591 against
        859, cuDNN 918; a 4-channel 3x3 latent layer: 23.5 against 24.4,
        ``benchmarks/results/2026-11-27-h100-s27-unfold-probe.json``). The lowered layer's narrow
        im2col loads bound it, and the pair of CTAs shares each filter tile's load."""
        inner = list(super().seeds(problem))
        if not inner:
            return inner
        paired = [c for c in inner if c.cluster_m == 2 and c.cluster_n == 1 and c.schedule is Schedule.COOPERATIVE]
        first = paired[:1] or [dataclasses.replace(inner[0], cluster_m=2, cluster_n=1, schedule=Schedule.COOPERATIVE)]
        return self.feasible_seeds([*first, *inner], problem)

    def _runner(self, config: HopperConvConfig, problem: ConvProblem) -> Any:
        from autocutlass.kernels.hopper_conv_unfold.runner import UnfoldFpropRunner

        return UnfoldFpropRunner(config, problem, self._cache_dir)


class HopperConvWgradUnfoldFamily(_UnfoldedFamily[HopperConvWgradConfig]):
    """conv2d wgrad of a layer with unaligned input channels, on ``hopper_conv_wgrad`` (tuned-only)."""

    name = "hopper_conv_wgrad_unfold"
    TUNED_ONLY = True
    SOURCE_FILES = sources.WGRAD_SOURCE_FILES
    DIRECTION = ConvDirection.WGRAD
    INNER = HopperConvWgradFamily

    def _runner(self, config: HopperConvWgradConfig, problem: ConvProblem) -> Any:
        from autocutlass.kernels.hopper_conv_unfold.runner import UnfoldWgradRunner

        return UnfoldWgradRunner(config, problem, self._cache_dir)
