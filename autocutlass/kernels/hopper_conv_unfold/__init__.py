"""Convolutions whose input channels are not whole 16-byte units, on the forward and wgrad
kernels through a row-unfolded input (``lowering``): ``hopper_conv_unfold`` (fprop, the
``hopper_conv`` family's configs) and ``hopper_conv_wgrad_unfold`` (wgrad, ``hopper_conv_wgrad``'s).

A config is the inner family's config for the lowered layer and T, the filter rows each unfolded
pixel holds (``config.UnfoldedConfig``; ``lowering.unfold_rows`` lists the T of a layer): the
space, seeds, check and compiled kernels are the inner family's for the lowered layer of each T;
the runner unfolds the input (and the forward's filter) around the inner runner (``runner``). Records are keyed by the layer itself and the family's own source hash
(``sources``). The wgrad family is tuned-only, as its inner family is, and is switched off with it
(``AUTOCUTLASS_CONV_WGRAD=0``: the inner family's ``supports`` says so).

Modules: ``config``, ``lowering`` (the mapping and the tensor transforms in torch ops), ``unfold`` and
``unfold_kernel`` (the input's unfolding as one CuTe DSL kernel), ``runner`` (the callables),
``sources``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from autocutlass.device import source_hash as _hash
from autocutlass.errors import CantImplement
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv.config import HopperConvConfig, Schedule
from autocutlass.kernels.hopper_conv_unfold import sources
from autocutlass.kernels.hopper_conv_unfold.config import UnfoldedConfig
from autocutlass.kernels.hopper_conv_unfold.lowering import (
    WIDE_CHANNELS,
    unfold_rows,
    unfolded_channels,
    unfolded_problem,
    unsupported,
)
from autocutlass.kernels.hopper_conv_unfold.unfold import ASSEMBLIES
from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradFamily, cheapest_per_sharing, modelled_configs
from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig
from autocutlass.ops.conv.problem import ConvDirection

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

__all__ = ["HopperConvUnfoldFamily", "HopperConvWgradUnfoldFamily", "UnfoldedConfig"]

C = TypeVar("C")

ASSEMBLE = "slots"
"""The row-unfolding kernel the space and the seeds offer (``UnfoldedConfig.assemble``): on an H200
the first build ("gather") unfolded the stem's x' at about 1.9 TB/s, bound by its per-element index
arithmetic (session 37 call d: 32 of the wgrad record's 83 us). Stored records of "gather" keep
running it (their dict form has no ``assemble``)."""


class _UnfoldedFamily(KernelFamily[UnfoldedConfig[C]], Generic[C]):
    """The inner family on ``lowering.unfolded_problem`` of each T; subclasses name the direction,
    the inner family and the runner."""

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

    def channel_multiples(self, problem: ConvProblem, rows: int) -> tuple[int, ...]:
        """The channel multiples C' may be rounded up to for T = ``rows`` (``UnfoldedConfig.channels``):
        0 (whole 16-byte units) here; the wgrad family adds ``WIDE_CHANNELS``."""
        return (0,)

    def _offered(self, config: C, channels: int) -> bool:
        """Whether the space and the seeds offer inner ``config`` with C' rounded to ``channels``."""
        return True

    def _inner_seeds(self, lowered: ConvProblem, channels: int) -> list[C]:
        """The inner family's seeds of a lowered layer that the space offers with ``channels``."""
        return [c for c in self._inner.seeds(lowered) if self._offered(c, channels)]

    def _lowerings(self, problem: ConvProblem) -> list[tuple[int, int]]:
        """(T, channel multiple) of every lowered layer the space offers, T ascending, 16-byte C' first."""
        return [(t, m) for t in unfold_rows(problem) for m in self.channel_multiples(problem, t)]

    def space(self, problem: ConvProblem) -> Sequence[UnfoldedConfig[C]]:
        """The inner family's space for the lowered layer of each T and channel multiple (empty
        when not served)."""
        if unsupported(problem, self.DIRECTION) is not None:
            return []
        return [UnfoldedConfig(c, t, m, ASSEMBLE) for t, m in self._lowerings(problem)
                for c in self._inner.space(unfolded_problem(problem, t, m)) if self._offered(c, m)]  # fmt: skip

    def check(self, config: UnfoldedConfig[C], problem: ConvProblem) -> str | None:
        reason = unsupported(problem, self.DIRECTION)
        if reason is not None:
            return reason
        rows = unfold_rows(problem)
        if config.rows not in rows:
            return f"rows={config.rows}: this layer unfolds {list(rows)} filter rows per pixel"
        if config.assemble not in ASSEMBLIES:
            return f"assemble={config.assemble!r} is not one of {sorted(ASSEMBLIES)}"
        multiples = self.channel_multiples(problem, config.rows)
        if config.channels not in multiples:
            return (f"channels={config.channels}: the unfolded channels of this layer at rows={config.rows} round up to "
                    f"one of {list(multiples)} (0: whole 16-byte units)")  # fmt: skip
        return self._inner.check(config.inner, unfolded_problem(problem, config.rows, config.channels))

    def seeds(self, problem: ConvProblem) -> Sequence[UnfoldedConfig[C]]:
        """The inner family's first guesses for the lowered layer of each T and channel multiple,
        taken in turn, the largest T (fewest, widest im2col loads per output pixel) first, its
        16-byte rounding before its wide one; none when not served."""
        if unsupported(problem, self.DIRECTION) is not None:
            return []
        per_t = [[UnfoldedConfig(c, t, m, ASSEMBLE) for c in self._inner_seeds(unfolded_problem(problem, t, m), m)]
                 for t, m in sorted(self._lowerings(problem), key=lambda tm: -tm[0])]  # fmt: skip
        out = [cfg for rank in itertools.zip_longest(*per_t) for cfg in rank if cfg is not None]
        return self.feasible_seeds(out, problem)

    def config_to_dict(self, config: UnfoldedConfig[C]) -> dict[str, Any]:
        return {**self._inner.config_to_dict(config.inner), **config.own_fields()}

    def config_from_dict(self, d: dict[str, Any]) -> UnfoldedConfig[C]:
        inner = dict(d)
        own = {k: inner.pop(k) for k in UnfoldedConfig.OWN_FIELDS if k in inner}
        return UnfoldedConfig(self._inner.config_from_dict(inner), **own)

    def compile(self, config: UnfoldedConfig[C], problem: ConvProblem) -> Any:
        reason = self.check(config, problem)
        if reason is not None:
            raise CantImplement(reason)
        return self._runner(config, problem)

    def _runner(self, config: UnfoldedConfig[C], problem: ConvProblem) -> Any:
        raise NotImplementedError

    def simplicity(self, config: UnfoldedConfig[C]) -> tuple[int, ...]:
        return (*self._inner.simplicity(config.inner), config.rows, config.channels)


class HopperConvUnfoldFamily(_UnfoldedFamily[HopperConvConfig]):
    """conv2d fprop of a layer with unaligned input channels, on ``hopper_conv``."""

    name = "hopper_conv_unfold"
    SOURCE_FILES = sources.FPROP_SOURCE_FILES
    DIRECTION = ConvDirection.FPROP
    INNER = HopperConvFamily

    def seeds(self, problem: ConvProblem) -> Sequence[UnfoldedConfig[HopperConvConfig]]:
        """The T-interleaved seeds (``_UnfoldedFamily.seeds``), the first one's T with a cooperative
        tile in a 2x1 cluster first (the first such seed of that T, else the first seed made one): on
        an H100 it was the fastest of the first three seeds on every unfolded layer probed with T = 1,
        where the first seed (a ping-pong tile) barely beat cuDNN
        (``benchmarks/results/2026-11-27-h100-s27-unfold-probe.json``)."""
        out = list(super().seeds(problem))
        if not out:
            return out
        t = out[0].rows
        paired = [c for c in out if c.rows == t and (c.inner.cluster_m, c.inner.cluster_n) == (2, 1)
                  and c.inner.schedule is Schedule.COOPERATIVE]  # fmt: skip
        made = dataclasses.replace(out[0].inner, cluster_m=2, cluster_n=1, schedule=Schedule.COOPERATIVE)
        first = paired[:1] or [UnfoldedConfig(made, t, 0, ASSEMBLE)]
        return self.feasible_seeds([*first, *out], problem)

    def _runner(self, config: UnfoldedConfig[HopperConvConfig], problem: ConvProblem) -> Any:
        from autocutlass.kernels.hopper_conv_unfold.runner import UnfoldFpropRunner

        return UnfoldFpropRunner(config, problem, self._cache_dir)


class HopperConvWgradUnfoldFamily(_UnfoldedFamily[HopperConvWgradConfig]):
    """conv2d wgrad of a layer with unaligned input channels, on ``hopper_conv_wgrad`` (tuned-only)."""

    name = "hopper_conv_wgrad_unfold"
    TUNED_ONLY = True
    SOURCE_FILES = sources.WGRAD_SOURCE_FILES
    DIRECTION = ConvDirection.WGRAD
    INNER = HopperConvWgradFamily

    def channel_multiples(self, problem: ConvProblem, rows: int) -> tuple[int, ...]:
        """16-byte units, and ``WIDE_CHANNELS`` where those leave C' short of a multiple of it: with C'
        padded to 64 channels the wgrad kernel's tiles span the taps in 64-channel boxes
        (``tap_channels``), so that one tile column holds every tap and dy is read once per tile
        row, where one tile per tap (16-byte C') reads all of dy once per tap. ResNet-50's stem at
        T = 2 (4 taps of 42 channels): the shipped H200 record (one tap per 64-wide tile, 4 taps x 33
        workspace splits) moves about 410 MB per call at batch 32 for a layer whose dy and x' are
        about 90 MB (``benchmarks/results/2026-11-28-h200-s36-d-bench-wgrad.*``: 0.59 TB/s of the
        layer's bytes, 103 us)."""
        if unfolded_channels(problem, rows) % WIDE_CHANNELS == 0:
            return (0,)
        return (0, WIDE_CHANNELS)

    def _offered(self, config: HopperConvWgradConfig, channels: int) -> bool:
        """The wide rounding only with tiles across the taps in boxes of that many channels (with one
        tap per tile the padded channels would only add columns)."""
        return not channels or config.tap_channels == channels

    def _inner_seeds(self, lowered: ConvProblem, channels: int) -> list[HopperConvWgradConfig]:
        """With the wide rounding: the inner family's seeds with tiles across the taps in boxes of
        ``channels``, then its cost model's cheapest such config of each way of sharing the pixel
        loop (workspace slabs, a serial split, data-parallel tiles, stream-K), cheapest first."""
        seeds = super()._inner_seeds(lowered, channels)
        if not channels:
            return seeds
        ranked = [cfg for _, cfg in modelled_configs(lowered)
                  if self._offered(cfg, channels) and self._inner.check(cfg, lowered) is None]  # fmt: skip
        picks = set(cheapest_per_sharing(ranked).values())
        return list(dict.fromkeys([*seeds, *(cfg for cfg in ranked if cfg in picks)]))

    def _runner(self, config: UnfoldedConfig[HopperConvWgradConfig], problem: ConvProblem) -> Any:
        from autocutlass.kernels.hopper_conv_unfold.runner import UnfoldWgradRunner

        return UnfoldWgradRunner(config, problem, self._cache_dir)
