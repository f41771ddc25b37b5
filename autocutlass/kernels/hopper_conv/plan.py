"""A frozen ``ConvPlan``: everything the conv kernel is compiled from, derived once from
(config, problem).

Pure Python (no cutlass import). The conv kernel is the GEMM kernel with an im2col TMA producer,
so its plan is the GEMM family's ``Plan`` of the implicit GEMM (``implicit_gemm``: the stage
count, epilogue tile, warpgroup roles and shared-memory bill are the GEMM's arithmetic, reused
as is) plus what only a convolution has: the filter size R x S, which is compile-time.

Stride, padding and dilation are *not* in the plan: the im2col TMA descriptor is encoded on the
host at every launch, so they are run-time arguments and one compiled kernel serves every
stride, padding and dilation of its class. N, H, W, C and K are symbolic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_gemm.plan import Plan
from autocutlass.kernels.hopper_gemm.plan import make_plan as make_gemm_plan
from autocutlass.ops.gemm.problem import GemmProblem, Major

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem


@dataclass(frozen=True)
class ConvPlan:
    """The conv kernel's compile-time parameters for one (config, kernel class)."""

    gemm: Plan
    """The implicit GEMM's plan (tiles, cluster, stages, schedule, dtypes, epilogue, ...)."""
    r: int
    """Filter height (taps along H)."""
    s: int
    """Filter width (taps along W)."""


def output_size(problem: ConvProblem) -> tuple[int, int]:
    """(P, Q): the output's height and width."""
    p = (problem.h + 2 * problem.pad_h - problem.dil_h * (problem.r - 1) - 1) // problem.stride_h + 1
    q = (problem.w + 2 * problem.pad_w - problem.dil_w * (problem.s - 1) - 1) // problem.stride_w + 1
    return p, q


def channel_blocks(c: int, tile_k: int) -> int:
    """K blocks per filter tap: C in blocks of ``tile_k`` channels, the last one zero-filled by TMA."""
    return -(-c // tile_k)


def implicit_gemm(problem: ConvProblem, tile_k: int | None = None) -> GemmProblem:
    """The forward convolution as the GEMM the kernel runs: A = im2col(x) (M = N*P*Q rows,
    K-contiguous), B = the filter (K-contiguous), D = y as (N*P*Q, K) row-major, C = the residual.

    With ``tile_k`` the GEMM's K is padded to whole channel blocks per tap (the kernel's
    K-loop trip count: ``channel_blocks(C, tile_k) * R * S`` blocks)."""
    p, q = output_size(problem)
    c = problem.c if tile_k is None else channel_blocks(problem.c, tile_k) * tile_k
    return GemmProblem(
        m=max(problem.n * p * q, 0), n=problem.k, k=c * problem.r * problem.s,
        a_dtype=problem.x_dtype, b_dtype=problem.w_dtype, d_dtype=problem.y_dtype, acc_dtype=problem.acc_dtype,
        c_dtype=problem.y_dtype if problem.epilogue.with_c else None,
        a_major=Major.ROW, b_major=Major.COL,
        align_a=problem.align_x, align_b=problem.align_w, align_c=problem.align_y, align_d=problem.align_y,
        epilogue=problem.epilogue,
    )  # fmt: skip


def make_plan(
    config: HopperConvConfig, problem: ConvProblem, smem_limit: int = budgets.SM90_SMEM_PER_BLOCK_OPTIN
) -> ConvPlan:
    """Derive the plan. Assumes ``check`` accepted the pair."""
    gemm = make_gemm_plan(config.gemm_config(), implicit_gemm(problem), smem_limit)
    return ConvPlan(gemm=gemm, r=problem.r, s=problem.s)
