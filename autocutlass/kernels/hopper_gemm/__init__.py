"""Hopper (sm_90a) warp-specialised persistent GEMM family.

Modules: ``config`` (the frozen config and its axes), ``plan`` (derived compile-time plan and
the shared-memory arithmetic), ``check`` (feasibility with reasons), ``kernel`` (the CuTe DSL
kernel), ``compile`` (symbolic-shape compile, in-process and on-disk caches), ``runner`` (the
callable). Only ``kernel``, ``compile`` and ``runner`` import the DSL, and only when used.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocutlass.kernels.base import GemmRunner, KernelFamily
from autocutlass.kernels.hopper_gemm.check import TILE_K_32BIT, check, problem_supported
from autocutlass.kernels.hopper_gemm.config import (
    CLUSTERS,
    SWIZZLE,
    TUNED_SPLIT_K,
    TILE_M,
    TILE_N,
    HopperGemmConfig,
    Raster,
    Schedule,
    SplitMode,
    Store,
)
from autocutlass.problem import Problem

__all__ = ["HopperGemmConfig", "HopperGemmFamily", "Raster", "Schedule", "SplitMode", "Store", "check"]

SMALL_M_DIRECT_STORE = 256
SPLIT_K_MAX_OUTPUT = 4096 * 4096
"""Output elements (M * N * L) up to which the space offers split-K."""

TILE_K_16BIT = (64, 128)

TUNED_STAGES = (0,)
"""The search space keeps stages at 'as many as fit': with one CTA per SM a deeper ring is never
slower; explicit stage counts remain valid configs for users and tests."""


class HopperGemmFamily(KernelFamily[HopperGemmConfig]):
    name = "hopper_gemm"

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir

    def supports(self, problem: Problem) -> str | None:
        return problem_supported(problem)

    def space(self, problem: Problem) -> Sequence[HopperGemmConfig]:
        """Tiles x clusters x schedules x raster/swizzle at stages = as many as fit. The direct
        (shared-memory-free) store joins only for small M, where the epilogue is a small part of
        the time and its missing barriers can pay; on large problems the TMA store measured
        8-10% faster (H200, 2026-11-21)."""
        stores = tuple(Store) if problem.m <= SMALL_M_DIRECT_STORE else (Store.TMA,)
        tile_ks = TILE_K_32BIT if problem.a_dtype.bytes == 4 else TILE_K_16BIT
        out = [
            HopperGemmConfig(tm, tn, tk, cm, cn, st, sch, ras, sw, 1, sto)
            for tm, tn, tk, (cm, cn), st, sch, ras, sw, sto in itertools.product(
                TILE_M, TILE_N, tile_ks, CLUSTERS, TUNED_STAGES, tuple(Schedule), tuple(Raster), SWIZZLE, stores
            )
        ]
        # Split-K where output tiles alone cannot fill the GPU (decode shapes, long K): the
        # cooperative configs again, with the K loop split 2..8 ways, serial (either store) or
        # through the workspace and the reduce kernel.
        if problem.m * problem.n * problem.l <= SPLIT_K_MAX_OUTPUT and problem.k >= 1024:
            out += [
                HopperGemmConfig(tm, tn, tk, cm, cn, st, Schedule.COOPERATIVE, ras, 1, sk, sto, mode)
                for tm, tn, tk, (cm, cn), st, ras, sk, (sto, mode) in itertools.product(
                    TILE_M, TILE_N, tile_ks, CLUSTERS, TUNED_STAGES, tuple(Raster), TUNED_SPLIT_K[1:],
                    [(sto, SplitMode.SERIAL) for sto in stores] + [(Store.TMA, SplitMode.WORKSPACE)],
                )
            ]
        return out

    def check(self, config: HopperGemmConfig, problem: Problem) -> str | None:
        return check(config, problem)

    def seeds(self, problem: Problem) -> Sequence[HopperGemmConfig]:
        """Good first guesses by problem class, best guess first: the winners of the best-of-space
        sweeps on an H200 (benchmarks/results/2026-11-21-h200-hopper-gemm-sweep-*.json)."""
        c = HopperGemmConfig
        pp, n_ = Schedule.PINGPONG, Raster.ALONG_N
        if problem.m <= 128:  # decode: stream the weight with many small tiles
            guesses = [
                c(64, 128, 128), c(64, 96, 64, cluster_n=2, raster=n_), c(64, 64, 128, cluster_m=2),
                c(64, 96, 128, cluster_n=2), c(64, 128, 64, split_k=2), c(64, 64, 128, split_k=2),
                c(64, 128, 64), c(64, 256, 64, schedule=pp),
            ]
        elif problem.m * problem.n * problem.l <= 2048 * 4096 or problem.k <= 512:  # few tiles or short K
            guesses = [
                c(128, 128, 64, cluster_m=2, schedule=pp), c(128, 128, 64, cluster_n=2, schedule=pp, raster=n_, swizzle=8),
                c(128, 192, 64, cluster_n=2, raster=n_), c(64, 256, 64, cluster_m=2, schedule=pp),
                c(128, 128, 64), c(128, 256, 64, cluster_n=2), c(256, 128, 64, cluster_m=2),
            ]
        else:  # large: the cooperative 128x256 / 256x128 family with 2-CTA clusters
            guesses = [
                c(128, 256, 64, cluster_m=2, raster=n_, swizzle=8), c(128, 256, 64, cluster_n=2, swizzle=2),
                c(256, 128, 64), c(256, 128, 64, cluster_m=2, swizzle=4), c(256, 128, 64, cluster_n=2, swizzle=4),
                c(128, 256, 64), c(128, 256, 64, cluster_n=2), c(128, 128, 64, schedule=pp, cluster_m=2),
            ]
        guesses += [c(128, 128, 64), c(64, 128, 64), c(64, 64, 64)]
        if problem.a_dtype.bytes == 4:  # tf32: the same shapes with half the K elements per stage
            guesses = [dataclasses.replace(g, tile_k=g.tile_k // 2) for g in guesses]
        out: list[HopperGemmConfig] = []
        for g in guesses:
            if g not in out and check(g, problem) is None:
                out.append(g)
        return out

    def config_to_dict(self, config: HopperGemmConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperGemmConfig:
        return HopperGemmConfig.from_dict(d)

    def compile(self, config: HopperGemmConfig, problem: Problem) -> GemmRunner:
        from autocutlass.kernels.hopper_gemm.runner import HopperGemmRunner

        return HopperGemmRunner(config, problem, self._cache_dir)

    def simplicity(self, config: HopperGemmConfig) -> tuple[int, ...]:
        return (
            config.cluster_size,
            int(config.schedule is Schedule.PINGPONG),
            config.swizzle,
            int(config.raster is Raster.ALONG_N),
            int(config.stages != 0),
            config.tile_k,
            int(config.store is Store.DIRECT),
            config.split_k,
            int(config.split_mode is SplitMode.WORKSPACE),
        )
