"""A stride-1 conv2d dgrad as a forward convolution, in pure Python (no torch at import).

For stride 1, the input gradient of y = conv(x, w; padding p, dilation d) is

    dx = conv(dy, w'; padding d*(R-1) - p, dilation d, stride 1),
    w'[c, k, r, s] = w[k, c, R-1-r, S-1-s]

(the filter flipped in R and S, its two channel axes swapped): every input pixel gathers the
output pixels whose window covered it, through the filter taps traversed backwards. So the
fprop family's implicit GEMM (im2col TMA over dy, M = N*H*W input pixels, N_gemm = C,
K_gemm = K*R*S) computes dgrad unchanged, on ``w'``. The padding must be non-negative:
p <= d*(R-1) (a layer padded more than its filter reaches is left to cuDNN).

Strided dgrad (stride > 1) is not this: dy would first be dilated by the stride (zeros between
its pixels), which the im2col TMA cannot express, and most of the implicit GEMM's work would be
multiplications by those zeros. It is not served here (cuDNN runs it, with this reason).

``transformed_weight`` builds ``w'`` (channels_last); the runner keeps the last one per weight
version (``runner.DgradRunner``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.types import Epilogue

if TYPE_CHECKING:
    import torch

TMA_ALIGN_BYTES = 16


def unsupported(problem: Any) -> str | None:
    """Why ``problem`` is not a dgrad this family maps onto a forward convolution, or None."""
    if getattr(problem, "op", None) != "conv2d":
        return f"op {getattr(problem, 'op', None)!r} is not conv2d"
    if problem.direction is not ConvDirection.DGRAD:
        return f"hopper_conv_dgrad computes dgrad only (dx from dy and w), not {problem.direction.value}"
    if problem.groups != 1:
        return f"groups={problem.groups}: hopper_conv_dgrad serves dense convolutions (groups = 1) only"
    if (problem.stride_h, problem.stride_w) != (1, 1):
        return (f"stride {problem.stride_h}x{problem.stride_w}: a strided dgrad is a convolution of dy dilated by the "
                "stride, which the im2col TMA cannot load (only stride-1 dgrad runs on the fprop kernel)")  # fmt: skip
    if problem.epilogue != Epilogue():
        return "a dgrad has no epilogue (no bias, residual or activation)"
    for axis, pad, taps, dil in (("h", problem.pad_h, problem.r, problem.dil_h), ("w", problem.pad_w, problem.s, problem.dil_w)):
        if pad > dil * (taps - 1):
            return (f"pad_{axis}={pad} exceeds the filter's reach {dil * (taps - 1)}: the transposed convolution would "
                    "need a negative padding")  # fmt: skip
    return None


def fprop_problem(problem: ConvProblem) -> ConvProblem:
    """The forward convolution computing ``problem``'s dx: x' = dy (N, K, P, Q), w' = the flipped,
    channel-swapped filter (C, K, R, S), y' = dx (N, C, H, W). Assumes ``unsupported`` is None."""
    elt = problem.w_dtype.bytes
    w_row = problem.k * elt  # w' is a new channels_last tensor: rows of K channels
    return dataclasses.replace(
        problem,
        direction=ConvDirection.FPROP,
        h=problem.p, w=problem.q, c=problem.k, k=problem.c,
        pad_h=problem.dil_h * (problem.r - 1) - problem.pad_h, pad_w=problem.dil_w * (problem.s - 1) - problem.pad_w,
        align_x=problem.align_y, align_w=TMA_ALIGN_BYTES if w_row % TMA_ALIGN_BYTES == 0 else w_row & -w_row,
        align_y=problem.align_x,
    )  # fmt: skip


def transformed_weight(w: torch.Tensor) -> torch.Tensor:
    """w' (C, K, R, S), channels_last: ``w`` flipped in R and S, its channel axes swapped."""
    import torch

    return w.flip((2, 3)).transpose(0, 1).contiguous(memory_format=torch.channels_last)
