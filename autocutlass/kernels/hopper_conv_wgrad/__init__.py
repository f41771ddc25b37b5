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

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels import budgets, waves
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
    "hopper_conv_wgrad is off by default: its GPU tests pass but it loses to cuDNN (x0.92 on the conv suite, "
    "H100, 2026-11-25); AUTOCUTLASS_CONV_WGRAD=1 turns it on"
)
SMALL_OUTPUT_DIRECT_STORE = 64 * 64 * 9
"""Filters with at most this many elements (K*C*R*S) also get the direct store."""


def output_tiles(problem: ConvProblem, tile_m: int, tile_n: int) -> int:
    """Output tiles of the batched implicit GEMM: K tiles x C tiles x taps."""
    return -(-problem.k // tile_m) * -(-problem.c // tile_n) * problem.r * problem.s


MODEL_TILE_K = 64
"""The pixels per K block of the configs the cost model ranks (``modelled_configs``)."""

MODEL_PICKS = 4
"""Seeds taken from the cost model's ranking, before the family's fixed guesses."""


def modelled_configs(problem: ConvProblem) -> list[tuple[float, HopperConvWgradConfig]]:
    """Every (tile_m, tile_n) of the family's axes with each way of sharing the pixel loop
    (data-parallel, each serial split of ``SPLIT_K`` leaving at least 4 K blocks per split,
    stream-K), cooperative, no cluster, ``MODEL_TILE_K`` pixels per K block, with the cost
    ``kernels.waves.predicted_cost`` predicts for it, cheapest first (ties: the simpler)."""
    c = HopperConvWgradConfig
    k_blocks = -(-implicit_gemm(problem).k // MODEL_TILE_K)
    out: list[tuple[float, HopperConvWgradConfig]] = []
    for tm, tn in itertools.product(TILE_M, TILE_N):
        tiles = output_tiles(problem, tm, tn)
        for split in SPLIT_K:
            if split == 1 or k_blocks >= 4 * split:
                cost = waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K, split=split)
                out.append((cost, c(tm, tn, MODEL_TILE_K, split_k=split)))
        cost = waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K, stream_k=True)
        out.append((cost, c(tm, tn, MODEL_TILE_K, stream_k=True)))
    out.sort(key=lambda pair: (pair[0], pair[1].split_k, pair[1].stream_k))
    return out


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
        """First guesses, best first. The cost model's (``modelled_configs``, feasible ones only):
        its best config, and the best of each way of sharing the pixel loop (data-parallel tiles,
        a serial split, stream-K), ``MODEL_PICKS`` in all, cheapest first, since which of the
        three wins turns on how the layer's few output tiles fill the SMs; then the best
        data-parallel one in a 2x1 cluster and as ping-pong, then the large and small tiles."""
        c = HopperConvWgradConfig
        ranked = [cfg for _, cfg in modelled_configs(problem) if self.check(cfg, problem) is None]
        if not ranked:
            return []
        kinds = ("stream", "split", "data")

        def kind(cfg: HopperConvWgradConfig) -> str:
            return kinds[0] if cfg.stream_k else kinds[1] if cfg.split_k > 1 else kinds[2]

        firsts = {k: next((cfg for cfg in ranked if kind(cfg) == k), None) for k in kinds}
        picks = [ranked[0], *(cfg for cfg in firsts.values() if cfg is not None)]
        picks += [cfg for cfg in ranked if cfg not in picks][: max(0, MODEL_PICKS - len(set(picks)))]
        order = {cfg: i for i, cfg in enumerate(ranked)}
        guesses = sorted(set(picks), key=order.__getitem__)
        data = firsts["data"]
        if data is not None:
            guesses += [dataclasses.replace(data, cluster_m=2), dataclasses.replace(data, schedule=Schedule.PINGPONG)]
        guesses += [c(128, 256, 64), c(256, 128, 64), c(128, 128, 64), c(128, 64, 64), c(64, 64, 64)]
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
