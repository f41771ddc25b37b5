"""Feasibility of (config, conv wgrad problem) for the Hopper implicit-GEMM wgrad, in pure Python.

Three layers of rules, the first broken one's reason wins:

1. ``problem_supported``: what no config can serve: the direction, a plain epilogue, and what
   the forward convolution of the same layer needs of the hardware (``hopper_conv.check``'s
   rules: groups, dtypes, 16-byte channel rows, the im2col TMA descriptor's limits), since the
   activation tile is loaded by the same im2col TMA; and 16-bit inputs (WGMMA reads the
   channels-contiguous dy and x tiles as MN-major operands, which tf32 WGMMA cannot).
2. The family's own axes (``_domain``, ``_channel_tile``, ``_split``).
3. The GEMM family's rules on the implicit GEMM the kernel runs (WGMMA shape, accumulator
   registers, MN-major swizzle atoms and multicast slices, split-K / stream-K, shared memory).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from autocutlass.kernels.hopper_conv.check import problem_supported as fprop_supported
from autocutlass.kernels.hopper_conv_wgrad.config import (
    CLUSTERS,
    SPLIT_K,
    SWIZZLE,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperConvWgradConfig,
)
from autocutlass.kernels.hopper_conv_wgrad.plan import implicit_gemm
from autocutlass.kernels.hopper_gemm.check import check as gemm_check
from autocutlass.kernels.rules import first_broken, tile_domain
from autocutlass.ops.gemm.problem import DType, Epilogue

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

INPUT_DTYPES = (DType.BF16, DType.FP16)

Rule = Callable[[HopperConvWgradConfig, "ConvProblem"], "str | None"]


def problem_supported(problem: ConvProblem) -> str | None:
    """Reasons that no config of the family can serve ``problem``."""
    from autocutlass.ops.conv.problem import ConvDirection

    if getattr(problem, "op", None) != "conv2d":
        return f"op {getattr(problem, 'op', None)!r} is not conv2d"
    if problem.direction is not ConvDirection.WGRAD:
        return f"hopper_conv_wgrad computes wgrad only (dw from dy and x), not {problem.direction.value}"
    if problem.epilogue != Epilogue():
        return "a wgrad has no epilogue (no bias, residual or activation)"
    if problem.x_dtype not in INPUT_DTYPES:
        return (f"x dtype {problem.x_dtype.value}: wgrad reads dy and x channels-contiguous (MN-major), which "
                f"only 16-bit WGMMA can; served: {[d.value for d in INPUT_DTYPES]}")  # fmt: skip
    if not problem.y_dtype == problem.w_dtype == problem.x_dtype:
        return (f"dtypes x {problem.x_dtype.value}, w {problem.w_dtype.value}, y {problem.y_dtype.value} differ: dy "
                "and x must be one 16-bit type and dw is written in it")  # fmt: skip
    why = fprop_supported(dataclasses.replace(problem, direction=ConvDirection.FPROP))
    return None if why is None else f"the layer's im2col load of x: {why}"


def _domain(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    why = tile_domain(config, (TILE_M, TILE_N, TILE_K), swizzle=SWIZZLE, split_k=SPLIT_K, clusters=CLUSTERS)
    if why is not None:
        return why
    return None


def _channel_tile(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    # Each tile's im2col boxes load tile_n channels of one tap; TMA zero-fills channels past C.
    smallest = min(TILE_N)
    useful = -(-problem.c // smallest) * smallest
    if config.tile_n > useful:
        return (
            f"tile_n={config.tile_n} > C={problem.c} rounded up to {smallest}: every im2col box would load "
            f"{config.tile_n - problem.c} zero channels of each tap; use tile_n={smallest}"
        )
    return None


def _split(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    if config.split_k > 1 and config.stream_k:
        return "stream_k divides the pixel loop among the CTAs itself: use split_k=1"
    return None


RULES: tuple[Rule, ...] = (_domain, _channel_tile, _split)


def check(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    """None if ``config`` can run ``problem``, else the first broken rule's reason."""
    reason = problem_supported(problem)
    if reason is not None:
        return reason
    return first_broken(RULES, config, problem) or gemm_check(config.gemm_config(), implicit_gemm(problem))
