"""Feasibility of (config, conv problem) for the Hopper implicit-GEMM conv2d, in pure Python.

Three layers of rules, the first broken one's reason wins:

1. ``problem_supported``: what no config can serve (direction, groups, dtypes, TMA alignment of
   the channels, and the limits of Hopper's im2col TMA descriptor for a 4-D NHWC tensor: bounding
   box corners within [-128, 127], filter offsets below 255, traversal strides of at most 8).
2. The conv family's own axes (``_domain``, ``_channel_tile``).
3. The GEMM family's rules on the implicit GEMM the kernel runs (WGMMA shape, accumulator
   registers, multicast slices, split-K, shared memory): the conv kernel is the GEMM kernel's
   consumers and epilogue behind an im2col producer, so those rules hold unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_conv.config import (
    CLUSTERS,
    SPLIT_K,
    SWIZZLE,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperConvConfig,
)
from autocutlass.kernels.hopper_conv.plan import implicit_gemm, output_size
from autocutlass.kernels.hopper_gemm.check import ACC_REGS_WIDE
from autocutlass.kernels.hopper_gemm.check import check as gemm_check
from autocutlass.kernels.rules import first_broken, tile_domain
from autocutlass.ops.gemm.problem import DType

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

INPUT_DTYPES = (DType.BF16, DType.FP16)
OUTPUT_DTYPES = (DType.BF16, DType.FP16, DType.FP32)

IM2COL_CORNER_MIN = -128
IM2COL_CORNER_MAX = 127
"""A 4-D (N, H, W, C) im2col tensor map takes two signed 8-bit bounding-box corner offsets per
side (cuTensorMapEncodeIm2col): lower corner = -pad, upper corner = pad - (R-1)*dilation."""
IM2COL_OFFSET_LIMIT = 255
"""The im2col offsets of one load (the filter tap times the dilation, per spatial dimension) are
8-bit for a 4-D tensor; like CUTLASS we require (R-1)*dilation < 255."""
IM2COL_MAX_TRAVERSAL_STRIDE = 8
"""cuTensorMapEncodeIm2col's elementStrides (the convolution stride) are at most 8."""
INT32_MAX = 2**31 - 1
"""Output pixels (N*P*Q) are indexed with 32-bit coordinates."""

Rule = Callable[[HopperConvConfig, "ConvProblem"], "str | None"]


def _im2col_limits(problem: ConvProblem) -> str | None:
    for axis, pad, taps, dil, stride in (
        ("h", problem.pad_h, problem.r, problem.dil_h, problem.stride_h),
        ("w", problem.pad_w, problem.s, problem.dil_w, problem.stride_w),
    ):
        filt = "R" if axis == "h" else "S"
        if stride > IM2COL_MAX_TRAVERSAL_STRIDE:
            return (
                f"stride_{axis}={stride}: the im2col TMA's traversal stride is at most "
                f"{IM2COL_MAX_TRAVERSAL_STRIDE}"
            )
        reach = (taps - 1) * dil
        if reach >= IM2COL_OFFSET_LIMIT:
            return (
                f"({filt}-1)*dil_{axis} = {reach}: the im2col TMA's filter offsets are 8-bit for a 2-D "
                f"convolution, so the filter's reach must be below {IM2COL_OFFSET_LIMIT}"
            )
        lower, upper = -pad, pad - reach
        for name, v in (("lower", lower), ("upper", upper)):
            if not IM2COL_CORNER_MIN <= v <= IM2COL_CORNER_MAX:
                return (
                    f"im2col {name} corner along {axis.upper()} is {v} (pad_{axis}={pad}, ({filt}-1)*dil_{axis}={reach}); "
                    f"a 4-D im2col TMA descriptor allows [{IM2COL_CORNER_MIN}, {IM2COL_CORNER_MAX}]"
                )
    return None


