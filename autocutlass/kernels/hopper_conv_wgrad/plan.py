"""A frozen ``WgradPlan``: everything the wgrad kernel is compiled from, derived once from
(config, problem).

Pure Python (no cutlass import). The wgrad kernel is the GEMM kernel with another producer, so
its plan is the GEMM family's ``Plan`` of the implicit GEMM (``implicit_gemm``) plus the filter
size R x S, which is compile-time. Stride, padding and dilation are run-time arguments (the
im2col descriptor is encoded at each launch); N, H, W, C and K are symbolic.

The implicit GEMM, batched over the R*S filter taps (batch l = r*S + s):

    dw[k, r, s, c] = sum over output pixels i = (n, p, q) of dy[i, k] * x_im2col(r, s)[i, c]

A = dy^T (K x NPQ, M-major: dy is channels-contiguous), B = the im2col of x at tap (r, s)
(NPQ x C, N-major: channels contiguous, exactly the box of output pixels x channels that the
fprop kernel's im2col TMA loads at one filter offset), D = dw as (K, C) per tap: the
channels_last filter (K, R, S, C) is (K, C) row-major matrices at offsets (r*S + s)*C.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig
from autocutlass.kernels.hopper_gemm.plan import Plan
from autocutlass.kernels.hopper_gemm.plan import make_plan as make_gemm_plan
from autocutlass.ops.gemm.problem import GemmProblem, Major

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem


@dataclass(frozen=True)
class WgradPlan:
    """The wgrad kernel's compile-time parameters for one (config, kernel class)."""

    gemm: Plan
    """The implicit GEMM's plan (tiles, cluster, stages, schedule, split-K / stream-K, dtypes)."""
    r: int
    """Filter height (taps along H)."""
    s: int
    """Filter width (taps along W)."""
    tap_channels: int = 0
    """``HopperConvWgradConfig.tap_channels``: 0, or the channels of each im2col box of a tile that
    spans the flattened R*S*C columns (then the GEMM is (K, R*S*C) unbatched)."""
    channel_blocks: int = 1
    """With ``tap_channels``: C // tap_channels, the boxes of one tap (1: every box is a whole tap,
    C = tap_channels). Compile-time, so C is fixed in such a kernel class."""


def output_size(problem: ConvProblem) -> tuple[int, int]:
    """(P, Q): the forward convolution's output height and width."""
    p = (problem.h + 2 * problem.pad_h - problem.dil_h * (problem.r - 1) - 1) // problem.stride_h + 1
    q = (problem.w + 2 * problem.pad_w - problem.dil_w * (problem.s - 1) - 1) // problem.stride_w + 1
    return p, q


def implicit_gemm(problem: ConvProblem, tap_channels: int = 0) -> GemmProblem:
    """The weight gradient as the GEMM the kernel runs (see the module docstring): batched over
    the taps (N = C, L = R*S), or with ``tap_channels`` one GEMM with the taps side by side (N =
    R*S*C, L = 1)."""
    p, q = output_size(problem)
    taps = problem.r * problem.s
    return GemmProblem(
        m=problem.k, n=problem.c * (taps if tap_channels else 1), k=max(problem.n * p * q, 0),
        l=1 if tap_channels else taps,
        a_dtype=problem.x_dtype, b_dtype=problem.x_dtype, d_dtype=problem.w_dtype, acc_dtype=problem.acc_dtype,
        a_major=Major.COL, b_major=Major.ROW,
        align_a=problem.align_y, align_b=problem.align_x, align_d=problem.align_w,
    )  # fmt: skip


def make_plan(
    config: HopperConvWgradConfig, problem: ConvProblem, smem_limit: int = budgets.SM90_SMEM_PER_BLOCK_OPTIN
) -> WgradPlan:
    """Derive the plan. Assumes ``check`` accepted the pair."""
    gemm = make_gemm_plan(config.gemm_config(), implicit_gemm(problem, config.tap_channels), smem_limit)
    blocks = problem.c // config.tap_channels if config.tap_channels else 1
    return WgradPlan(gemm=gemm, r=problem.r, s=problem.s, tap_channels=config.tap_channels, channel_blocks=blocks)
