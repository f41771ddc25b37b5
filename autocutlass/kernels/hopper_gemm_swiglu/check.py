"""Which SwiGLU problems and configs the SwiGLU family serves: ``hopper_gemm``'s rules for the
fused GEMM read as a plain one (the same operands, budgets and layouts: N is the packed weight's
2I rows), less what the SwiGLU kernel does not do, each a named rule with its reason."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.check import check as gemm_check
from autocutlass.kernels.hopper_gemm.check import problem_supported as gemm_problem_supported
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig
from autocutlass.kernels.hopper_gemm.plan import epilogue_tile
from autocutlass.kernels.rules import first_broken
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

INPUT_DTYPES = (DType.BF16, DType.FP16)
TILE_N = (64, 128, 192, 256)
"""Fused tile widths: h = tile_n / 2 output columns per tile, a multiple of the 32-column
epilogue chunk (so no chunk straddles gate and up)."""


def plain(problem: GemmProblem) -> GemmProblem:
    """The fused GEMM with a plain epilogue (bias kept, no activation): what ``hopper_gemm``'s
    rules judge, and the problem the kernel's plan is made from."""
    epi = dataclasses.replace(problem.epilogue, swiglu=False)
    return dataclasses.replace(problem, epilogue=epi)


def problem_supported(problem: GemmProblem) -> str | None:
    if not problem.epilogue.swiglu:
        return "the SwiGLU family serves only a SwiGLU epilogue (linear's activation='swiglu')"
    if problem.a_dtype not in INPUT_DTYPES:
        return f"SwiGLU GEMMs take {[d.value for d in INPUT_DTYPES]} inputs, not {problem.a_dtype.value}"
    if problem.b_major is not Major.COL:
        return "the packed weight must be K-major (a row-major (2N, K) tensor): its TMA view splits the rows"
    if problem.n % 2:
        return f"the packed weight has {problem.n} rows, not an even number (gate rows then up rows)"
    return gemm_problem_supported(plain(problem))


Rule = Callable[[HopperGemmConfig, GemmProblem], "str | None"]


def _tile_n(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    if config.tile_n not in TILE_N:
        return f"tile_n={config.tile_n} is not one of {TILE_N} for a SwiGLU epilogue"
    half = config.tile_n // 2
    cols = problem.n // 2
    if cols % half:
        return (
            f"N={cols} output columns are not a multiple of tile_n/2={half}: each fused tile reads "
            f"{half} gate and {half} up rows through one TMA view"
        )
    _, epi_n = epilogue_tile(config, problem.d_dtype.bytes)
    if half % epi_n:
        return f"tile_n/2={half} is not a multiple of the {epi_n}-column epilogue chunk"
    return None


def _features(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    if config.swap_ab:
        return "swap_ab: the SwiGLU pairing runs along the kernel's N (the weight's rows); use swap_ab=False"
    if config.split_k > 1:
        return "split-K: the SwiGLU kernel tiles D by tile_n/2, which the split-K turnstiles do not; use split_k=1"
    if config.n_split:
        return ("tile_m=192 splits N between the consumers, one holding the gate half of the tile and the other "
                "the up half; the SwiGLU epilogue pairs them in one consumer's registers: use tile_m 64, 128 or 256")
    return None


RULES: tuple[Rule, ...] = (_features, _tile_n)


def check(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    """None if ``config`` can run the SwiGLU ``problem``, else the first broken rule's reason."""
    why = problem_supported(problem)
    if why is not None:
        return why
    return first_broken(RULES, config, problem) or gemm_check(config, plain(problem), acc_regs=budgets.ACC_REGS_MAX)
