"""Hopper (sm_90a) gated GEMM family: ``hopper_gemm`` with a multiplying epilogue.

Serves ``GemmProblem``s whose epilogue multiplies by C after the activation
(``Epilogue.c_mul``: ``D = act(alpha * A @ B + bias) * C``), which ``linear(x, w, bias,
activation=..., mul=m)`` makes: a gated MLP's ``act(x W_gate^T) * (x W_up^T)`` as one GEMM whose
epilogue reads the up projection, instead of a GEMM plus an activation pass plus a multiply
pass over the intermediate (each a read and a write of it).

Modules: ``kernel`` (``HopperGemmGatedKernel``: ``HopperGemmKernel`` with the multiplying
register epilogue), ``compile`` (its compile key and caches), ``check`` (``hopper_gemm``'s rules
on the additive twin, less fp8 and workspace split-K), ``sources``. Space and seeds are
``hopper_gemm``'s without workspace split-K; runners are ``hopper_gemm``'s calling this family's
compiled functions. On by default since its GPU tests passed (``tests/test_gpu_gated.py``, an
H100, 2026-11-25); ``AUTOCUTLASS_GATED_KERNELS=0`` switches it off, and ``linear(..., mul=)`` then
runs torch's ``act(F.linear) * mul``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocutlass.errors import CantImplement
from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily, swap_dp_candidate
from autocutlass.kernels.hopper_gemm.config import SplitMode
from autocutlass.kernels.hopper_gemm_gated import check as gated_check
from autocutlass.kernels.hopper_gemm_gated import sources
from autocutlass.ops.gemm.problem import GemmProblem

__all__ = ["HopperGemmGatedFamily"]


def _own_kernel(configs: Sequence[HopperGemmConfig], problem: GemmProblem) -> list[HopperGemmConfig]:
    """The additive GEMM's configs this family's kernel can run at all: no workspace split-K (its
    reduce kernel runs the additive epilogue), no 192-row tiles split along N and, beyond decode
    GEMMs, no swapped orientation (``hopper_gemm.swap_dp_candidate``; neither validated with the
    multiplying epilogue). The rest is judged per problem by ``check`` (``search.space``)."""
    no_swap = swap_dp_candidate(problem)
    return [c for c in configs if not (c.split_k > 1 and c.split_mode is SplitMode.WORKSPACE) and not c.n_split
            and not (no_swap and c.swap_ab)]  # fmt: skip


class HopperGemmGatedFamily(HopperGemmFamily):
    name = "hopper_gemm_gated"
    SOURCE_FILES = sources.SOURCE_FILES

    def __init__(self, cache_dir: Path | None = None) -> None:
        super().__init__(cache_dir)
        self._additive = HopperGemmFamily(cache_dir)  # space and seeds of the additive twin

    def source_hash(self) -> str:
        return sources.source_hash()

    def supports(self, problem: Any) -> str | None:
        if not isinstance(problem, GemmProblem):
            return f"{problem.describe()} is not a GEMM with a multiplying epilogue"
        return gated_check.problem_supported(problem)

    def space(self, problem: Any) -> Sequence[HopperGemmConfig]:
        return _own_kernel(self._additive.space(gated_check.additive(problem)), problem)

    def check(self, config: HopperGemmConfig, problem: Any) -> str | None:
        if not isinstance(problem, GemmProblem):
            return f"{problem.describe()} is not a GEMM with a multiplying epilogue"
        return gated_check.check(config, problem)

    def seeds(self, problem: Any) -> Sequence[HopperGemmConfig]:
        guesses = _own_kernel(self._additive.seeds(gated_check.additive(problem)), problem)
        return self.feasible_seeds(guesses, problem)

    def compile(self, config: HopperGemmConfig, problem: Any) -> Any:
        """A ``hopper_gemm`` runner calling this family's compiled functions."""
        from autocutlass.kernels.hopper_gemm.runner import HopperGemmRunner
        from autocutlass.kernels.hopper_gemm_gated.compile import get_compiled

        if not isinstance(problem, GemmProblem):
            raise CantImplement(f"hopper_gemm_gated does not serve {problem.describe()}")
        why = gated_check.check(config, problem)
        if why is not None:
            raise CantImplement(why)
        return HopperGemmRunner(config, problem, self._cache_dir, compiler=get_compiled)