def problem_supported(problem: ConvProblem) -> str | None:
    """Reasons that no config of the family can serve ``problem``."""
    if getattr(problem, "op", None) != "conv2d":
        return f"op {getattr(problem, 'op', None)!r} is not conv2d"
    if problem.direction != "fprop":
        return f"hopper_conv computes fprop only (y from x and w), not {problem.direction!s}"
    if problem.groups != 1:
        return f"groups={problem.groups}: hopper_conv serves dense convolutions (groups = 1) only"
    if problem.x_dtype not in INPUT_DTYPES:
        return f"x dtype {problem.x_dtype.value} is not one of {[d.value for d in INPUT_DTYPES]}"
    if problem.w_dtype != problem.x_dtype:
        return f"x and w dtypes differ ({problem.x_dtype.value} vs {problem.w_dtype.value}); WGMMA needs them equal"
    if problem.y_dtype not in OUTPUT_DTYPES:
        return f"y dtype {problem.y_dtype.value} is not one of {[d.value for d in OUTPUT_DTYPES]}"
    if problem.acc_dtype is not DType.FP32:
        return f"accumulator {problem.acc_dtype.value} is not fp32"
    for name, align in (("x", problem.align_x), ("w", problem.align_w), ("y", problem.align_y)):
        if align < budgets.TMA_ALIGN_BYTES:
            return (
                f"{name} is only {align}-byte aligned (base pointer or a stride); TMA needs "
                f"{budgets.TMA_ALIGN_BYTES}"
            )
    c_unit = budgets.TMA_ALIGN_BYTES // problem.x_dtype.bytes
    if problem.c % c_unit:
        return (
            f"C={problem.c} input channels: a pixel's channels must be whole {budgets.TMA_ALIGN_BYTES}-byte TMA units "
            f"(C a multiple of {c_unit} for {problem.x_dtype.value}); pad the channels"
        )
    k_unit = budgets.TMA_ALIGN_BYTES // min(problem.y_dtype.bytes, problem.w_dtype.bytes)
    if problem.k % k_unit:
        return (
            f"K={problem.k} output channels: y's pixel rows must be whole {budgets.TMA_ALIGN_BYTES}-byte units "
            f"(K a multiple of {k_unit}); pad the output channels"
        )
    p, q = output_size(problem)
    if p < 1 or q < 1:
        return f"the output is empty (P={p}, Q={q}): the filter's reach exceeds the padded input"
    if problem.n * p * q > INT32_MAX:
        return f"N*P*Q = {problem.n * p * q} output pixels exceed the 32-bit coordinates of the im2col TMA"
    return _im2col_limits(problem)


SERIAL_SPLIT_MAX = 16
"""The most splits of the K loop (summed serially through a turnstile) a config may take."""
SPLIT_DOMAIN = range(1, SERIAL_SPLIT_MAX + 1)
"""The split counts a config may take. The space offers ``SPLIT_K``'s and, per tile shape of a
few-tile layer, the one that fills a wave (``hopper_conv.layer_splits``)."""


def _domain(config: HopperConvConfig, problem: ConvProblem) -> str | None:
    why = tile_domain(config, (TILE_M, TILE_N, TILE_K), swizzle=SWIZZLE, split_k=SPLIT_DOMAIN, clusters=CLUSTERS)
    if why is not None:
        return why
    return None


def _channel_tile(config: HopperConvConfig, problem: ConvProblem) -> str | None:
    # Every K block loads tile_k channels of one filter tap; TMA zero-fills channels past C.
    # A tile_k beyond C rounded up to the smallest tile_k loads whole blocks of zeros.
    smallest = min(TILE_K)
    useful = -(-problem.c // smallest) * smallest
    if config.tile_k > useful:
        return (
            f"tile_k={config.tile_k} > C={problem.c} rounded up to {smallest}: every K block would load "
            f"{config.tile_k - problem.c} zero channels of each tap; use tile_k={smallest}"
        )
    return None


RULES: tuple[Rule, ...] = (_domain, _channel_tile)


N_SPLIT_ACC_REGS = ACC_REGS_WIDE
"""fp32 accumulator registers per consumer thread a 192-row tile (the GEMM kernel's N-split
cooperative consumers, ``HopperGemmConfig.n_split``) may hold here: 192x256, 192 per thread, as
the GEMM family's own wide tiles. ptxas (CUDA 13.0 on DSL 4.8.1's PTX, no GPU; session 44,
``benchmarks/probes/conv_spill_probe.py``, ``benchmarks/results/2026-12-08-cpu-s44-conv-spills.txt``)
reports no spills for the conv kernel's 192x256 and 192x224 tiles, unclustered and in 1x2 and 2x1
clusters, with the plain, bias + ReLU and direct-store epilogues, 60 bytes with GELU (once per tile,
in the epilogue), and 856 bytes of spill stores with a residual (an epilogue that reads C): the GEMM
family's rule (``hopper_gemm.check``'s ``_registers``) refuses that one (192x128, 96 registers, spills
8 bytes with a residual, bias and ReLU, and is allowed). Every other conv tile keeps
``budgets.ACC_REGS_MAX``."""


def check(config: HopperConvConfig, problem: ConvProblem) -> str | None:
    """None if ``config`` can run ``problem``, else the first broken rule's reason."""
    reason = problem_supported(problem)
    if reason is not None:
        return reason
    gemm = config.gemm_config()
    regs = N_SPLIT_ACC_REGS if gemm.n_split else budgets.ACC_REGS_MAX
    return first_broken(RULES, config, problem) or gemm_check(gemm, implicit_gemm(problem, config.tile_k), acc_regs=regs)
