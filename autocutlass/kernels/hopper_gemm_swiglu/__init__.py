"""Hopper (sm_90a) SwiGLU GEMM family: ``hopper_gemm`` over a packed gate/up weight.

Serves ``GemmProblem``s with a SwiGLU epilogue (``Epilogue.swiglu``), which
``linear(x, w, bias, activation="swiglu")`` makes: w (2N, K) = cat([w_gate, w_up]), the result
``silu(x w_gate^T + b_gate) * (x w_up^T + b_up)`` (M, N) from one GEMM of N = 2N columns, whose
epilogue pairs each gate column with its up column in registers: the (M, 2N) intermediate is
never written, and a gated MLP's two projections read x once.

Modules: ``kernel`` (``HopperGemmSwigluKernel``: ``HopperGemmKernel`` reading B through a
hierarchical TMA view that puts a tile's gate rows and up rows side by side, with the pairing
epilogue and half-width stores), ``compile`` (its compile key and caches), ``check``
(``hopper_gemm``'s rules on the fused GEMM, less swap_ab, split-K, tf32/fp8 and an N-major
weight; N/2 a multiple of tile_n/2), ``sources``. Space and seeds are ``hopper_gemm``'s for the
fused GEMM, filtered by ``check``, with the cooperative 128x256 and 128x128 tiles first;
runners are ``hopper_gemm``'s calling this family's compiled functions. On by default since its
GPU tests passed (``tests/test_gpu_swiglu.py``, an H100, 2026-11-25); ``AUTOCUTLASS_SWIGLU_KERNELS=0``
switches it off, and ``linear(..., activation="swiglu")`` then runs torch's ``F.linear`` then
``silu(g) * u``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocutlass.errors import CantImplement
from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily, Raster, Schedule
from autocutlass.kernels.hopper_gemm_swiglu import check as swiglu_check
from autocutlass.kernels.hopper_gemm_swiglu import sources
from autocutlass.ops.gemm.problem import GemmProblem

__all__ = ["HopperGemmSwigluFamily"]


def _not_gemm(problem: Any) -> str:
    return f"{problem.describe()} is not a GEMM with a SwiGLU epilogue"


class HopperGemmSwigluFamily(HopperGemmFamily):
    name = "hopper_gemm_swiglu"
    SOURCE_FILES = sources.SOURCE_FILES

    def __init__(self, cache_dir: Path | None = None) -> None:
        super().__init__(cache_dir)
        self._plain = HopperGemmFamily(cache_dir)  # space and seeds of the fused GEMM

    def source_hash(self) -> str:
        return sources.source_hash()

    def supports(self, problem: Any) -> str | None:
        if not isinstance(problem, GemmProblem):
            return _not_gemm(problem)
        return swiglu_check.problem_supported(problem)

    def space(self, problem: Any) -> Sequence[HopperGemmConfig]:
        return [c for c in self._plain.space(swiglu_check.plain(problem)) if swiglu_check.check(c, problem) is None]

    def check(self, config: HopperGemmConfig, problem: Any) -> str | None:
        if not isinstance(problem, GemmProblem):
            return _not_gemm(problem)
        return swiglu_check.check(config, problem)

    def seeds(self, problem: Any) -> Sequence[HopperGemmConfig]:
        """The cooperative 128x256 tile (2-CTA clusters), 128x128 in ping-pong, then the fused
        GEMM's own seeds that pass ``check``. Unmeasured guesses: to be replaced by tuned winners."""
        c = HopperGemmConfig
        guesses = [
            c(128, 256, 64, cluster_m=2, raster=Raster.ALONG_N, swizzle=8), c(128, 256, 64),
            c(128, 128, 64, schedule=Schedule.PINGPONG, cluster_m=2), c(128, 128, 64), c(64, 128, 128),
            *self._plain.seeds(swiglu_check.plain(problem)),
        ]  # fmt: skip
        return self.feasible_seeds(list(dict.fromkeys(guesses)), problem)

    def compile(self, config: HopperGemmConfig, problem: Any) -> Any:
        """A ``hopper_gemm`` runner calling this family's compiled functions (D is (M, N/2), no C)."""
        from autocutlass.kernels.hopper_gemm.runner import HopperGemmRunner
        from autocutlass.kernels.hopper_gemm_swiglu.compile import get_compiled

        if not isinstance(problem, GemmProblem):
            raise CantImplement(f"hopper_gemm_swiglu does not serve {problem.describe()}")
        why = swiglu_check.check(config, problem)
        if why is not None:
            raise CantImplement(why)
        return HopperGemmRunner(config, problem, self._cache_dir, compiler=get_compiled)
