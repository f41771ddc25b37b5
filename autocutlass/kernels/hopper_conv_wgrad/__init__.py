"""Hopper (sm_90a) implicit-GEMM conv2d wgrad family: dw = dy^T x im2col(x), batched over the
filter taps, the activation loaded by Hopper's im2col TMA.

Modules: ``config`` (the frozen config and its axes), ``plan`` (the implicit GEMM and the
compile-time plan), ``check`` (feasibility with reasons), ``kernel`` (the CuTe DSL kernel: the
GEMM kernel's consumers, split-K, stream-K and epilogue behind a dy TMA + x im2col TMA
producer), ``compile`` (symbolic-shape compile, in-process and on-disk caches), ``runner`` (the
callable, in the conv wgrad convention ``runner(dy, x, dw)``), ``sources`` (the files the
family's hash covers). Only ``kernel``, ``compile`` and ``runner`` touch the DSL, and only when
used.

**Off by default** (``Settings.conv_wgrad_kernel``, ``AUTOCUTLASS_CONV_WGRAD=1``): the kernel
compiles for sm_90a in CI, but it has not been run on a GPU yet; until its GPU tests pass,
``supports`` answers every problem with that reason, so dispatch never picks it and conv2d
wgrad runs cuDNN (or, for pointwise layers, the GEMM family).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels import budgets
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_conv_wgrad.check import check, problem_supported
from autocutlass.kernels.hopper_conv_wgrad.config import (
    CLUSTERS,
    SPLIT_K,
    SWIZZLE,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperConvWgradConfig,
    Raster,
    Schedule,
    Store,
)
from autocutlass.kernels.hopper_conv_wgrad.plan import implicit_gemm
from autocutlass.kernels.hopper_conv_wgrad.sources import SOURCE_FILES

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

__all__ = ["GATE_REASON", "HopperConvWgradConfig", "HopperConvWgradFamily", "check"]

GATE_REASON = (
    "hopper_conv_wgrad is off by default: its GPU tests pass but it loses to cuDNN (x0.84 on the conv suite, "
    "H100, 2026-11-25); AUTOCUTLASS_CONV_WGRAD=1 turns it on"
)
SMALL_OUTPUT_DIRECT_STORE = 64 * 64 * 9
"""Filters with at most this many elements (K*C*R*S) also get the direct store."""


def output_tiles(problem: ConvProblem, tile_m: int, tile_n: int) -> int:
    """Output tiles of the batched implicit GEMM: K tiles x C tiles x taps."""
    return -(-problem.k // tile_m) * -(-problem.c // tile_n) * problem.r * problem.s


def balanced_splits(tiles: int, k_blocks: int, sms: int = budgets.SM_COUNT_SM90) -> int:
    """The split count (of ``config.SPLIT_K``) that brings ``tiles`` closest to filling the SMs
    once, without splitting the pixel loop into blocks of fewer than 4 K blocks."""
    best = 1
    for s in SPLIT_K:
        if tiles * s <= sms and k_blocks >= 4 * s:
            best = s
    return best


class HopperConvWgradFamily(KernelFamily[HopperConvWgradConfig]):
    name = "hopper_conv_wgrad"
    SOURCE_FILES = SOURCE_FILES
    """Files (relative to ``autocutlass/kernels``) whose code decides the generated kernel."""

    def __init__(self, cache_dir: Path | None = None, *, enabled: bool | None = None) -> None:
        self._cache_dir = cache_dir
        self._enabled = enabled

    def enabled(self) -> bool:
        """Whether the family serves problems: ``enabled`` when given, else the setting now."""
        if self._enabled is not None:
            return self._enabled
        from autocutlass.settings import current

        return current().conv_wgrad_kernel

    def supports(self, problem: ConvProblem) -> str | None:
        reason = problem_supported(problem)
        if reason is None and not self.enabled():
            return GATE_REASON
        return reason

    def space(self, problem: ConvProblem) -> Sequence[HopperConvWgradConfig]:
        """Tiles x clusters x schedules x raster/swizzle at stages = as many as fit (the TMA store;
        the direct store too for small filters), then the cooperative tiles with the pixel loop
        split serially (``SPLIT_K``) and with stream-K: a wgrad's output tiles are few and its
        pixel loop long, so most layers want one of the two."""
        c = HopperConvWgradConfig
        small = problem.k * problem.c * problem.r * problem.s <= SMALL_OUTPUT_DIRECT_STORE
        stores = tuple(Store) if small else (Store.TMA,)
        out = [
            c(tm, tn, tk, cm, cn, 0, sch, ras, sw, 1, False, sto)
            for tm, tn, tk, (cm, cn), sch, ras, sw, sto in itertools.product(
                TILE_M, TILE_N, TILE_K, CLUSTERS, tuple(Schedule), tuple(Raster), SWIZZLE, stores
            )
        ]
        coop = Schedule.COOPERATIVE
        out += [
            c(tm, tn, tk, cm, cn, 0, coop, ras, 1, sk, False, Store.TMA)
            for tm, tn, tk, (cm, cn), ras, sk in itertools.product(TILE_M, TILE_N, TILE_K, CLUSTERS, tuple(Raster),
                                                                  SPLIT_K[1:])
        ]
        out += [
            c(tm, tn, tk, cm, cn, 0, coop, ras, 1, 1, True, Store.TMA)
            for tm, tn, tk, (cm, cn), ras in itertools.product(TILE_M, TILE_N, TILE_K, CLUSTERS, tuple(Raster))
        ]
        return out

    def check(self, config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
        reason = check(config, problem)
        if reason is None and not self.enabled():
            return GATE_REASON
        return reason

    def seeds(self, problem: ConvProblem) -> Sequence[HopperConvWgradConfig]:
        """First guesses, best first (not yet measured: the kernel has not run on a GPU): tiles
        that cover the channels with few padded ones; stream-K when the output tiles fill less
        than half of the SMs, then the serial split that fills them once, then the
        data-parallel tiles for layers with many tiles."""
        c = HopperConvWgradConfig
        tm = 128 if problem.k >= 128 else 64
        tn = 128 if problem.c >= 128 else 64
        tiles = output_tiles(problem, tm, tn)
        k_blocks = -(-implicit_gemm(problem).k // 64)
        splits = balanced_splits(tiles, k_blocks)
        few = tiles < budgets.SM_COUNT_SM90 // 2
        guesses = []
        if few:
            guesses += [c(tm, tn, 64, stream_k=True), c(tm, tn, 64, split_k=splits), c(tm, tn, 128, stream_k=True)]
        guesses += [c(tm, tn, 64), c(tm, tn, 64, cluster_m=2), c(tm, tn, 64, schedule=Schedule.PINGPONG),
                    c(128, 256, 64), c(256, 128, 64)]  # fmt: skip
        if not few and splits > 1:
            guesses.insert(1, c(tm, tn, 64, split_k=splits))
        guesses += [c(128, 128, 64), c(128, 64, 64), c(64, 64, 64)]
        return self.feasible_seeds(guesses, problem)

    def config_to_dict(self, config: HopperConvWgradConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperConvWgradConfig:
        return HopperConvWgradConfig.from_dict(d)

    def compile(self, config: HopperConvWgradConfig, problem: ConvProblem) -> Any:
        """A runner in the conv wgrad convention ``runner(dy, x, dw)`` (``hopper_conv_wgrad.runner``)."""
        from autocutlass.errors import CantImplement
        from autocutlass.kernels.hopper_conv_wgrad.runner import HopperConvWgradRunner

        if not self.enabled():
            raise CantImplement(GATE_REASON)
        return HopperConvWgradRunner(config, problem, self._cache_dir)

    def simplicity(self, config: HopperConvWgradConfig) -> tuple[int, ...]:
        return (
            config.cluster_size,
            int(config.schedule is Schedule.PINGPONG),
            config.swizzle,
            int(config.raster is Raster.ALONG_N),
            int(config.stages != 0),
            config.tile_k,
            int(config.store is Store.DIRECT),
            config.split_k,
            int(config.stream_k),
        )
