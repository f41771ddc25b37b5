"""Which gated problems and configs the gated family serves: ``hopper_gemm``'s rules for the same
problem read as an additive one (the same operands, budgets and layouts), less what the
multiplying epilogue does not do: fp8 inputs, and workspace split-K (its reduce kernel runs the
additive epilogue)."""

from __future__ import annotations

import dataclasses

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.check import check as gemm_check
from autocutlass.kernels.hopper_gemm.check import problem_supported as gemm_problem_supported
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, SplitMode
from autocutlass.ops.gemm.problem import DType, GemmProblem


def additive(problem: GemmProblem) -> GemmProblem:
    """``problem`` with its epilogue's C added instead of multiplied: what ``hopper_gemm``'s rules judge."""
    return dataclasses.replace(problem, epilogue=dataclasses.replace(problem.epilogue, c_mul=False))


def problem_supported(problem: GemmProblem) -> str | None:
    if not problem.epilogue.c_mul:
        return "the gated family serves only a multiplying epilogue (linear's mul=)"
    if problem.a_dtype is DType.E4M3:
        return "fp8 GEMMs have no multiplying epilogue"
    return gemm_problem_supported(additive(problem))


def check(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    why = problem_supported(problem)
    if why is not None:
        return why
    if config.split_k > 1 and config.split_mode is SplitMode.WORKSPACE:
        return "workspace split-K: its reduce kernel runs the additive epilogue"
    if config.n_split:
        return ("tile_m=192 (consumers split along N) is validated on the GPU for the GEMM family's own "
                "epilogues only: use tile_m 64, 128 or 256")
    return gemm_check(config, additive(problem), acc_regs=budgets.ACC_REGS_MAX)
