"""Hopper (sm_90a) warp-specialised persistent GEMM family.

Modules: ``config`` (the frozen config and its axes), ``plan`` (derived compile-time plan and
the shared-memory arithmetic), ``check`` (feasibility with reasons), ``space`` (the configs a
problem gets), ``picks`` (the wave model's ranking and the seeds), ``kernel`` (the CuTe DSL
kernel), ``compile`` (symbolic-shape compile, in-process and on-disk caches), ``runner`` (the
callable), ``sources`` (the files the family's hash covers). ``kernel`` and ``reduce`` import the
DSL when imported, ``compile`` only to compile; a runner served from the kernel cache never
imports it (see ``runner``).

The family serves ``GemmProblem``s and any other op's problem that is a GEMM in disguise: a
problem with a ``gemm_lowering()`` returning a lowering (``.gemm``, the GEMM it is, and
``.runner(gemm_runner)``, the GEMM runner adapted to the op's calling convention), e.g. a
pointwise NHWC convolution (``ops.conv.problem.GemmLowering``). Space, check and seeds are those
of the lowered GEMM; records stay keyed by the op's own problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocutlass.errors import CantImplement
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_gemm import picks, sources
from autocutlass.kernels.hopper_gemm import space as space_rules
from autocutlass.kernels.hopper_gemm.check import check, problem_supported
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, Raster, Schedule, SplitMode, Store
from autocutlass.kernels.hopper_gemm.picks import (  # noqa: F401 - the family's public helpers
    BUCKET_FIT_TOLERANCE,
    GEMM_TILE_RATES,
    LONG_K_MIN,
    LONG_K_RATIO,
    MODEL_TILE_K,
    N_MAJOR_B_TILE_N,
    RASTER_ALONG_N_RATIO,
    SPLIT_PICKS,
    cluster_waves,
    model_picks,
    modelled_configs,
    reduction_heavy,
)
from autocutlass.kernels.hopper_gemm.space import (  # noqa: F401 - the family's public helpers
    BALANCE_MIN,
    BALANCED_SPLITS_MAX,
    NARROW_N,
    SMALL_M_DIRECT_STORE,
    SPLIT_K_MAX_OUTPUT,
    SPLIT_K_MIN_K,
    STREAM_K_MIN_K,
    SWAP_AB_MAX_M,
    SWAP_AB_MIN_N,
    SWAP_SPLIT_ROWS,
    TILE_N_NARROW,
    TILE_N_WIDE,
    TUNED_STAGES,
    data_parallel_only,
    space_tile_ns,
    split_counts,
    swap_candidate,
    swap_dp_candidate,
    swap_split_candidate,
    swap_tile_ns,
    swapped_dp_configs,
    swapped_split_configs,
    tf32_swap_saves_copy,
    wide_tile,
)
from autocutlass.ops.gemm.problem import GemmProblem

__all__ = ["HopperGemmConfig", "HopperGemmFamily", "Raster", "Schedule", "SplitMode", "Store", "check"]


def as_gemm(problem: Any) -> GemmProblem | None:
    """``problem`` itself if it is a GEMM, the GEMM it lowers to, or None."""
    if isinstance(problem, GemmProblem):
        return problem
    lower = getattr(problem, "gemm_lowering", None)
    lowering = lower() if lower is not None else None
    return None if lowering is None else lowering.gemm


def _gemm(problem: Any) -> GemmProblem:
    g = as_gemm(problem)
    if g is None:
        raise ValueError(f"hopper_gemm does not serve {problem.describe()}: it is not a GEMM")
    return g


class HopperGemmFamily(KernelFamily[HopperGemmConfig]):
    name = "hopper_gemm"
    SOURCE_FILES = sources.SOURCE_FILES

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir

    def source_hash(self) -> str:
        return sources.source_hash()

    def supports(self, problem: Any) -> str | None:
        g = as_gemm(problem)
        if g is None:
            return f"{problem.describe()} is not a GEMM (only pointwise stride-1 unpadded NHWC convolutions are)"
        return problem_supported(g)

    def space(self, problem: Any) -> Sequence[HopperGemmConfig]:
        return space_rules.space(_gemm(problem))

    def check(self, config: HopperGemmConfig, problem: Any) -> str | None:
        g = as_gemm(problem)
        return check(config, g) if g is not None else f"{problem.describe()} is not a GEMM"

    def seeds(self, problem: Any) -> Sequence[HopperGemmConfig]:
        return self.feasible_seeds(picks.seeds(_gemm(problem)), problem)

    def fits(self, config: HopperGemmConfig, tuned: Any, problem: Any) -> bool:
        """The wave model's verdict (``picks.fits``) on the GEMMs the two problems are."""
        g_tuned, g = as_gemm(tuned), as_gemm(problem)
        return g_tuned is None or g is None or picks.fits(config, g_tuned, g)

    def config_to_dict(self, config: HopperGemmConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperGemmConfig:
        return HopperGemmConfig.from_dict(d)

    def compile(self, config: HopperGemmConfig, problem: Any) -> Any:
        """A ``GemmRunner`` for a GEMM; for a lowered problem, the lowering's adapter around one."""
        from autocutlass.kernels.hopper_gemm.runner import HopperGemmRunner

        if isinstance(problem, GemmProblem):
            return HopperGemmRunner(config, problem, self._cache_dir)
        lowering = problem.gemm_lowering()
        if lowering is None:
            raise CantImplement(f"hopper_gemm does not serve {problem.describe()}: it is not a GEMM")
        return lowering.runner(HopperGemmRunner(config, lowering.gemm, self._cache_dir))

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
            int(config.swap_ab),
            int(config.stream_k),
            int(config.interleave),
        )
