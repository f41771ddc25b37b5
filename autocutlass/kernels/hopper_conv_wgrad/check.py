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

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_conv.check import problem_supported as fprop_supported
from autocutlass.kernels.hopper_conv_wgrad.config import (
    CLUSTERS,
    SERIAL_SPLIT_MAX,
    SLAB_GROUPS,
    SPLIT_K,
    SPLIT_MAX,
    SWIZZLE,
    TAP_CHANNELS,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperConvWgradConfig,
    SplitMode,
)
from autocutlass.kernels.hopper_conv_wgrad.plan import implicit_gemm
from autocutlass.kernels.hopper_gemm.check import check as gemm_check
from autocutlass.kernels.rules import first_broken, tile_domain
from autocutlass.ops.gemm.problem import DType, Epilogue

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

INPUT_DTYPES = (DType.BF16, DType.FP16)

Rule = Callable[[HopperConvWgradConfig, "ConvProblem"], "str | None"]

SPLIT_DOMAIN = range(1, SPLIT_MAX + 1)
"""The split counts a config may take: every count up to ``SPLIT_MAX`` (the slab sum's limit). The
space offers ``SPLIT_K`` and, per tile shape, the count that fills a wave of the GPU
(``hopper_conv_wgrad.layer_splits``)."""


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
    why = tile_domain(config, (TILE_M, TILE_N, TILE_K), swizzle=SWIZZLE, split_k=SPLIT_DOMAIN, clusters=CLUSTERS)
    if why is not None:
        return why
    return None


def _channel_tile(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    # Each tile's im2col boxes load tile_n channels of one tap; TMA zero-fills channels past C.
    # (Several taps per tile: _taps.)
    if config.tap_channels:
        return None
    smallest = min(TILE_N)
    useful = -(-problem.c // smallest) * smallest
    if config.tile_n > useful:
        return (
            f"tile_n={config.tile_n} > C={problem.c} rounded up to {smallest}: every im2col box would load "
            f"{config.tile_n - problem.c} zero channels of each tap; use tile_n={smallest}"
        )
    return None


def _taps(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    t = config.tap_channels
    if t == 0:
        return None
    if t not in TAP_CHANNELS:
        return f"tap_channels={t} is not one of {TAP_CHANNELS}"
    if problem.c % t:
        return f"tap_channels={t}: tiles across the taps load boxes of {t} channels; the layer's C={problem.c} is not a multiple"
    if config.tile_n % t or config.tile_n == t:
        return f"tile_n={config.tile_n} must hold two or more boxes of {t} channels (a multiple of {t}, above it)"
    if problem.c != t and problem.c % config.tile_n == 0:
        return (f"tile_n={config.tile_n} divides C={problem.c}: one tap per tile wastes no columns; use "
                "tap_channels=0")  # fmt: skip
    return None


WORKSPACE_SLAB_BYTES = 64 * 2**20
"""The most scratch workspace split-K's slabs may take (S x L x K x N fp32): the slabs stay
allocated with the runner, per device and stream."""


def _split(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    if config.split_k > 1 and config.stream_k:
        return "stream_k divides the pixel loop among the CTAs itself: use split_k=1"
    if config.split_k > SERIAL_SPLIT_MAX and config.split_mode is not SplitMode.WORKSPACE:
        return f"split_k={config.split_k}: serial split-K chains at most {SERIAL_SPLIT_MAX} splits; use split_mode=workspace"
    if config.slab_groups != 1:
        if config.slab_groups not in SLAB_GROUPS:
            return f"slab_groups={config.slab_groups} is not one of {SLAB_GROUPS}"
        if config.split_mode is not SplitMode.WORKSPACE or config.split_k < 2 * config.slab_groups:
            return (f"slab_groups={config.slab_groups} groups the workspace slab sum: it needs split_mode=workspace "
                    f"and split_k >= {2 * config.slab_groups} (two slabs per group)")  # fmt: skip
    if config.split_k > 1 and config.split_mode is SplitMode.WORKSPACE:
        gm = implicit_gemm(problem, config.tap_channels)
        slab_bytes = config.split_k * gm.l * gm.m * (-(-gm.n // 4) * 4) * 4
        if slab_bytes > WORKSPACE_SLAB_BYTES:
            return (f"workspace split-K: {config.split_k} slabs of dw in fp32 take {slab_bytes / 2**20:.0f} MiB, more "
                    f"than {WORKSPACE_SLAB_BYTES // 2**20} MiB; use fewer splits")  # fmt: skip
    return None


RULES: tuple[Rule, ...] = (_domain, _taps, _channel_tile, _split)


def check(config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
    """None if ``config`` can run ``problem``, else the first broken rule's reason."""
    reason = problem_supported(problem)
    if reason is not None:
        return reason
    return first_broken(RULES, config, problem) or gemm_check(
        config.gemm_config(), implicit_gemm(problem, config.tap_channels), split_k=SPLIT_DOMAIN,
        acc_regs=budgets.ACC_REGS_MAX,
    )
