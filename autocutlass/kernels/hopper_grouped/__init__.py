"""Hopper (sm_90a) persistent grouped-GEMM family: the mixture-of-experts layer's x (T, K) by
w (E, K, N) with rows routed by ``offs``, tile scheduling read from ``offs`` on the device.

Modules: ``config`` (the frozen config and its axes), ``plan`` (the equivalent GEMM's plan and the
shared-memory group tables), ``check`` (feasibility with reasons), ``kernel`` (the CuTe DSL
kernel), ``compile`` (symbolic-shape compile, in-process and on-disk caches), ``runner`` (the
callable, in the grouped runner convention), ``sources`` (the files the family's hash covers).
Only ``kernel``, ``compile`` and ``runner`` touch the DSL, and only when used.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_gemm.config import Raster, Schedule, Store
from autocutlass.kernels.hopper_grouped.check import check, problem_supported
from autocutlass.kernels.hopper_grouped.config import (
    CLUSTERS,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperGroupedConfig,
)
from autocutlass.kernels.hopper_grouped.sources import SOURCE_FILES

if TYPE_CHECKING:
    from autocutlass.ops.grouped.problem import GroupedGemmProblem

__all__ = ["HopperGroupedConfig", "HopperGroupedFamily", "check"]

SMALL_EXPERTS = 64
"""Average rows per expert up to which 64-row tiles lead the seeds: a 128-row tile would
compute (and discard) mostly rows of the next expert."""
MEDIUM_EXPERTS = 512


def rows_per_expert(problem: GroupedGemmProblem) -> float:
    return problem.t / max(problem.experts, 1)


class HopperGroupedFamily(KernelFamily[HopperGroupedConfig]):
    name = "hopper_grouped"
    SOURCE_FILES = SOURCE_FILES
    """Files (relative to ``autocutlass/kernels``) whose code decides the generated kernel."""
    TUNED_ONLY = True
    """torch._grouped_mm streams most grouped problems near the roof, and a config tuned for
    another bucket lost up to 10% (a Qwen3-MoE block served by its nearest bucket's record, x0.904
    on an H200): untuned problems run torch until tuned here."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir

    def supports(self, problem: Any) -> str | None:
        return problem_supported(problem)

    def space(self, problem: GroupedGemmProblem) -> Sequence[HopperGroupedConfig]:
        """Every tile (64 or 128 rows, 64..256 columns, K blocks of 64 or 128) in both orders and
        both schedules (ping-pong tiles of 128 rows wider than 128 columns fail ``check``: each
        consumer would hold 256 accumulator registers per thread), alone and in clusters of
        two: 2x1 (sharing the weight tile) where the experts average more than two such tiles of
        rows (with fewer, the pair's second CTA would mostly compute rows it never stores), 1x2
        (sharing the tokens' tile) where N spans more than one column tile; each stored from
        registers and, where the experts average at least a tile of rows (whole tiles to stage),
        through shared memory and TMA."""
        rows = rows_per_expert(problem)
        return [HopperGroupedConfig(tm, tn, tk, ras, sch, cm, cn, st)
                for tm, tn, tk, ras, sch, (cm, cn), st in itertools.product(TILE_M, TILE_N, TILE_K, tuple(Raster),
                                                                            tuple(Schedule), CLUSTERS, tuple(Store))
                if (cm == 1 or rows > 2 * tm) and (cn == 1 or problem.n > tn)
                and (st is Store.DIRECT or rows >= tm)]  # fmt: skip

    def check(self, config: HopperGroupedConfig, problem: GroupedGemmProblem) -> str | None:
        return check(config, problem)

    def seeds(self, problem: GroupedGemmProblem) -> Sequence[HopperGroupedConfig]:
        """First guesses by rows per expert, best guess first (not yet measured on a GPU: the
        tile shapes the GEMM family's decode and large-problem seeds favour). Small experts
        (decode, fine-grained MoE): 64-row tiles, which waste the fewest rows, with wide columns
        and long K blocks to stream the weights; large experts: the GEMM's 128x256 and 128x128
        tiles walked along M, so that consecutive CTAs share the expert's weight tile, then
        ping-pong tiles (one consumer's epilogue under the other's mainloop), clusters of two
        and TMA stores first (the GEMM family on one Mixtral expert's 2048x14336x4096, H100,
        2026-11-27, ``grouped_cluster_probe.py``: 128x256x64 at 624 TF/s alone storing from
        registers, 709 through TMA stores, 756-780 in a 1x2 or 2x1 cluster with TMA stores)."""
        c, n_, pp = HopperGroupedConfig, Raster.ALONG_N, Schedule.PINGPONG
        rows = rows_per_expert(problem)
        if rows <= SMALL_EXPERTS:
            guesses = [c(64, 128, 64), c(64, 256, 64), c(64, 128, 128), c(64, 64, 128), c(128, 128, 64)]
        elif rows <= MEDIUM_EXPERTS:
            guesses = [c(128, 128, 64), c(64, 256, 64), c(128, 256, 64), c(64, 128, 64), c(128, 128, 64, n_),
                       c(64, 256, 64, schedule=pp)]  # fmt: skip
        else:
            tma = Store.TMA
            guesses = [c(128, 256, 64, cluster_n=2, store=tma), c(128, 256, 64, cluster_m=2, store=tma),
                       c(128, 256, 64, cluster_n=2), c(128, 256, 64, cluster_m=2), c(128, 256, 64),
                       c(128, 128, 64, schedule=pp, cluster_m=2),
                       c(128, 128, 64, schedule=pp), c(128, 128, 64), c(64, 256, 64, schedule=pp),
                       c(128, 192, 64), c(128, 256, 64, n_)]  # fmt: skip
        guesses += [c(128, 128, 64), c(64, 128, 64), c(64, 64, 64)]
        return self.feasible_seeds(guesses, problem)

    def config_to_dict(self, config: HopperGroupedConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperGroupedConfig:
        return HopperGroupedConfig.from_dict(d)

    def compile(self, config: HopperGroupedConfig, problem: GroupedGemmProblem) -> Any:
        """A runner in the grouped convention ``runner(x, w, offs, out, *, bias)``
        (``hopper_grouped.runner``)."""
        from autocutlass.kernels.hopper_grouped.runner import HopperGroupedRunner

        return HopperGroupedRunner(config, problem, self._cache_dir)

    def simplicity(self, config: HopperGroupedConfig) -> tuple[int, ...]:
        return (int(config.schedule is Schedule.PINGPONG), int(config.raster is Raster.ALONG_N),
                config.cluster_m * config.cluster_n, int(config.store is Store.TMA),
                config.tile_k, config.tile_m, config.tile_n)  # fmt: skip
